//! The one reader of the small checksummed side files a shard directory
//! holds (key, log-start, raft-state, clean-shutdown; felix-format's
//! [`side_file`] has their shared frame): it opens nothing but a regular
//! file, reads at most the longest valid file of the kind, and decodes it.
//!
//! Every caller gets the same classification: no file; a file too large to
//! be one (never read); a file that does not decode; a name that is not a
//! regular file; a read that failed. Recovery's readers are lenient — a
//! side file holds no record, so each of those is a
//! [`SideFileProblem`] carried by a note — while felix-raft, for which a
//! damaged raft-state file refuses the open, keeps the I/O error itself
//! ([`ReadSideFileError::Io`]).
//!
//! [`side_file`]: felix_format::side_file

use std::path::Path;

use felix_format::side_file::{SideFileError, SideFileKind};
use felix_io::{FileSystem, IoError, ReadSmallError, read_small_file};

use crate::report::SideFileProblem;

/// Why [`read_side_file`] could not give a side file's value: every way
/// a read can fail, so a caller may match on all three.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReadSideFileError {
    /// Opening, measuring or reading it failed; a name that is not a
    /// regular file fails at `open`
    /// ([`IoError::not_regular_file`](felix_io::IoError::not_regular_file)).
    #[error(transparent)]
    Io(#[from] IoError),
    /// It is longer than any valid file of its kind: it was not read.
    #[error("{} is {len} bytes, longer than any valid {file}", path.display())]
    TooLarge {
        /// The file.
        path: std::path::PathBuf,
        /// The kind of file.
        file: SideFileKind,
        /// Its length.
        len: u64,
    },
    /// Its bytes do not decode.
    #[error("{} does not decode", path.display())]
    Invalid {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: SideFileError,
    },
}

impl ReadSideFileError {
    /// The failure as a problem a note reports (`file` is the kind of file
    /// that was read).
    pub fn problem(&self, file: SideFileKind) -> SideFileProblem {
        match self {
            Self::Io(err) => SideFileProblem::of_io_error(file, err),
            Self::TooLarge { file, len, .. } => SideFileProblem::TooLarge {
                file: *file,
                len: *len,
            },
            Self::Invalid { source, .. } => SideFileProblem::Invalid(*source),
        }
    }
}

/// Reads the `file` side file at `path` and decodes it with `decode`:
/// `Ok(None)` when there is none. Opens nothing but a regular file, and
/// reads at most the longest valid file of the kind
/// ([`SideFileLayout::max_len`](felix_format::side_file::SideFileLayout::max_len)).
///
/// ```
/// use felix_format::log_start::{LogStart, MovedBy, decode_log_start, encode_log_start};
/// use felix_format::side_file::SideFileKind;
/// use felix_io::FileSystem;
/// use felix_recovery::{SideFileProblem, read_side_file};
///
/// let dir = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// let path = dir.path().join("log-start");
/// let read = |fs| read_side_file(fs, &path, SideFileKind::LogStart, decode_log_start);
/// assert!(matches!(read(&fs), Ok(None)));
/// let start = LogStart { start_offset: 7, first_segment_id: 0, moved_by: MovedBy::Deletion };
/// std::fs::write(&path, encode_log_start(&start))?;
/// assert_eq!(read(&fs)?, Some(start));
/// std::fs::write(&path, b"FLLS")?;
/// let problem = read(&fs).unwrap_err().problem(SideFileKind::LogStart);
/// assert_eq!(problem.name(), "LogStartLength");
/// assert!(matches!(problem, SideFileProblem::Invalid(_)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_side_file<T>(
    fs: &FileSystem,
    path: &Path,
    file: SideFileKind,
    decode: impl FnOnce(&[u8]) -> Result<T, SideFileError>,
) -> Result<Option<T>, ReadSideFileError> {
    let bytes = match read_small_file(fs, path, file.layout().max_len()) {
        Ok(None) => return Ok(None),
        Ok(Some(bytes)) => bytes,
        Err(ReadSmallError::TooLarge { len, .. }) => {
            return Err(ReadSideFileError::TooLarge {
                path: path.to_path_buf(),
                file,
                len,
            });
        }
        Err(ReadSmallError::Io(e)) => return Err(ReadSideFileError::Io(e)),
    };
    decode(&bytes)
        .map(Some)
        .map_err(|source| ReadSideFileError::Invalid {
            path: path.to_path_buf(),
            source,
        })
}

/// [`read_side_file`], leniently: a file that cannot be used is a
/// [`SideFileProblem`], never a failure.
pub(crate) fn read_leniently<T>(
    fs: &FileSystem,
    path: &Path,
    file: SideFileKind,
    decode: impl FnOnce(&[u8]) -> Result<T, SideFileError>,
) -> Result<Option<T>, SideFileProblem> {
    read_side_file(fs, path, file, decode).map_err(|e| e.problem(file))
}
