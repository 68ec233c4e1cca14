//! [`IoError`]: a failed file-system call with the operation and the path.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::NotRegularFile;

/// A file-system call that failed: which operation, on which path, and the
/// `io::Error` the system returned (its raw OS error kept).
///
/// Cheap to clone (the `io::Error` is shared), so one failure can be handed
/// to every caller it covers and kept as a stopped writer's reason without
/// rebuilding the system's error. [`std::error::Error::source`] is the
/// `io::Error` itself.
///
/// ```
/// use std::error::Error as _;
/// # use felix_io::{FileSystem, IoError, OpenMode};
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("missing");
/// let err = FileSystem::os()
///     .open(&path, OpenMode::Read)
///     .map_err(|e| IoError::new("open", &path, e))
///     .unwrap_err();
/// assert_eq!(err.op(), "open");
/// assert_eq!(err.path(), path);
/// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
/// assert_eq!(err.raw_os_error(), Some(2));
/// assert!(err.to_string().starts_with(&format!("open {}: ", path.display())));
/// let source = err.source().and_then(|s| s.downcast_ref::<std::io::Error>());
/// assert_eq!(source.map(std::io::Error::kind), Some(std::io::ErrorKind::NotFound));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct IoError {
    op: &'static str,
    path: PathBuf,
    source: Arc<io::Error>,
}

impl IoError {
    /// `op` (such as `"fdatasync"` or `"rename"`) on `path` failed with
    /// `source`.
    pub fn new(op: &'static str, path: impl AsRef<Path>, source: io::Error) -> Self {
        Self {
            op,
            path: path.as_ref().to_path_buf(),
            source: Arc::new(source),
        }
    }

    /// The operation that failed, such as `"fdatasync"` or `"rename"`.
    pub fn op(&self) -> &'static str {
        self.op
    }

    /// The file or directory the operation was applied to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The kind of the system's error.
    pub fn kind(&self) -> io::ErrorKind {
        self.source.kind()
    }

    /// The system's error code (`errno`), when there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.source.raw_os_error()
    }

    /// The system's error itself.
    pub fn io_error(&self) -> &io::Error {
        &self.source
    }

    /// When the call refused the path for naming something other than a
    /// regular file: what it names (see [`crate::not_regular_file`]).
    pub fn not_regular_file(&self) -> Option<NotRegularFile> {
        crate::not_regular_file(&self.source)
    }
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.op, self.path.display(), self.source)
    }
}

impl std::error::Error for IoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}
