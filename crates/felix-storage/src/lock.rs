//! The advisory lock that keeps one writer per shard directory.

use std::path::{Path, PathBuf};

use felix_io::{FileSystem, LockGuard, not_regular_file};

use crate::error::{Result, StorageError};

/// File name of the lock file in a shard directory, kept for releases
/// before the directory itself was locked (see [`ShardLock`]).
pub const LOCK_FILE_NAME: &str = "lock";

/// An exclusive advisory lock (`flock`) on a shard directory, released when
/// dropped or when the process dies, which is why an advisory lock beats a
/// pid file: a crash never leaves a stale lock behind.
///
/// The lock is taken on the directory's own descriptor. A lock on a file
/// inside it would be only as good as the file's name: `rm lock` between two
/// writers would let the second create a new file, lock that, and write over
/// the first one's acknowledged records. Nothing done to the directory's
/// entries can release a lock on the directory itself.
///
/// For earlier releases, which lock only `<shard>/lock`, the file is locked
/// too (created if missing, a regular file only): a writer or a
/// `felix-store recover` of an earlier release holding it still keeps this
/// one out, and the other way round. A `lock` that is a symbolic link (or
/// anything but a regular file) is left alone, never followed or created
/// through; the directory's lock is the one that counts.
///
/// [`crate::Shard::open`] takes it for the life of the shard. Tools that
/// modify a shard directory without opening it as a [`crate::Shard`] (such
/// as `felix-store recover`) take it too, so they never repair a tail that a
/// live writer is still appending to.
#[derive(Debug)]
pub struct ShardLock {
    _dir: LockGuard,
    _file: Option<LockGuard>,
}

impl ShardLock {
    /// Takes the lock of the shard directory `dir` without waiting.
    ///
    /// Fails with [`StorageError::Locked`] when another process (or another
    /// handle in this one) holds it.
    pub fn acquire(dir: &Path) -> Result<Self> {
        Self::acquire_in(&FileSystem::os(), dir)
    }

    /// [`ShardLock::acquire`] on the file system `fs`.
    pub fn acquire_in(fs: &FileSystem, dir: &Path) -> Result<Self> {
        let io_err = |path: &Path, e| StorageError::Segment {
            shard: dir.display().to_string().into(),
            source: felix_segment::SegmentError::io("lock", path, e),
        };
        let locked = || StorageError::Locked {
            dir: dir.to_path_buf(),
        };
        let dir_guard = match fs.try_lock_dir(dir) {
            Ok(Some(guard)) => guard,
            Ok(None) => return Err(locked()),
            Err(e) => return Err(io_err(dir, e)),
        };
        let path: PathBuf = dir.join(LOCK_FILE_NAME);
        let file_guard = match fs.try_lock(&path) {
            Ok(Some(guard)) => Some(guard),
            // Held by an earlier release's writer or tool.
            Ok(None) => return Err(locked()),
            Err(e) => match not_regular_file(&e) {
                Some(what) => {
                    tracing::warn!(path = %path.display(), %what, "lock file left alone; the shard directory's own lock holds");
                    None
                }
                None => return Err(io_err(&path, e)),
            },
        };
        Ok(Self {
            _dir: dir_guard,
            _file: file_guard,
        })
    }
}
