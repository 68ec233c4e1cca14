//! A store opens, creates, closes and deletes shards without holding its
//! lock while it does: a shard whose open is under way (recovering a long
//! segment, say) delays only the callers asking for it; callers for other
//! shards go on; every caller of one key gets the one handle, opened once;
//! a close waits for the opens under way and closes what they opened; and
//! opens at once stay within `max_open_shards`.

mod common;

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use common::gated::GatedFs;
use felix_format::ShardKey;
use felix_io::{FileSystem, OsFs};
use felix_storage::lock::ShardLock;
use felix_storage::{
    Durability, Preallocation, ReadBound, Record, StorageError, Store, StoreConfig,
};

fn config(max_open_shards: u64) -> StoreConfig {
    StoreConfig {
        segment_size_bytes: 4096,
        preallocate: Preallocation::Off,
        durability: Durability::OnCommit,
        max_open_shards,
        ..StoreConfig::default()
    }
}

fn key(i: u32) -> ShardKey {
    ShardKey::new("acme", "default", "orders", i)
}

fn open_store(root: &std::path::Path, fs: &GatedFs<OsFs>, max_open_shards: u64) -> Store {
    Store::options(root)
        .config(config(max_open_shards))
        .file_system(fs.handle())
        .open()
        .unwrap()
}

/// The payloads of `shard`'s records, oldest first.
fn payloads(shard: &felix_storage::Shard) -> Vec<Vec<u8>> {
    shard
        .read_runs(0, u64::MAX, ReadBound::Committed)
        .unwrap()
        .iter()
        .flat_map(|run| run.iter().map(|r| r.payload.to_vec()).collect::<Vec<_>>())
        .collect()
}

/// Runs `f` on another thread and returns what it returned, failing the
/// test if it takes more than ten seconds (it would wait for ever if it
/// waited for the held open).
fn within_ten_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || done.send(f()).unwrap());
    result
        .recv_timeout(Duration::from_secs(10))
        .expect("the call waited for another shard's open")
}

/// Whether the shard directory of `i` is unlocked: the store has it closed.
fn lock_free(store: &Store, i: u32) -> bool {
    let dir = store.root().join(key(i).dir_name());
    match ShardLock::acquire(&FileSystem::os(), &dir) {
        Ok(_) => true,
        Err(felix_storage::lock::LockError::Locked { .. }) => false,
        Err(other) => panic!("locking {}: {other}", dir.display()),
    }
}

#[test]
fn an_open_under_way_delays_neither_open_shards_nor_other_opens_nor_creates() {
    let root = tempfile::tempdir().unwrap();
    let fs = GatedFs::new(OsFs);
    let store = Arc::new(open_store(root.path(), &fs, 1_024));
    for i in 0..3 {
        store
            .create_shard(&key(i))
            .unwrap()
            .append(&[Record::new(0, format!("shard {i}"))])
            .wait()
            .unwrap();
    }
    // Shard 2 stays open; shards 0 and 1 are closed.
    let open = store.open_shard(&key(2)).unwrap();
    store.close_shard(&key(0)).unwrap();
    store.close_shard(&key(1)).unwrap();

    fs.hold_opens_in(&store.root().join(key(0).dir_name()));
    let held = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || store.open_shard(&key(0)))
    };
    fs.await_held_open();
    let second = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || store.open_shard(&key(0)))
    };
    // The second caller waits for the first one's claim: an open of its
    // own would be held at the gate too.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(fs.held_opens(), 1);

    // While shard 0's open waits: the open shard, another shard's open, a
    // create and a close of others all return.
    let again = {
        let store = Arc::clone(&store);
        within_ten_seconds(move || store.open_shard(&key(2)).unwrap())
    };
    assert!(Arc::ptr_eq(&open, &again));
    let other = {
        let store = Arc::clone(&store);
        within_ten_seconds(move || payloads(&store.open_shard(&key(1)).unwrap()))
    };
    assert_eq!(other, [b"shard 1".to_vec()]);
    {
        let store = Arc::clone(&store);
        within_ten_seconds(move || {
            store.create_shard(&key(3)).unwrap();
            store.close_shard(&key(1)).unwrap();
        });
    }
    assert!(!held.is_finished() && !second.is_finished());

    fs.release_opens();
    let first = held.join().unwrap().unwrap();
    let second = second.join().unwrap().unwrap();
    assert!(Arc::ptr_eq(&first, &second), "the key was opened twice");
    assert_eq!(payloads(&first), [b"shard 0".to_vec()]);
}

/// Holds the open of shard 0 at the gate, runs `call` beside it and checks
/// that `call` waits for that open; returns the shard it opened, once
/// `call` has returned `Ok`.
fn open_held_while(
    store: &Store,
    fs: &GatedFs<OsFs>,
    what: &str,
    call: impl FnOnce() -> felix_storage::Result<()> + Send,
) -> Arc<felix_storage::Shard> {
    fs.hold_opens_in(&store.root().join(key(0).dir_name()));
    std::thread::scope(|scope| {
        let opening = scope.spawn(|| store.open_shard(&key(0)));
        fs.await_held_open();
        let calling = scope.spawn(call);
        std::thread::sleep(Duration::from_millis(50));
        let waited = !calling.is_finished();
        // Released before asserting, so a failure leaves nothing waiting.
        fs.release_opens();
        assert!(waited, "the {what} did not wait for the open");
        let opened = opening.join().unwrap().unwrap();
        calling.join().unwrap().unwrap();
        opened
    })
}

