//! Deleting a tiered shard deletes its remote copy too.

mod common;

use felix_format::ShardKey;
use felix_storage::{Record, Store, StoreConfig};
use felix_tiered::{TierConfig, TierRetention, TieredShard, delete_shard, stores};
use futures::TryStreamExt;

#[tokio::test]
async fn deleting_a_shard_deletes_its_local_and_remote_copies_and_is_repeatable() {
    let root = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        segment_size_bytes: 1024,
        ..StoreConfig::default()
    };
    let store = Store::options(root.path()).config(config).open().unwrap();
    let key = ShardKey::new("acme", "default", "orders", 0);
    let other = ShardKey::new("acme", "default", "orders", 1);
    let remote = stores::in_memory();
    let tier = TierConfig {
        local: TierRetention {
            max_bytes: Some(1500),
            max_age: None,
        },
        ..TierConfig::default()
    };
    for k in [&key, &other] {
        let shard = store.create_shard(k).unwrap();
        for i in 0..100u64 {
            shard
                .append(&[Record::new(i, common::payload(i))])
                .wait()
                .unwrap();
        }
        let tiered = TieredShard::open(shard, k.clone(), remote.clone(), tier.clone())
            .await
            .unwrap();
        assert!(!tiered.offload().await.unwrap().uploaded.is_empty());
    }
    let count = |prefix: String| {
        let remote = remote.clone();
        async move {
            remote
                .list(Some(&object_store::path::Path::from(prefix)))
                .try_collect::<Vec<_>>()
                .await
                .unwrap()
                .len()
        }
    };
    let objects = count(format!("felix/{}", key.dir_name())).await;
    assert!(objects > 3);
    assert_eq!(
        delete_shard(&store, &key, &remote, "felix").await.unwrap(),
        objects
    );
    assert!(matches!(
        store.open_shard(&key),
        Err(felix_storage::StorageError::ShardNotFound { .. })
    ));
    assert_eq!(count(format!("felix/{}", key.dir_name())).await, 0);
    // The other shard is untouched; a repeat finds nothing to do.
    assert!(count(format!("felix/{}", other.dir_name())).await > 3);
    assert_eq!(
        delete_shard(&store, &key, &remote, "felix").await.unwrap(),
        0
    );
}
