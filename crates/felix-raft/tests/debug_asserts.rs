//! The invariants a felix Raft log asserts at its boundaries fire, in
//! debug builds, at the call that breaks them, naming the values.
#![cfg(debug_assertions)]

use felix_raft::{Entry, FelixLogStore, LogId, Request, TypeConfig, Vote};
use openraft::EntryPayload;
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};

fn entry(term: u64, index: u64) -> Entry {
    Entry {
        log_id: LogId::new_term_index(term, index),
        payload: EntryPayload::Normal(Request::at(index, vec![1, 2, 3])),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
#[should_panic(expected = "append: log id (term 1, index 2) does not follow (term 1, index 0)")]
fn append_of_entries_with_a_gap_fails_the_assertion() {
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let mut log: FelixLogStore<TypeConfig> = FelixLogStore::options(dir.path()).open().unwrap();
        let _ = log.blocking_append([entry(1, 0), entry(1, 2)]).await;
    });
}

#[test]
#[should_panic(expected = "append: log id (term 1, index 1) does not follow (term 2, index 0)")]
fn append_of_entries_whose_term_goes_back_fails_the_assertion() {
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let mut log: FelixLogStore<TypeConfig> = FelixLogStore::options(dir.path()).open().unwrap();
        let _ = log.blocking_append([entry(2, 0), entry(1, 1)]).await;
    });
}

#[test]
#[should_panic(expected = "raft state: vote term 1 below the saved vote's term 2")]
fn save_vote_of_an_older_term_fails_the_assertion() {
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let mut log: FelixLogStore<TypeConfig> = FelixLogStore::options(dir.path()).open().unwrap();
        log.save_vote(&Vote::new(2, 1)).await.unwrap();
        let _ = log.save_vote(&Vote::new(1, 1)).await;
    });
}
