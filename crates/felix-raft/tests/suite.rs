//! openraft's own storage test suite, every case, against a fresh felix
//! log per case: a bare shard in a temporary directory, and a shard of a
//! felix `Store`.

mod common;

use common::sm::StateMachine;
use felix_raft::{FelixLogStore, TypeConfig};
use felix_storage::{Durability, ShardKey, Store, StoreConfig};
use openraft::StorageError;
use openraft::error::ErrorSource;
use openraft::impls::BoxedErrorSource;
use openraft::testing::log::{StoreBuilder, Suite};
use tempfile::TempDir;

struct FelixBuilder;

impl StoreBuilder<TypeConfig, FelixLogStore<TypeConfig>, StateMachine, TempDir> for FelixBuilder {
    async fn build(
        &self,
    ) -> Result<(TempDir, FelixLogStore<TypeConfig>, StateMachine), StorageError<TypeConfig>> {
        let dir = TempDir::new()
            .map_err(|e| StorageError::write_logs(BoxedErrorSource::from_error(&e)))?;
        let log = FelixLogStore::options(dir.path().join("log"))
            .open()
            .map_err(|e| StorageError::write_logs(BoxedErrorSource::from_error(&e)))?;
        Ok((dir, log, StateMachine::default()))
    }
}

/// Keeps a case's store open (and its directory) until the case ends;
/// fields drop in order, so the store closes before the directory goes.
struct InStore {
    _store: Store,
    _dir: TempDir,
}

struct StoreShardBuilder;

impl StoreBuilder<TypeConfig, FelixLogStore<TypeConfig>, StateMachine, InStore>
    for StoreShardBuilder
{
    async fn build(
        &self,
    ) -> Result<(InStore, FelixLogStore<TypeConfig>, StateMachine), StorageError<TypeConfig>> {
        let dir = TempDir::new()
            .map_err(|e| StorageError::write_logs(BoxedErrorSource::from_error(&e)))?;
        let config = StoreConfig {
            durability: Durability::None,
            ..StoreConfig::default()
        };
        let store = Store::options(dir.path())
            .config(config)
            .open()
            .map_err(|e| StorageError::write_logs(BoxedErrorSource::from_error(&e)))?;
        let key = ShardKey::new("acme", "raft", "group", 7);
        let log = FelixLogStore::in_store(&store, &key)
            .map_err(|e| StorageError::write_logs(BoxedErrorSource::from_error(&e)))?;
        let guard = InStore {
            _store: store,
            _dir: dir,
        };
        Ok((guard, log, StateMachine::default()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openraft_storage_suite_passes_every_case() -> Result<(), StorageError<TypeConfig>> {
    Suite::test_all(FelixBuilder).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openraft_storage_suite_passes_every_case_on_a_store_shard()
-> Result<(), StorageError<TypeConfig>> {
    Suite::test_all(StoreShardBuilder).await
}

/// The one case of the suite that passes without running when the log
/// does not store the committed id (`read_committed` giving `None` after
/// `save_committed`): with the id stored, it re-applies the state machine
/// up to it, which the state machine shows — it would stop at the entry
/// the case applied itself, (1, 2), had the case returned early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_re_apply_committed_case_runs_through() -> Result<(), StorageError<TypeConfig>> {
    for store_shard in [false, true] {
        let (log, sm, guard): (_, _, Box<dyn std::any::Any + Send>) = if store_shard {
            let (g, log, sm) = StoreShardBuilder.build().await?;
            (log, sm, Box::new(g))
        } else {
            let (g, log, sm) = FelixBuilder.build().await?;
            (log, sm, Box::new(g))
        };
        let probe = sm.clone();
        Suite::<TypeConfig, _, _, FelixBuilder, TempDir>::get_initial_state_re_apply_committed(
            log, sm,
        )
        .await
        .map_err(|e| StorageError::read_logs(BoxedErrorSource::from_error(&e)))?;
        assert_eq!(
            probe.data().last_applied,
            Some(felix_raft::LogId::new_term_index(1, 4)),
            "store shard: {store_shard}"
        );
        drop(guard);
    }
    Ok(())
}
