//! Deleting a shard: held handles fail with `ShardClosed`, the directory goes
//! to a tombstone (durably) before anything in it is removed, the key is
//! free at once, and an open of the store removes tombstones a crash left.
//! (`power_loss_delete.rs` crashes a delete at every call.)

use std::path::Path;

use felix_format::{ShardKey, tombstone_name};
use felix_io::sim::SimFs;
use felix_io::{FileSystem, Vfs};
use felix_storage::{Preallocation, ReadBound, Record, ShardId, StorageError, Store, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig {
        preallocate: Preallocation::Off,
        segment_size_bytes: 256,
        ..StoreConfig::default()
    }
}

fn key(shard: u32) -> ShardKey {
    ShardKey::new("acme", "default", "orders", shard)
}

/// Row 5 of the issue: there was no way to delete a shard.
#[test]
fn store_delete_shard_removes_it_whole_and_held_handles_fail() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    let doomed = store.create_shard(&key(0)).unwrap();
    let kept = store.create_shard(&key(1)).unwrap();
    for i in 0..20 {
        doomed
            .append(&[Record::new(i, vec![b'x'; 40])])
            .wait()
            .unwrap();
        kept.append(&[Record::new(i, "k")]).wait().unwrap();
    }
    assert!(doomed.segments().len() > 3);
    store.delete_shard(&key(0)).unwrap();
    assert!(matches!(
        doomed.append(&[Record::new(1, "late")]).wait(),
        Err(StorageError::ShardClosed { .. })
    ));
    assert!(matches!(
        doomed.read(0, 1024, ReadBound::Committed),
        Err(StorageError::ShardClosed { .. })
    ));
    assert!(!root.path().join(key(0).dir_name()).exists());
    let names: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, [key(1).dir_name()], "no tombstone is left");
    assert!(matches!(
        store.open_shard(&key(0)),
        Err(StorageError::ShardNotFound { .. })
    ));
    assert_eq!(store.keys().unwrap(), [ShardId::Key(key(1))]);
    // The other shard kept going, and the key is free for a new shard.
    kept.append(&[Record::new(9, "more")]).wait().unwrap();
    let reborn = store.create_shard(&key(0)).unwrap();
    assert_eq!((reborn.offsets().base, reborn.offsets().written), (0, 0));
}

#[test]
fn store_delete_shard_that_is_not_open_and_one_that_does_not_exist() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    store.create_shard(&key(0)).unwrap();
    store.close_shard(&key(0)).unwrap();
    store.delete_shard(&key(0)).unwrap();
    assert!(!root.path().join(key(0).dir_name()).exists());
    let err = store.delete_shard(&key(0)).unwrap_err();
    assert!(
        matches!(&err, StorageError::ShardNotFound { shard, key: Some(found), dir } if **shard == key(0).to_string() && **found == key(0) && *dir == root.path().join(key(0).dir_name())),
        "{err:?}"
    );
}

#[test]
fn store_delete_shard_another_writer_holds_is_locked_and_keeps_it() {
    let root = tempfile::tempdir().unwrap();
    // A second store is refused at open (the root's lock): the other
    // writer here is a shard opened on its directory alone.
    let shard = felix_storage::Shard::options(root.path().join(key(0).dir_name()))
        .config(config())
        .open()
        .unwrap();
    shard.append(&[Record::new(1, "owned")]).wait().unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    let err = store.delete_shard(&key(0)).unwrap_err();
    assert!(matches!(err, StorageError::ShardLocked { .. }), "{err:?}");
    shard.append(&[Record::new(2, "still")]).wait().unwrap();
    assert_eq!(shard.read(0, 1024, ReadBound::Committed).unwrap().len(), 2);
}

