//! openraft's own storage test suite, every case, against a fresh felix
//! log in a temporary directory per case.
#![expect(clippy::result_large_err, reason = "openraft's error types are large")]

mod common;

use common::sm::StateMachine;
use felix_raft::{FelixLogStore, TypeConfig};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{StorageError, StorageIOError};
use tempfile::TempDir;

struct FelixBuilder;

impl StoreBuilder<TypeConfig, FelixLogStore<TypeConfig>, StateMachine, TempDir> for FelixBuilder {
    async fn build(
        &self,
    ) -> Result<(TempDir, FelixLogStore<TypeConfig>, StateMachine), StorageError<u64>> {
        let dir = TempDir::new().map_err(|e| StorageIOError::write_logs(&e))?;
        let log = FelixLogStore::options(dir.path().join("log"))
            .open()
            .map_err(|e| StorageIOError::write_logs(&e))?;
        Ok((dir, log, StateMachine::default()))
    }
}

/// `test_all` starts a runtime per case, so this is a plain test.
#[test]
fn openraft_storage_suite_passes_every_case() -> Result<(), StorageError<u64>> {
    Suite::test_all(FelixBuilder)
}
