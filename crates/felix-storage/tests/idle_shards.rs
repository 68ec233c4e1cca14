//! A store within `max_open_shards`: idle shards (none a caller holds) are
//! closed, least recently used first, and opened again on demand with every
//! record; their locks are released, but the root's lock keeps a second
//! store out even while every shard is closed; and a shard reopened as its
//! clean close left it costs no sync, to open or to close again.

use std::path::Path;

use felix_format::{CLEAN_SHUTDOWN_FILE_NAME, ShardKey};
use felix_io::FileSystem;
use felix_io::sim::SimFs;
use felix_storage::lock::{ShardLock, StoreLock};
use felix_storage::{
    ConfigError, ConfigField, Durability, Preallocation, ReadBound, Record, StorageError, Store,
    StoreConfig,
};

fn config(max_open_shards: u64) -> StoreConfig {
    StoreConfig {
        // Three 40-byte records per segment.
        segment_size_bytes: 32 + 3 * 40,
        index_spacing_bytes: 64,
        preallocate: Preallocation::Off,
        durability: Durability::OnCommit,
        max_open_shards,
        ..StoreConfig::default()
    }
}

fn key(i: u32) -> ShardKey {
    ShardKey::new("acme", "default", "orders", i)
}

fn payload(shard: u32, offset: u64) -> Vec<u8> {
    format!("s{shard:02} r{offset:05}").into_bytes()
}

/// Whether the shard directory's lock is free, that is whether the store
/// has the shard closed (it holds the lock while the shard is open).
fn lock_free(fs: &FileSystem, store: &Store, i: u32) -> bool {
    let dir = store.root().join(key(i).dir_name());
    match ShardLock::acquire(fs, &dir) {
        Ok(_) => true,
        Err(felix_storage::lock::LockError::Locked { .. }) => false,
        Err(other) => panic!("locking {}: {other}", dir.display()),
    }
}

fn payloads(store: &Store, i: u32) -> Vec<Vec<u8>> {
    let shard = store.open_shard(&key(i)).unwrap();
    let runs = shard.read_runs(0, u64::MAX, ReadBound::Committed).unwrap();
    runs.iter()
        .flat_map(|run| run.iter().map(|r| r.payload.to_vec()).collect::<Vec<_>>())
        .collect()
}

#[test]
fn idle_shards_close_least_recently_used_and_reopen_with_every_record() {
    let root = tempfile::tempdir().unwrap();
    let fs = FileSystem::os();
    let store = Store::options(root.path())
        .config(config(2))
        .open()
        .unwrap();
    for i in 0..5 {
        let shard = store.create_shard(&key(i)).unwrap();
        // Seven records: two segments sealed, so reopening trusts the
        // clean-shutdown record for them.
        for offset in 0..7 {
            shard
                .append(&[Record::new(offset, payload(i, offset))])
                .wait()
                .unwrap();
        }
    }
    // At most two open: the two created last.
    let open: Vec<bool> = (0..5).map(|i| !lock_free(&fs, &store, i)).collect();
    assert_eq!(open, [false, false, false, true, true]);
    for i in 0..5 {
        let expected: Vec<Vec<u8>> = (0..7).map(|o| payload(i, o)).collect();
        assert_eq!(payloads(&store, i), expected, "shard {i}");
    }
    // Shard 3 was used less recently than 4: opening 0 again closes 3.
    assert_eq!(payloads(&store, 0).len(), 7);
    let open: Vec<bool> = (0..5).map(|i| !lock_free(&fs, &store, i)).collect();
    assert_eq!(open, [true, false, false, false, true]);
    // Appends after a reopen are kept too, through a roll.
    let shard = store.open_shard(&key(1)).unwrap();
    for offset in 7..11 {
        shard
            .append(&[Record::new(offset, payload(1, offset))])
            .wait()
            .unwrap();
    }
    drop(shard);
    store.close().unwrap();
    let store = Store::options(root.path())
        .config(config(1))
        .open()
        .unwrap();
    let expected: Vec<Vec<u8>> = (0..11).map(|o| payload(1, o)).collect();
    assert_eq!(payloads(&store, 1), expected);
}

#[test]
fn a_shard_a_caller_holds_is_never_closed_to_stay_within_the_budget() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path())
        .config(config(1))
        .open()
        .unwrap();
    let held = store.create_shard(&key(0)).unwrap();
    let other = store.create_shard(&key(1)).unwrap();
    // Both held: the store is over its budget rather than closing either.
    held.append(&[Record::new(0, "kept open")]).wait().unwrap();
    other.append(&[Record::new(0, "also")]).wait().unwrap();
    drop(other);
    // Shard 1 is idle now; shard 2's open closes it, never shard 0.
    store.create_shard(&key(2)).unwrap();
    held.append(&[Record::new(1, "still open")]).wait().unwrap();
    assert!(lock_free(&FileSystem::os(), &store, 1));
    assert!(!lock_free(&FileSystem::os(), &store, 0));
    assert_eq!(payloads(&store, 1), [b"also".to_vec()]);
}