/// The order that makes a delete atomic: the rename, then the root's sync,
/// and only then any removal; the root synced again at the end.
#[test]
fn store_delete_shard_renames_durably_before_removing_anything() {
    let sim = SimFs::new();
    let fs = FileSystem::new(sim.clone());
    let root = Path::new("/root");
    let store = Store::options(root)
        .config(config())
        .file_system(fs.clone())
        .open()
        .unwrap();
    let shard = store.create_shard(&key(0)).unwrap();
    for i in 0..10 {
        shard
            .append(&[Record::new(i, vec![b'x'; 40])])
            .wait()
            .unwrap();
    }
    store.close_shard(&key(0)).unwrap();
    let before = sim.log().len();
    store.delete_shard(&key(0)).unwrap();
    let tombstone = root.join(tombstone_name(&key(0).dir_name()));
    let calls: Vec<(&str, String)> = sim.log()[before..]
        .iter()
        .filter(|e| e.op != "open" && e.op != "create")
        .map(|e| (e.op, e.path.display().to_string()))
        .collect();
    let rename = calls
        .iter()
        .position(|c| *c == ("rename", tombstone.display().to_string()))
        .unwrap_or_else(|| panic!("no rename to the tombstone: {calls:?}"));
    assert_eq!(
        calls[rename + 1],
        ("sync_dir", "/root".to_string()),
        "{calls:?}"
    );
    let first_removal = calls
        .iter()
        .position(|c| c.0 == "remove" || c.0 == "remove_dir")
        .unwrap();
    assert!(first_removal > rename + 1, "{calls:?}");
    assert!(
        calls[first_removal..calls.len() - 2]
            .iter()
            .all(|c| c.0 == "remove" && c.1.starts_with(&*tombstone.to_string_lossy()))
    );
    assert_eq!(
        calls[calls.len() - 2..],
        [
            ("remove_dir", tombstone.display().to_string()),
            ("sync_dir", "/root".to_string())
        ]
    );
    assert!(
        sim.pending().is_empty(),
        "the delete is durable when it returns"
    );
}

#[test]
fn store_open_removes_leftover_tombstones_and_nothing_else() {
    let root = tempfile::tempdir().unwrap();
    {
        let store = Store::options(root.path()).config(config()).open().unwrap();
        store
            .create_shard(&key(0))
            .unwrap()
            .append(&[Record::new(1, "a")])
            .wait()
            .unwrap();
        store.create_shard(&key(1)).unwrap();
        store.close().unwrap();
    }
    // What a crash after the rename leaves: a whole shard under a tombstone.
    let tombstone = root.path().join(tombstone_name(&key(0).dir_name()));
    std::fs::rename(root.path().join(key(0).dir_name()), &tombstone).unwrap();
    // Names that only look alike are not ours to remove.
    let strays = ["lost+found", "notes.deleting", "backup.deleting"];
    for name in strays {
        std::fs::create_dir(root.path().join(name)).unwrap();
    }
    let store = Store::options(root.path()).config(config()).open().unwrap();
    assert!(!tombstone.exists());
    for name in strays {
        assert!(root.path().join(name).is_dir(), "{name}");
    }
    assert_eq!(store.keys().unwrap(), [ShardId::Key(key(1))]);
    assert!(matches!(
        store.open_shard(&key(0)),
        Err(StorageError::ShardNotFound { .. })
    ));
}

#[test]
fn store_open_leaves_a_tombstone_whose_delete_is_in_progress() {
    let sim = SimFs::new();
    let fs = FileSystem::new(sim.clone());
    let root = Path::new("/root");
    Store::options(root)
        .config(config())
        .file_system(fs.clone())
        .open()
        .unwrap();
    let tombstone = root.join(tombstone_name(&key(0).dir_name()));
    sim.create_dir_all(&tombstone).unwrap();
    sim.write_file(&tombstone.join("00000000000000000000.log"), b"x")
        .unwrap();
    // Another store's delete holds its lock.
    let held = sim.try_lock_dir(&tombstone).unwrap().unwrap();
    Store::options(root)
        .config(config())
        .file_system(fs.clone())
        .open()
        .unwrap();
    assert!(sim.is_dir(&tombstone));
    drop(held);
    Store::options(root)
        .config(config())
        .file_system(fs.clone())
        .open()
        .unwrap();
    assert!(!sim.is_dir(&tombstone));
}
