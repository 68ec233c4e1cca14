//! The store: lazy shared shards, background periodic sync, close.

use std::sync::Arc;
use std::time::{Duration, Instant};

use felix_storage::{
    Durability, Preallocation, Record, ShardKey, StorageError, Store, StoreConfig,
};

#[test]
fn store_periodic_durability_syncs_in_the_background() {
    let root = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        durability: Durability::Periodic(Duration::from_millis(5)),
        preallocate: Preallocation::Off,
        ..StoreConfig::default()
    };
    let store = Store::open(&root.path().join("new-root"), config).unwrap();
    let shard = store.shard(&ShardKey::new("t", "n", "s", 1)).unwrap();
    shard
        .append(&[Record::new(1, "a"), Record::new(2, "b")])
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while shard.durable_offset() < 2 {
        assert!(Instant::now() < deadline, "the background sync never ran");
        std::thread::sleep(Duration::from_millis(2));
    }
    // One sync made both durable; later ticks find nothing to sync.
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(shard.stats().syncs, 1);
    store.close().unwrap();
    assert!(matches!(
        store.shard(&ShardKey::new("t", "n", "s", 1)),
        Err(StorageError::StoreClosed { .. })
    ));
}

#[test]
fn store_shard_returns_one_shared_handle_per_key() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::open(
        root.path(),
        StoreConfig {
            preallocate: Preallocation::Off,
            ..StoreConfig::default()
        },
    )
    .unwrap();
    let key = ShardKey::new("a.b", "..", "x/y", 1);
    let a = store.shard(&key).unwrap();
    let b = store.shard(&key).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.label(), "a_b____x_y_1-1233ad2506d32437");
    assert!(root.path().join("a_b____x_y_1-1233ad2506d32437").is_dir());
    let other = Store::open(root.path(), StoreConfig::default()).unwrap();
    assert!(
        matches!(other.shard(&key), Err(StorageError::Locked { .. })),
        "a second store is locked out"
    );
}
