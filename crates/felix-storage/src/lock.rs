//! The advisory lock that keeps one writer per shard directory: defined in
//! felix-recovery (its repairs require it), re-exported here.

pub use felix_format::LOCK_FILE_NAME;
pub use felix_recovery::{LockError, ShardLock};

use crate::error::StorageError;

impl From<LockError> for StorageError {
    fn from(err: LockError) -> Self {
        match err {
            LockError::Locked { dir } => Self::Locked { dir },
            LockError::Io(err) => Self::Io(err),
        }
    }
}