#[test]
fn a_second_store_on_the_root_is_refused_even_while_every_shard_is_closed() {
    let root = tempfile::tempdir().unwrap();
    let fs = FileSystem::os();
    let store = Store::options(root.path())
        .config(config(1))
        .open()
        .unwrap();
    store.create_shard(&key(0)).unwrap();
    store.create_shard(&key(1)).unwrap();
    store.close_shard(&key(1)).unwrap();
    assert!(lock_free(&fs, &store, 0) && lock_free(&fs, &store, 1));
    let second = Store::options(root.path()).config(config(1)).open();
    assert!(
        matches!(&second, Err(StorageError::StoreLocked { root: r }) if r == root.path()),
        "{second:?}"
    );
    // Nor can a repair tool take the root while the store runs.
    assert!(matches!(
        StoreLock::acquire(&fs, root.path()),
        Err(felix_storage::lock::LockError::StoreLocked { .. })
    ));
    store.close().unwrap();
    let again = Store::options(root.path())
        .config(config(1))
        .open()
        .unwrap();
    assert_eq!(again.open_shard(&key(0)).unwrap().offsets().written, 0);
}

fn syncs(sim: &SimFs) -> usize {
    sim.log()
        .iter()
        .filter(|e| e.op.starts_with("sync"))
        .count()
}

#[test]
fn a_shard_reopened_as_its_clean_close_left_it_costs_no_sync_until_it_rolls() {
    let sim = SimFs::new();
    let fs = FileSystem::new(sim.clone());
    let root = Path::new("/store");
    let store = Store::options(root)
        .file_system(fs.clone())
        .config(config(4))
        .open()
        .unwrap();
    let shard = store.create_shard(&key(0)).unwrap();
    shard
        .append(&[Record::new(0, payload(0, 0))])
        .wait()
        .unwrap();
    drop(shard);
    store.close().unwrap();
    let clean = root.join(key(0).dir_name()).join(CLEAN_SHUTDOWN_FILE_NAME);

    let store = Store::options(root)
        .file_system(fs.clone())
        .config(config(4))
        .open()
        .unwrap();
    let before = syncs(&sim);
    let shard = store.open_shard(&key(0)).unwrap();
    assert_eq!(syncs(&sim), before, "opening syncs nothing");
    assert!(
        sim.read_file(&clean).is_ok(),
        "the record is kept while open"
    );
    // One append, one sync; closing needs none: the record is still true.
    shard
        .append(&[Record::new(1, payload(0, 1))])
        .wait()
        .unwrap();
    assert_eq!(syncs(&sim), before + 1);
    store.close_shard(&key(0)).unwrap();
    assert_eq!(syncs(&sim), before + 1, "closing syncs nothing more");

    // The close rewrote the record (without syncs: the appends were
    // durable before it), so the next open syncs nothing either; even in a
    // store of its own, which knows nothing of the close.
    drop(store);
    let store = Store::options(root)
        .file_system(fs.clone())
        .config(config(4))
        .open()
        .unwrap();
    let shard = store.open_shard(&key(0)).unwrap();
    assert_eq!(syncs(&sim), before + 1);
    // A roll removes the record first, durably.
    shard
        .append(&[Record::new(2, payload(0, 2))])
        .wait()
        .unwrap();
    assert!(sim.read_file(&clean).is_ok());
    shard
        .append(&[Record::new(3, payload(0, 3))])
        .wait()
        .unwrap();
    assert!(sim.read_file(&clean).is_err(), "removed before the roll");
    drop(shard);
    store.close().unwrap();

    // What a power loss now leaves: every record.
    let crashed = sim.crash(&felix_io::sim::CrashPlan::durable_only());
    let store = Store::options(root)
        .file_system(FileSystem::new(crashed))
        .config(config(4))
        .open()
        .unwrap();
    let expected: Vec<Vec<u8>> = (0..4).map(|o| payload(0, o)).collect();
    assert_eq!(payloads(&store, 0), expected);
}

#[test]
fn max_open_shards_of_zero_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let err = Store::options(root.path())
        .config(config(0))
        .open()
        .unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::InvalidConfig(ConfigError::SizeOutOfRange {
                field: ConfigField::MaxOpenShards,
                value: 0,
                min: 1,
                max: u64::MAX,
            })
        ),
        "{err:?}"
    );
}
