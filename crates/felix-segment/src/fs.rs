//! File-system calls with their operation and path attached to any error
//! (an [`IoError`]).
//!
//! Everything goes through a [`FileSystem`], so tests can run the same code
//! on a simulated disk that crashes or fails on demand.

use std::path::Path;
use std::sync::Arc;

use felix_io::{FileSystem, IoError, OpenMode, VfsFile};

/// Shorthand for this module's results.
type Result<T> = std::result::Result<T, IoError>;

/// Opens `path` in `mode`, naming the operation in any error.
pub fn open(fs: &FileSystem, path: &Path, mode: OpenMode) -> Result<Arc<dyn VfsFile>> {
    let op = match mode {
        OpenMode::Read | OpenMode::ReadWrite => "open",
        OpenMode::CreateNew | OpenMode::CreateTruncate | OpenMode::CreateOrOpen => "create",
    };
    fs.open(path, mode).map_err(|e| IoError::new(op, path, e))
}

/// [`open`], and the file's length: as the open learnt it, or asked.
pub fn open_with_len(
    fs: &FileSystem,
    path: &Path,
    mode: OpenMode,
) -> Result<(Arc<dyn VfsFile>, u64)> {
    let op = match mode {
        OpenMode::Read | OpenMode::ReadWrite => "open",
        OpenMode::CreateNew | OpenMode::CreateTruncate | OpenMode::CreateOrOpen => "create",
    };
    let (file, len) = fs
        .open_with_len(path, mode)
        .map_err(|e| IoError::new(op, path, e))?;
    let len = match len {
        Some(len) => len,
        None => file_len(&*file, path)?,
    };
    Ok((file, len))
}

/// `fsync`s a directory so that entries created, renamed or removed in it
/// survive a power loss. Creating a file makes its data durable only once
/// the directory entry naming it is durable too.
pub fn sync_dir(fs: &FileSystem, dir: &Path) -> Result<()> {
    fs.sync_dir(dir)
        .map_err(|e| IoError::new("fsync directory", dir, e))
}

/// The directory holding `path`: its parent, with `.` for a relative path
/// of one component (whose parent is the empty path, which names nothing).
/// A root has none.
pub fn parent_dir(path: &Path) -> Option<&Path> {
    match path.parent() {
        Some(parent) if parent.as_os_str().is_empty() => Some(Path::new(".")),
        other => other,
    }
}

/// Creates `dir` and every missing ancestor, and syncs each new entry into
/// its parent before returning.
///
/// A new directory's entry is as volatile as a new file's: until its
/// parent is synced, a power loss can take the directory back, and with it
/// every record acknowledged inside it. So every directory created here is
/// durable before anything is written into it.
pub fn create_dir_all_durable(fs: &FileSystem, dir: &Path) -> Result<()> {
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !fs.is_dir(a))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    fs.create_dir_all(dir)
        .map_err(|e| IoError::new("create directory", dir, e))?;
    // Outermost first: each sync makes one new entry durable.
    for created in missing.iter().rev() {
        if let Some(parent) = parent_dir(created) {
            sync_dir(fs, parent)?;
        }
    }
    Ok(())
}

/// `fdatasync`: file data plus the metadata needed to read it back (size).
pub fn sync_data(file: &dyn VfsFile, path: &Path) -> Result<()> {
    file.sync_data()
        .map_err(|e| IoError::new("fdatasync", path, e))
}

/// Reads exactly `buf.len()` bytes at `position` with `pread`, so concurrent
/// readers can share one descriptor without a lock or a seek.
pub fn read_exact_at(file: &dyn VfsFile, path: &Path, buf: &mut [u8], position: u64) -> Result<()> {
    file.read_exact_at(buf, position)
        .map_err(|e| IoError::new("pread", path, e))
}

/// The file's length.
pub fn file_len(file: &dyn VfsFile, path: &Path) -> Result<u64> {
    file.file_len().map_err(|e| IoError::new("stat", path, e))
}
