//! The advisory lock that keeps one writer per shard directory.

use std::path::{Path, PathBuf};

use felix_io::{FileSystem, LockGuard};

use crate::error::{Result, StorageError};

/// File name of the lock in a shard directory.
pub const LOCK_FILE_NAME: &str = "lock";

/// An exclusive advisory lock (`flock`) on `<shard>/lock`, released when
/// dropped or when the process dies, which is why an advisory lock beats a
/// pid file: a crash never leaves a stale lock behind.
///
/// [`crate::Shard::open`] takes it for the life of the shard. Tools that
/// modify a shard directory without opening it as a [`crate::Shard`] (such
/// as `felix-store recover`) take it too, so they never repair a tail that a
/// live writer is still appending to.
#[derive(Debug)]
pub struct ShardLock {
    _guard: LockGuard,
}

impl ShardLock {
    /// Takes the lock of the shard directory `dir` without waiting,
    /// creating its `lock` file if missing.
    ///
    /// Fails with [`StorageError::Locked`] when another process (or another
    /// handle in this one) holds it.
    pub fn acquire(dir: &Path) -> Result<Self> {
        Self::acquire_in(&FileSystem::os(), dir)
    }

    /// [`ShardLock::acquire`] on the file system `fs`.
    pub fn acquire_in(fs: &FileSystem, dir: &Path) -> Result<Self> {
        let path: PathBuf = dir.join(LOCK_FILE_NAME);
        match fs.try_lock(&path) {
            Ok(Some(guard)) => Ok(Self { _guard: guard }),
            Ok(None) => Err(StorageError::Locked { path }),
            Err(e) => Err(StorageError::Segment {
                shard: dir.display().to_string().into(),
                source: felix_segment::SegmentError::io("lock", &path, e),
            }),
        }
    }
}