#[test]
fn a_close_waits_for_the_open_under_way_and_closes_what_it_opened() {
    let root = tempfile::tempdir().unwrap();
    let fs = GatedFs::new(OsFs);
    let store = open_store(root.path(), &fs, 1_024);
    store
        .create_shard(&key(0))
        .unwrap()
        .append(&[Record::new(0, "kept")])
        .wait()
        .unwrap();
    store.close_shard(&key(0)).unwrap();
    store.create_shard(&key(1)).unwrap();

    let opened = open_held_while(&store, &fs, "close", || store.close());
    // Closed with the rest: its handle fails, its lock is released.
    assert!(matches!(
        opened.read(0, 1024, ReadBound::Committed),
        Err(StorageError::ShardClosed { .. })
    ));
    assert!(lock_free(&store, 0) && lock_free(&store, 1));
    assert!(matches!(
        store.open_shard(&key(1)),
        Err(StorageError::StoreClosed { .. })
    ));
    let store = open_store(root.path(), &fs, 1_024);
    assert_eq!(
        payloads(&store.open_shard(&key(0)).unwrap()),
        [b"kept".to_vec()]
    );
}

#[test]
fn a_delete_waits_for_the_open_under_way_and_then_removes_the_shard() {
    let root = tempfile::tempdir().unwrap();
    let fs = GatedFs::new(OsFs);
    let store = open_store(root.path(), &fs, 1_024);
    store.create_shard(&key(0)).unwrap();
    store.close_shard(&key(0)).unwrap();

    let opened = open_held_while(&store, &fs, "delete", || store.delete_shard(&key(0)));
    assert!(matches!(
        opened.read(0, 1024, ReadBound::Committed),
        Err(StorageError::ShardClosed { .. })
    ));
    assert!(matches!(
        store.open_shard(&key(0)),
        Err(StorageError::ShardNotFound { .. })
    ));
}

/// A close under way counts against the budget until it returns: an open
/// meanwhile closes another idle shard to make room, instead of holding
/// descriptors beside the closing one's.
#[test]
fn a_close_under_way_counts_against_the_budget_of_an_open_meanwhile() {
    let root = tempfile::tempdir().unwrap();
    let fs = GatedFs::new(OsFs);
    let store = open_store(root.path(), &fs, 2);
    for i in 0..3 {
        store.create_shard(&key(i)).unwrap();
    }
    // Shards 1 and 2 are open and idle; shard 0 was closed to make room.
    assert!(lock_free(&store, 0) && !lock_free(&store, 1) && !lock_free(&store, 2));
    // Shard 1's close waits at its clean-shutdown record's open.
    fs.hold_opens_in(&store.root().join(key(1).dir_name()));
    std::thread::scope(|scope| {
        let closing = scope.spawn(|| store.close_shard(&key(1)));
        fs.await_held_open();
        let reopened = store.open_shard(&key(0)).unwrap();
        let (closed_for_it, still_closing) = (lock_free(&store, 2), !lock_free(&store, 1));
        // Released before asserting, so a failure does not leave the close
        // waiting for ever.
        fs.release_opens();
        // Shard 2 was closed for it: shards 0 and 1 held descriptors.
        assert!(closed_for_it, "shard 2 still open beside a closing shard 1");
        assert!(still_closing);
        closing.join().unwrap().unwrap();
        assert!(lock_free(&store, 1));
        drop(reopened);
    });
}

/// Eight threads open, append to, close and reopen six shards at once in
/// a store that keeps at most three open: no call meets a lock another
/// call of the store holds, every record appended is there at the end, and
/// once the callers hold no handles the next open leaves no more than
/// three shards open.
#[test]
fn calls_at_once_on_a_few_keys_stay_within_the_budget_and_lose_nothing() {
    const THREADS: u32 = 8;
    const ROUNDS: u32 = 60;
    const SHARDS: u32 = 6;
    let root = tempfile::tempdir().unwrap();
    let fs = GatedFs::new(OsFs);
    let store = open_store(root.path(), &fs, 3);
    // One more, closed, opened at the end.
    for i in 0..=SHARDS {
        store.create_shard(&key(i)).unwrap();
    }
    store.close_shard(&key(SHARDS)).unwrap();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let store = &store;
            scope.spawn(move || {
                for round in 0..ROUNDS {
                    let i = (t * 7 + round * 5) % SHARDS;
                    match round % 5 {
                        3 => store.close_shard(&key(i)).unwrap(),
                        4 => drop(store.reopen_shard(&key(i)).unwrap()),
                        _ => loop {
                            let shard = store.open_shard(&key(i)).unwrap();
                            match shard
                                .append(&[Record::new(0, format!("{t}/{round}"))])
                                .wait()
                            {
                                Ok(_) => break,
                                // Closed by another thread's close or
                                // reopen between the open and the append:
                                // nothing was written; open it again.
                                Err(StorageError::ShardClosed { .. }) => {}
                                Err(other) => panic!("append to shard {i}: {other}"),
                            }
                        },
                    }
                }
            });
        }
    });
    // Opens running at once each go ahead when nothing idle is left to
    // close; the next open, with no handle held, makes room.
    drop(store.open_shard(&key(SHARDS)).unwrap());
    let open = (0..=SHARDS).filter(|&i| !lock_free(&store, i)).count();
    assert!(open <= 3, "{open} shards open, budget 3");
    let mut found: Vec<String> = (0..=SHARDS)
        .flat_map(|i| payloads(&store.open_shard(&key(i)).unwrap()))
        .map(|p| String::from_utf8(p).unwrap())
        .collect();
    found.sort();
    let mut expected: Vec<String> = (0..THREADS)
        .flat_map(|t| {
            (0..ROUNDS)
                .filter(|round| round % 5 < 3)
                .map(move |round| format!("{t}/{round}"))
        })
        .collect();
    expected.sort();
    assert_eq!(found, expected);
}
