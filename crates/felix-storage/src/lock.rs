//! The advisory locks that keep one writer per shard directory and one
//! store per root: defined in felix-recovery (its repairs require them),
//! re-exported here, with the name of the file they lock, for a tool that
//! must tell whether a directory is in use.
//!
//! ```
//! use felix_storage::lock::LOCK_FILE_NAME;
//! use felix_storage::{ShardKey, Store};
//!
//! let root = tempfile::tempdir()?;
//! let store = Store::options(root.path()).open()?;
//! let shard = store.create_shard(&ShardKey::new("acme", "billing", "orders", 0))?;
//! assert!(shard.dir().join(LOCK_FILE_NAME).exists());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use felix_format::LOCK_FILE_NAME;
pub use felix_recovery::{LockError, ShardLock, StoreLock};

use crate::error::StorageError;

impl From<LockError> for StorageError {
    fn from(err: LockError) -> Self {
        match err {
            LockError::Locked { dir } => Self::ShardLocked { dir },
            LockError::StoreLocked { root } => Self::StoreLocked { root },
            LockError::Io(err) => Self::Io(err),
        }
    }
}
