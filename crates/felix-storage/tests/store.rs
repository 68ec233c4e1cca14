//! The store: lazy shared shards, background periodic sync, and opening an
//! existing shard kept apart from creating one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use felix_format::key_file::{KeyPart, KeyPartProblem, MAX_KEY_PART_BYTES};
use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
use felix_storage::{
    Durability, Preallocation, ReadBound, Record, ShardKey, StorageError, Store, StoreConfig,
};

fn config() -> StoreConfig {
    StoreConfig {
        preallocate: Preallocation::Off,
        ..StoreConfig::default()
    }
}

#[test]
fn store_periodic_durability_syncs_in_the_background() {
    let root = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        durability: Durability::Periodic(Duration::from_millis(5)),
        ..config()
    };
    let store = Store::options(root.path().join("new-root"))
        .config(config)
        .open()
        .unwrap();
    let key = ShardKey::new("t", "n", "s", 1);
    let shard = store.create_shard(&key).unwrap();
    shard
        .append(&[Record::new(1, "a"), Record::new(2, "b")])
        .wait()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while shard.offsets().durable < 2 {
        assert!(Instant::now() < deadline, "the background sync never ran");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(shard.stats().syncs >= 1);
    store.close().unwrap();
    let err = store.open_shard(&key).unwrap_err();
    assert!(
        matches!(&err, StorageError::StoreClosed { root: r } if *r == root.path().join("new-root")),
        "{err:?}"
    );
}

#[test]
fn store_open_shard_returns_one_shared_handle_per_key() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    let key = ShardKey::new("a.b", "..", "x/y", 1);
    let a = store.create_shard(&key).unwrap();
    let b = store.open_shard(&key).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    // Labelled by the key as the broker names it; the directory name is
    // the lossy one.
    assert_eq!(a.label(), r#"a.b/../"x/y"/1"#);
    assert!(root.path().join("a_b____x_y_1-1233ad2506d32437").is_dir());
    let other = Store::options(root.path())
        .config(StoreConfig::default())
        .open();
    assert!(
        matches!(&other, Err(StorageError::StoreLocked { root: r }) if r == root.path()),
        "a second store is locked out: {other:?}"
    );
}

/// A mistyped key once made a new, empty shard silently.
#[test]
fn store_open_shard_of_a_key_without_directory_is_not_found_and_creates_nothing() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    store
        .create_shard(&ShardKey::new("acme", "default", "orders", 0))
        .unwrap();
    let typo = ShardKey::new("acme", "default", "ordres", 0);
    let err = store.open_shard(&typo).unwrap_err();
    let StorageError::ShardNotFound { shard, key, dir } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(
        (&**shard, key.as_deref(), dir),
        (
            typo.to_string().as_str(),
            Some(&typo),
            &root.path().join(typo.dir_name())
        )
    );
    assert_eq!(
        err.to_string(),
        format!(
            "shard acme/default/ordres/0 does not exist (no directory {})",
            dir.display()
        )
    );
    assert!(!dir.exists());
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 1);
}

/// A shard directory opened alone has no key: its error names it by its
/// label, and says so.
#[test]
fn shard_opened_alone_without_create_is_not_found_by_label_without_a_key() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("missing");
    let err = felix_storage::Shard::options(&dir)
        .label("orders-replica")
        .create_if_missing(false)
        .open()
        .unwrap_err();
    assert!(
        matches!(&err, StorageError::ShardNotFound { shard, key: None, dir: d } if **shard == *"orders-replica" && *d == dir),
        "{err:?}"
    );
    assert!(!dir.exists());
}

#[test]
fn store_create_shard_of_an_existing_key_is_refused_and_changes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    let key = ShardKey::new("acme", "default", "orders", 0);
    let shard = store.create_shard(&key).unwrap();
    shard.append(&[Record::new(1, "kept")]).wait().unwrap();
    // Open in this store, and on disk only (closed).
    for _ in 0..2 {
        let err = store.create_shard_at(&key, 100).unwrap_err();
        assert!(
            matches!(&err, StorageError::AlreadyExists { key: k, dir } if *k == key && *dir == root.path().join(key.dir_name())),
            "{err:?}"
        );
        store.close_shard(&key).unwrap();
    }
    let reopened = store.open_shard(&key).unwrap();
    assert_eq!(
        (reopened.offsets().base, reopened.offsets().written),
        (0, 1)
    );
    assert_eq!(
        reopened.read(0, 1024, ReadBound::Committed).unwrap()[0].payload,
        "kept"
    );
}

#[test]
fn store_create_shard_at_an_offset_begins_the_log_there_and_survives_reopen() {
    let root = tempfile::tempdir().unwrap();
    let key = ShardKey::new("acme", "default", "orders", 2);
    {
        let store = Store::options(root.path()).config(config()).open().unwrap();
        let replica = store.create_shard_at(&key, 5_000).unwrap();
        assert_eq!(
            (replica.offsets().base, replica.offsets().written),
            (5_000, 5_000)
        );
        replica.append(&[Record::new(1, "first")]).wait().unwrap();
        store.close().unwrap();
    }
    let store = Store::options(root.path()).config(config()).open().unwrap();
    let replica = store.open_shard(&key).unwrap();
    assert_eq!(
        (replica.offsets().base, replica.offsets().written),
        (5_000, 5_001)
    );
}

#[test]
fn store_create_shard_with_a_part_too_long_for_the_key_file_writes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    let key = ShardKey::new("t", "s".repeat(MAX_KEY_PART_BYTES + 1), "s", 0);
    let err = store.create_shard(&key).unwrap_err();
    let StorageError::KeyTooLong { key: k, problem } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(k, &key);
    assert_eq!(
        **problem,
        SideFileError::new(
            SideFileKind::KeyFile,
            SideFileDefect::KeyPart {
                part: KeyPart::Namespace,
                problem: KeyPartProblem::TooLong {
                    len: MAX_KEY_PART_BYTES + 1,
                    max: MAX_KEY_PART_BYTES
                }
            }
        )
    );
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
}
