//! The few file-system calls segments need beyond `std`, with their paths.
//!
//! Every helper maps failures to [`SegmentError::Io`] naming the operation
//! and the path, so an operator reading the error knows which file failed.

use std::fs::File;
use std::io;
use std::path::Path;

use crate::error::{Result, SegmentError};

/// `fsync`s a directory so that entries created, renamed or removed in it
/// survive a power loss. Creating a file makes its data durable only once
/// the directory entry naming it is durable too.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let handle = File::open(dir).map_err(|e| SegmentError::io("open directory", dir, e))?;
    handle
        .sync_all()
        .map_err(|e| SegmentError::io("fsync directory", dir, e))
}

/// `fdatasync`: file data plus the metadata needed to read it back (size).
pub fn sync_data(file: &File, path: &Path) -> Result<()> {
    file.sync_data()
        .map_err(|e| SegmentError::io("fdatasync", path, e))
}

/// Reserves `len` bytes of disk for `file` without changing its size
/// (`FALLOC_FL_KEEP_SIZE`), so "valid bytes end at EOF" still holds.
///
/// Returns whether space was reserved. File systems that cannot preallocate
/// (tmpfs on old kernels, some network file systems) are not an error: the
/// segment simply grows as it is written.
pub fn preallocate(file: &File, path: &Path, len: u64) -> Result<bool> {
    use rustix::fs::{FallocateFlags, fallocate};
    match fallocate(file, FallocateFlags::KEEP_SIZE, 0, len) {
        Ok(()) => Ok(true),
        Err(errno) => {
            let err = io::Error::from(errno);
            match err.kind() {
                io::ErrorKind::Unsupported | io::ErrorKind::InvalidInput => {
                    tracing::debug!(path = %path.display(), error = %err, "preallocation not supported");
                    Ok(false)
                }
                _ if errno == rustix::io::Errno::OPNOTSUPP || errno == rustix::io::Errno::NOSYS => {
                    Ok(false)
                }
                _ => Err(SegmentError::io("fallocate", path, err)),
            }
        }
    }
}

/// Reads exactly `buf.len()` bytes at `position` with `pread`, so concurrent
/// readers can share one descriptor without a lock or a seek.
pub fn read_exact_at(file: &File, path: &Path, buf: &mut [u8], position: u64) -> Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(buf, position)
        .map_err(|e| SegmentError::io("pread", path, e))
}
