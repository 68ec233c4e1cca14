//! The few file-system calls segments need beyond `std`, with their paths.
//!
//! Every helper maps failures to [`SegmentError::Io`] naming the operation
//! and the path, so an operator reading the error knows which file failed.

use std::fs::File;
use std::path::Path;

use crate::error::{Result, SegmentError};

/// `fsync`s a directory so that entries created, renamed or removed in it
/// survive a power loss. Creating a file makes its data durable only once
/// the directory entry naming it is durable too.
pub fn sync_dir(dir: &Path) -> Result<()> {
    injected("fsync directory", dir)?;
    let handle = File::open(dir).map_err(|e| SegmentError::io("open directory", dir, e))?;
    handle
        .sync_all()
        .map_err(|e| SegmentError::io("fsync directory", dir, e))
}

/// `fdatasync`: file data plus the metadata needed to read it back (size).
pub fn sync_data(file: &File, path: &Path) -> Result<()> {
    injected("fdatasync", path)?;
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
        // EOPNOTSUPP and ENOSYS (no support) and EINVAL (a file system that
        // rejects KEEP_SIZE) all mean "grow as written instead".
        Err(errno)
            if errno == rustix::io::Errno::OPNOTSUPP
                || errno == rustix::io::Errno::NOSYS
                || errno == rustix::io::Errno::INVAL =>
        {
            tracing::debug!(path = %path.display(), %errno, "preallocation not supported");
            Ok(false)
        }
        Err(errno) => Err(SegmentError::io("fallocate", path, errno.into())),
    }
}

/// Reads exactly `buf.len()` bytes at `position` with `pread`, so concurrent
/// readers can share one descriptor without a lock or a seek.
pub fn read_exact_at(file: &File, path: &Path, buf: &mut [u8], position: u64) -> Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(buf, position)
        .map_err(|e| SegmentError::io("pread", path, e))
}

/// Fails with an injected error when a test asked for one (only with the
/// `fault-injection` feature; otherwise it compiles to nothing).
pub fn injected(op: &'static str, path: &Path) -> Result<()> {
    #[cfg(feature = "fault-injection")]
    if let Some(err) = faults::take(op, path) {
        return Err(SegmentError::io(op, path, err));
    }
    let _ = (op, path);
    Ok(())
}

/// Injected failures for tests: the next matching system call fails with
/// the given error instead of running.
///
/// Faults are matched on the operation name (`"write"`, `"fdatasync"`,
/// `"fsync directory"`) and a substring of the path, so tests running in
/// parallel in one process each target their own temporary directory.
#[cfg(feature = "fault-injection")]
pub mod faults {
    use std::io;
    use std::path::Path;
    use std::sync::Mutex;

    struct Fault {
        op: &'static str,
        path_contains: String,
        skip: u32,
        errno: i32,
    }

    static FAULTS: Mutex<Vec<Fault>> = Mutex::new(Vec::new());

    /// Makes the `(skip + 1)`-th call of `op` on a path containing
    /// `path_contains` fail with `errno` (e.g. `libc`'s `EIO` = 5,
    /// `ENOSPC` = 28).
    pub fn inject(op: &'static str, path_contains: &str, skip: u32, errno: i32) {
        let mut faults = FAULTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        faults.push(Fault {
            op,
            path_contains: path_contains.to_owned(),
            skip,
            errno,
        });
    }

    /// Removes every pending fault whose path filter contains `path_contains`.
    pub fn clear(path_contains: &str) {
        let mut faults = FAULTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        faults.retain(|f| !f.path_contains.contains(path_contains));
    }

    pub(crate) fn take(op: &str, path: &Path) -> Option<io::Error> {
        let mut faults = FAULTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let path = path.to_string_lossy();
        let i = faults
            .iter()
            .position(|f| f.op == op && path.contains(&f.path_contains))?;
        let fault = faults.get_mut(i)?;
        if fault.skip > 0 {
            fault.skip -= 1;
            return None;
        }
        let errno = fault.errno;
        faults.remove(i);
        Some(io::Error::from_raw_os_error(errno))
    }
}
