//! Closing a store, or one shard in it: everything durable, clean-shutdown
//! files written, locks released so the same root (or shard) opens again
//! in the same process, and every held handle failing with `ShardClosed`.
//! Reopening one shard — the way back from a poison — leaves the others
//! alone.

use std::path::Path;
use std::sync::Arc;

use felix_io::FileSystem;
use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_recovery::CLEAN_SHUTDOWN_FILE_NAME;
use felix_segment::SegmentError;
use felix_storage::{
    Durability, Preallocation, ReadBound, Record, Shard, ShardKey, StorageError, Store, StoreConfig,
};

fn config(durability: Durability) -> StoreConfig {
    StoreConfig {
        preallocate: Preallocation::Off,
        durability,
        ..StoreConfig::default()
    }
}

fn key(shard: u32) -> ShardKey {
    ShardKey::new("acme", "default", "orders", shard)
}

/// The operation and errno of a shard's own I/O failure.
fn io_failure(err: &StorageError) -> (&'static str, i32) {
    match err {
        StorageError::Segment {
            source: SegmentError::Io(io),
            ..
        } => (io.op(), io.raw_os_error().unwrap_or(0)),
        other => panic!("not a shard's own I/O failure: {other:?}"),
    }
}

/// Every call through `shard` that can fail fails with `ShardClosed` naming it.
fn assert_closed(shard: &Shard) {
    let label = shard.label().to_owned();
    let closed = |what: &str, result: Result<(), StorageError>| match result {
        Err(StorageError::ShardClosed { shard }) => assert_eq!(&*shard, label, "{what}"),
        other => panic!("{what} after close: {other:?}"),
    };
    closed(
        "append",
        shard.append(&[Record::new(9, "late")]).wait().map(drop),
    );
    closed(
        "append written",
        shard.append(&[Record::new(9, "late")]).written().map(drop),
    );
    closed(
        "read",
        shard.read(0, 1 << 20, ReadBound::Committed).map(drop),
    );
    closed("sync", shard.sync());
    closed("wait_durable", shard.wait_durable(1).wait());
    closed("close", shard.close());
    closed("truncate_to", shard.truncate_to(0));
    closed("reset_to", shard.reset_to(0));
    closed("begin_generation", shard.begin_generation(7).map(drop));
    closed("apply_retention", shard.apply_retention().map(drop));
}

/// Row 1 of the issue: the root could not be reopened until every handle
/// was dropped, and appends through a held handle after close succeeded.
#[test]
fn store_close_releases_every_lock_and_the_same_root_reopens_in_this_process() {
    for durability in [Durability::OnCommit, Durability::None] {
        let root = tempfile::tempdir().unwrap();
        let store = Store::options(root.path())
            .config(config(durability))
            .open()
            .unwrap();
        let held: Vec<Arc<Shard>> = (0..3)
            .map(|i| store.create_shard(&key(i)).unwrap())
            .collect();
        for shard in &held {
            shard
                .append(&[Record::new(1, "a"), Record::new(2, "b")])
                .wait()
                .unwrap();
        }
        store.close().unwrap();
        for shard in &held {
            // Everything written is durable, and the next open is quick.
            assert_eq!(shard.offsets().durable, 2, "{durability:?}");
            assert!(shard.dir().join(CLEAN_SHUTDOWN_FILE_NAME).is_file());
            assert_closed(shard);
        }
        // Held handles and the closed store are still alive here.
        let again = Store::options(root.path())
            .config(config(durability))
            .open()
            .unwrap();
        for i in 0..3 {
            let shard = again.open_shard(&key(i)).unwrap();
            assert_eq!(shard.offsets().written, 2, "the late appends never landed");
            assert_eq!(
                shard.read(0, 1 << 20, ReadBound::Committed).unwrap()[1].payload,
                "b"
            );
        }
        again.close().unwrap();
        // A second close of the first store does nothing.
        store.close().unwrap();
    }
}

#[test]
fn store_drop_closes_like_close_and_held_handles_fail() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path())
        .config(config(Durability::None))
        .open()
        .unwrap();
    let held = store.create_shard(&key(0)).unwrap();
    held.append(&[Record::new(1, "a")]).wait().unwrap();
    drop(store);
    assert_eq!(held.offsets().durable, 1);
    assert!(held.dir().join(CLEAN_SHUTDOWN_FILE_NAME).is_file());
    assert_closed(&held);
    let again = Store::options(root.path())
        .config(config(Durability::None))
        .open()
        .unwrap();
    assert_eq!(again.open_shard(&key(0)).unwrap().offsets().written, 1);
}

