//! Every directory the store creates — a shard directory and each missing
//! ancestor of it or of a store root — is synced into its parent before a
//! record is acknowledged in it, so a power loss right after an ack keeps
//! the records however many directories had to be made.

use std::path::Path;

use felix_format::ShardKey;
use felix_io::sim::{CrashPlan, SimFs};
use felix_io::{FileSystem, Vfs};
use felix_storage::{
    Durability, Preallocation, ReadBound, Record, Shard, ShardId, Store, StoreConfig,
};

fn config() -> StoreConfig {
    StoreConfig {
        durability: Durability::OnCommit,
        preallocate: Preallocation::Off,
        ..StoreConfig::default()
    }
}

/// A simulated disk holding only a durable `/`.
fn disk() -> SimFs {
    let sim = SimFs::new();
    sim.create_dir_all(Path::new("/")).unwrap();
    sim
}

#[test]
fn shard_open_with_missing_ancestors_keeps_acked_records_after_power_loss() {
    let sim = disk();
    let dir = Path::new("/a/b/shard");
    let shard = Shard::options(dir)
        .file_system(FileSystem::new(sim.clone()))
        .config(config())
        .label("shard")
        .open()
        .unwrap();
    let receipt = shard
        .append(&[Record::new(1, "one"), Record::new(2, "two")])
        .wait()
        .unwrap();
    assert_eq!(shard.offsets().durable, receipt.last_offset + 1, "acked");

    // Nothing that was not synced reaches the disk.
    let crashed = sim.crash(&CrashPlan::durable_only());
    for made in ["/a", "/a/b", "/a/b/shard"] {
        assert!(crashed.is_dir(Path::new(made)), "{made} lost");
    }
    let reopened = Shard::options(dir)
        .file_system(FileSystem::new(crashed))
        .config(config())
        .label("shard")
        .open()
        .unwrap();
    let records = reopened.read(0, 1 << 20, ReadBound::Committed).unwrap();
    let payloads: Vec<_> = records.iter().map(|r| r.payload.clone()).collect();
    assert_eq!(payloads, ["one", "two"]);
}

#[test]
fn store_open_with_missing_ancestors_keeps_acked_records_after_power_loss() {
    let sim = disk();
    let root = Path::new("/data/felix/root");
    let key = ShardKey::new("acme", "default", "orders", 0);
    let store = Store::options(root)
        .config(config())
        .file_system(FileSystem::new(sim.clone()))
        .open()
        .unwrap();
    store
        .create_shard(&key)
        .unwrap()
        .append(&[Record::new(1, "kept")])
        .wait()
        .unwrap();

    let crashed = sim.crash(&CrashPlan::durable_only());
    let store = Store::options(root)
        .config(config())
        .file_system(FileSystem::new(crashed))
        .open()
        .unwrap();
    assert_eq!(store.keys().unwrap(), [ShardId::Key(key.clone())]);
    assert_eq!(
        store
            .open_shard(&key)
            .unwrap()
            .read(0, 1 << 20, ReadBound::Committed)
            .unwrap()[0]
            .payload,
        "kept"
    );
}

#[test]
fn shard_open_syncs_each_new_directory_into_its_parent_outermost_first() {
    let sim = disk();
    Shard::options(Path::new("/a/b/c"))
        .file_system(FileSystem::new(sim.clone()))
        .config(config())
        .label("c")
        .open()
        .unwrap();
    let synced: Vec<_> = sim
        .log()
        .into_iter()
        .filter(|e| e.op == "sync_dir")
        .map(|e| e.path.display().to_string())
        .take(3)
        .collect();
    assert_eq!(synced, ["/", "/a", "/a/b"]);
}

#[test]
fn store_open_failing_to_create_its_root_is_a_store_io_error_naming_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let root = file.join("store");
    let err = Store::options(&root)
        .config(config())
        .file_system(FileSystem::os())
        .open()
        .unwrap_err();
    // A store-level failure, not a segment error of some shard.
    match &err {
        felix_storage::StorageError::Io(io) => {
            assert_eq!(io.op(), "create directory");
            assert_eq!(io.path(), root);
            assert_eq!(io.raw_os_error(), Some(20), "ENOTDIR");
        }
        other => panic!("expected StorageError::Io, got {other:?}"),
    }
    let source = std::error::Error::source(&err)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .map(std::io::Error::raw_os_error);
    assert_eq!(source, Some(Some(20)), "source() reaches the io::Error");
}
