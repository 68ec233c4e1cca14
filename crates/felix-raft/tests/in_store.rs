//! Raft logs kept in a felix `Store`'s shards: many logs share one store
//! (its sync pool, its budget of open shards), each keeps its entries,
//! vote and purge across the store's close and reopen, and a store that
//! syncs on its own schedule is refused before anything is created.

use felix_raft::{Entry, LogId, Request, Vote};
use felix_raft::{FelixLogStore, RaftLogError, TypeConfig};
use felix_storage::{Durability, ShardId, ShardKey, Store, StoreConfig};
use openraft::storage::{LogState, RaftLogStorage, RaftLogStorageExt};
use openraft::{EntryPayload, RaftLogReader};

fn id(term: u64, index: u64) -> LogId {
    LogId::new_term_index(term, index)
}

fn entry(term: u64, index: u64) -> Entry {
    Entry {
        log_id: id(term, index),
        payload: EntryPayload::Normal(Request::at(index, format!("e{index}").into_bytes())),
    }
}

fn config() -> StoreConfig {
    StoreConfig {
        durability: Durability::None,
        ..StoreConfig::default()
    }
}

fn group(n: u32) -> ShardKey {
    ShardKey::new("acme", "raft", "group", n)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn logs_in_one_store_keep_entries_votes_and_purges_across_its_reopen() {
    let root = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let store = Store::options(root.path()).config(config()).open().unwrap();
        for n in 0..3 {
            let mut log = FelixLogStore::<TypeConfig>::in_store(&store, &group(n)).unwrap();
            log.blocking_append((0..5 + u64::from(n)).map(|i| entry(1, i)))
                .await
                .unwrap();
            log.save_vote(&Vote::new(1, u64::from(n))).await.unwrap();
            if n == 2 {
                log.purge(id(1, 3)).await.unwrap();
            }
        }
        store.close().unwrap();
        drop(store);

        let store = Store::options(root.path()).config(config()).open().unwrap();
        let mut keys = store.keys().unwrap();
        keys.sort();
        assert_eq!(
            keys,
            (0..3).map(|n| ShardId::Key(group(n))).collect::<Vec<_>>()
        );
        for n in 0..3u32 {
            let mut log = FelixLogStore::<TypeConfig>::in_store(&store, &group(n)).unwrap();
            assert_eq!(
                log.read_vote().await.unwrap(),
                Some(Vote::new(1, u64::from(n)))
            );
            let last = 4 + u64::from(n);
            let purged = (n == 2).then(|| id(1, 3));
            assert_eq!(
                log.get_log_state().await.unwrap(),
                LogState {
                    last_purged_log_id: purged,
                    last_log_id: Some(id(1, last)),
                }
            );
            let entries = log.try_get_log_entries(0..100).await.unwrap();
            let first = purged.map_or(0, |p| p.index + 1);
            assert_eq!(
                entries.iter().map(|e| e.log_id.index).collect::<Vec<_>>(),
                (first..=last).collect::<Vec<_>>()
            );
        }
    });
}

#[test]
fn log_in_a_store_that_syncs_on_its_own_is_refused_creating_nothing() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path())
        .config(StoreConfig {
            durability: Durability::OnCommit,
            ..StoreConfig::default()
        })
        .open()
        .unwrap();
    let err = FelixLogStore::<TypeConfig>::in_store(&store, &group(0)).unwrap_err();
    assert!(
        matches!(
            &err,
            RaftLogError::Durability { shard, found: Durability::OnCommit }
                if *shard == group(0).to_string()
        ),
        "{err:?}"
    );
    assert_eq!(store.keys().unwrap(), Vec::new());
}