#[test]
fn store_close_shard_closes_one_and_leaves_the_others_running() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path())
        .config(config(Durability::OnCommit))
        .open()
        .unwrap();
    let one = store.create_shard(&key(1)).unwrap();
    let two = store.create_shard(&key(2)).unwrap();
    one.append(&[Record::new(1, "a")]).wait().unwrap();
    store.close_shard(&key(1)).unwrap();
    assert_closed(&one);
    assert!(one.dir().join(CLEAN_SHUTDOWN_FILE_NAME).is_file());
    // Its lock is released: a writer of the directory alone may take it
    // now (another store may not: the root's lock is this store's).
    let elsewhere = felix_storage::Shard::options(one.dir())
        .config(config(Durability::OnCommit))
        .create_if_missing(false)
        .open()
        .unwrap();
    assert_eq!(elsewhere.offsets().written, 1);
    elsewhere.close().unwrap();
    // The other shard never noticed.
    two.append(&[Record::new(1, "b")]).wait().unwrap();
    assert!(Arc::ptr_eq(&two, &store.open_shard(&key(2)).unwrap()));
    // Closing a shard that is not open does nothing.
    store.close_shard(&key(1)).unwrap();
    store.close_shard(&key(9)).unwrap();
    let reopened = store.open_shard(&key(1)).unwrap();
    assert!(!Arc::ptr_eq(&one, &reopened));
    assert_eq!(
        reopened.read(0, 1024, ReadBound::Committed).unwrap()[0].payload,
        "a"
    );
}

/// Row 2 of the issue: a poisoned shard stayed poisoned until the whole
/// store was dropped.
#[test]
fn store_reopen_shard_after_a_poison_recovers_it_and_leaves_the_others() {
    let sim = SimFs::new();
    let fs = FileSystem::new(sim.clone());
    let root = Path::new("/root");
    let store = Store::options(root)
        .config(config(Durability::OnCommit))
        .file_system(fs.clone())
        .open()
        .unwrap();
    let sick = store.create_shard(&key(1)).unwrap();
    let well = store.create_shard(&key(2)).unwrap();
    sick.append(&[Record::new(1, "acked")]).wait().unwrap();
    well.append(&[Record::new(1, "acked")]).wait().unwrap();
    sim.inject(Fault {
        op: FaultOp::SyncFile,
        path_contains: key(1).dir_name(),
        skip: 0,
        effect: FaultEffect::SyncFailDrop(5),
    });
    let err = sick.append(&[Record::new(2, "lost")]).wait().unwrap_err();
    assert_eq!(io_failure(&err), ("fdatasync", 5), "{err:?}");
    assert!(sick.poisoned().is_some());
    // Asking again gives the same poisoned handle...
    let same = store.open_shard(&key(1)).unwrap();
    assert!(Arc::ptr_eq(&sick, &same));
    assert!(matches!(
        same.append(&[Record::new(3, "x")]).wait(),
        Err(StorageError::Poisoned { .. })
    ));
    // ...until it is reopened, which runs recovery.
    let fresh = store.reopen_shard(&key(1)).unwrap();
    assert!(!Arc::ptr_eq(&sick, &fresh));
    assert!(fresh.poisoned().is_none());
    assert_eq!(
        fresh.offsets().written,
        1,
        "the record whose sync failed is gone"
    );
    assert_eq!(
        fresh.read(0, 1024, ReadBound::Committed).unwrap()[0].payload,
        "acked"
    );
    fresh.append(&[Record::new(2, "after")]).wait().unwrap();
    assert!(Arc::ptr_eq(&fresh, &store.open_shard(&key(1)).unwrap()));
    assert_closed(&sick);
    // The healthy shard kept its handle and never stopped.
    assert!(Arc::ptr_eq(&well, &store.open_shard(&key(2)).unwrap()));
    well.append(&[Record::new(2, "more")]).wait().unwrap();
    assert_eq!(well.offsets().written, 2);
}

#[test]
fn store_reopen_shard_of_a_key_without_directory_is_not_found() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path())
        .config(config(Durability::None))
        .open()
        .unwrap();
    assert!(matches!(
        store.reopen_shard(&key(5)),
        Err(StorageError::ShardNotFound { .. })
    ));
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
}

#[test]
fn store_close_of_a_poisoned_shard_still_releases_it_and_returns_the_failure() {
    let sim = SimFs::new();
    let fs = FileSystem::new(sim.clone());
    let root = Path::new("/root");
    let store = Store::options(root)
        .config(config(Durability::OnCommit))
        .file_system(fs.clone())
        .open()
        .unwrap();
    let sick = store.create_shard(&key(1)).unwrap();
    sim.inject(Fault {
        op: FaultOp::Write,
        path_contains: key(1).dir_name(),
        skip: 0,
        effect: FaultEffect::Errno(28),
    });
    let err = sick.append(&[Record::new(1, "x")]).wait().unwrap_err();
    assert_eq!(io_failure(&err), ("write", 28), "{err:?}");
    let err = store.close().unwrap_err();
    assert!(matches!(err, StorageError::Poisoned { .. }), "{err:?}");
    assert_closed(&sick);
    let again = Store::options(root)
        .config(config(Durability::OnCommit))
        .file_system(fs.clone())
        .open()
        .unwrap();
    assert_eq!(again.open_shard(&key(1)).unwrap().offsets().written, 0);
}
