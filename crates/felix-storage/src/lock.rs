//! The advisory lock that keeps one writer per shard directory.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};

use crate::error::{Result, StorageError};

/// File name of the lock in a shard directory.
pub const LOCK_FILE_NAME: &str = "lock";

/// An exclusive `flock` on `<shard>/lock`, released when dropped (or when
/// the process dies, which is why an advisory lock beats a pid file: a crash
/// never leaves a stale lock behind).
///
/// [`crate::Shard::open`] takes it for the life of the shard. Tools that
/// modify a shard directory without opening it as a [`crate::Shard`] (such
/// as `felix-store recover`) take it too, so they never repair a tail that a
/// live writer is still appending to.
#[derive(Debug)]
pub struct ShardLock {
    _file: File,
}

impl ShardLock {
    /// Takes the lock of the shard directory `dir` without waiting,
    /// creating its `lock` file if missing.
    ///
    /// Fails with [`StorageError::Locked`] when another process (or another
    /// handle in this one) holds it.
    pub fn acquire(dir: &Path) -> Result<Self> {
        let path: PathBuf = dir.join(LOCK_FILE_NAME);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| StorageError::Segment {
                shard: dir.display().to_string().into(),
                source: felix_segment::SegmentError::io("open", &path, e),
            })?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Self { _file: file }),
            Err(rustix::io::Errno::WOULDBLOCK) => Err(StorageError::Locked { path }),
            Err(errno) => Err(StorageError::Segment {
                shard: dir.display().to_string().into(),
                source: felix_segment::SegmentError::io("flock", &path, errno.into()),
            }),
        }
    }
}
