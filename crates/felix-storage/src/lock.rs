//! The advisory locks that keep one writer per shard directory and one
//! store per root: defined in felix-recovery (its repairs require them),
//! re-exported here.

pub use felix_format::LOCK_FILE_NAME;
pub use felix_recovery::{LockError, ShardLock, StoreLock};

use crate::error::StorageError;

impl From<LockError> for StorageError {
    fn from(err: LockError) -> Self {
        match err {
            LockError::Locked { dir } => Self::Locked { dir },
            LockError::StoreLocked { root } => Self::StoreLocked { root },
            LockError::Io(err) => Self::Io(err),
        }
    }
}
