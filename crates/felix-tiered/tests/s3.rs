//! The tier over a real S3-protocol server on loopback (s3s-fs), through
//! `object_store`'s `AmazonS3` client: path-style requests, dummy keys.

mod common;

use std::sync::Arc;

use felix_format::ShardKey;
use felix_tiered::{TierConfig, TierRetention, TieredError, TieredShard, stores};
use object_store::{PutMode, PutOptions, PutPayload};

use common::{fill, payload, small_shard};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offload_read_back_retention_and_sweep_over_s3() {
    let server_root = tempfile::tempdir().unwrap();
    let server = common::s3::start(server_root.path()).await;
    let store = stores::s3(&server.endpoint).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let shard = small_shard(dir.path());
    fill(&shard, 300);
    let config = TierConfig {
        local: TierRetention {
            max_bytes: Some(2000),
            max_age: None,
        },
        chunk_bytes: 4096,
        ..TierConfig::default()
    };
    let key = ShardKey::new("acme", "default", "orders", 7);
    let tiered = TieredShard::open(
        Arc::clone(&shard),
        key.clone(),
        store.clone(),
        config.clone(),
    )
    .await
    .unwrap();
    let outcome = tiered.offload().await.unwrap();
    assert!(!outcome.uploaded.is_empty());
    assert!(shard.offsets().base > 0);
    let mut at = 0;
    while at < 300 {
        let records = tiered.read(at, 400).await.unwrap();
        assert!(!records.is_empty(), "nothing read at {at}");
        for r in records {
            assert_eq!((r.offset, &r.payload[..]), (at, &payload(at)[..]));
            at += 1;
        }
    }
    // Conditional puts work on this server: the manifest's version cannot
    // be written twice.
    let manifest = object_store::path::Path::from(format!(
        "felix/{}/{}",
        key.dir_name(),
        felix_format::tier_manifest::manifest_object_name(1)
    ));
    let again = store
        .put_opts(
            &manifest,
            PutPayload::from_static(b"x"),
            PutOptions::from(PutMode::Create),
        )
        .await;
    assert!(
        matches!(again, Err(object_store::Error::AlreadyExists { .. })),
        "{again:?}"
    );

    // Remote retention and a reopen over the same server.
    let mut with_remote = config;
    with_remote.remote.max_bytes = Some(3000);
    drop(tiered);
    let tiered = TieredShard::open(Arc::clone(&shard), key, store.clone(), with_remote)
        .await
        .unwrap();
    let removed = tiered.apply_remote_retention().await.unwrap();
    assert!(!removed.is_empty());
    let start = tiered.remote_range().start;
    assert!(matches!(
        tiered.read(start - 1, 100).await,
        Err(TieredError::Trimmed { oldest, .. }) if oldest == start
    ));
    assert_eq!(tiered.read(start, 100).await.unwrap()[0].offset, start);
    assert_eq!(tiered.sweep().await.unwrap(), 0);
}

/// A gateway answered 503 to the manifest put after the server stored it;
/// `object_store` retried the put-if-absent and the server answered 412.
/// The object is this writer's own: the offload succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifest_put_answered_503_after_the_server_applied_it_is_success_over_s3() {
    let server_root = tempfile::tempdir().unwrap();
    let (server, failed) = common::s3::start_with_503_after(server_root.path(), "/manifest/").await;
    let store = stores::s3(&server.endpoint).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let shard = small_shard(dir.path());
    fill(&shard, 100);
    let config = TierConfig {
        local: TierRetention {
            max_bytes: Some(2000),
            max_age: None,
        },
        chunk_bytes: 4096,
        ..TierConfig::default()
    };
    let key = ShardKey::new("acme", "default", "orders", 8);
    let tiered = TieredShard::open(Arc::clone(&shard), key.clone(), store.clone(), config)
        .await
        .unwrap();
    let outcome = tiered.offload().await.unwrap();
    assert_eq!(failed.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(outcome.manifest_seq, 1);
    assert_eq!(shard.offsets().base, outcome.local_start);
    assert_eq!(tiered.remote_range(), 0..outcome.local_start);
    let mut at = 0;
    while at < 100 {
        for r in tiered.read(at, 400).await.unwrap() {
            assert_eq!((r.offset, &r.payload[..]), (at, &payload(at)[..]));
            at += 1;
        }
    }
}
