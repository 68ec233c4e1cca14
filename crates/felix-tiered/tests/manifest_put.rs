//! The manifest's put-if-absent when the store applied it but reported a
//! failure (a 503 after storing it; `object_store` then retries and finds
//! the object there): the tier reads the object back, and this writer's
//! own bytes are success. A different manifest under that number is
//! another writer's, and only that stops the tier as `Fenced`.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use felix_format::ShardKey;
use felix_format::tier_manifest::manifest_object_name;
use felix_storage::ReadBound;
use felix_tiered::{TierConfig, TierRetention, TieredError, TieredShard, stores};

use common::faults::{FaultStore, Op};
use common::{fill, payload, small_shard};

const RECORDS: u64 = 60;

fn config() -> TierConfig {
    TierConfig {
        local: TierRetention {
            max_bytes: Some(1500),
            max_age: None,
        },
        chunk_bytes: 4096,
        cache_bytes: 64 << 10,
        ..TierConfig::default()
    }
}

fn key() -> ShardKey {
    ShardKey::new("t", "n", "manifest", 0)
}

fn manifest_path(seq: u64) -> Path {
    Path::from(format!(
        "felix/{}/{}",
        key().dir_name(),
        manifest_object_name(seq)
    ))
}

async fn manifests(store: &Arc<dyn ObjectStore>) -> Vec<Path> {
    let mut all: Vec<Path> = store
        .list(None)
        .map_ok(|m| m.location)
        .try_filter(|p| futures::future::ready(p.as_ref().contains("/manifest/")))
        .try_collect()
        .await
        .unwrap();
    all.sort();
    all
}

async fn get(store: &Arc<dyn ObjectStore>, path: &Path) -> Bytes {
    store.get(path).await.unwrap().bytes().await.unwrap()
}

/// Every offset reads back through `tiered` with its own payload, once.
async fn all_readable(tiered: &TieredShard) {
    let mut at = 0;
    while at < RECORDS {
        let records = tiered.read(at, 500).await.unwrap();
        assert!(!records.is_empty(), "offset {at} unreadable");
        for r in records {
            assert_eq!((r.offset, &r.payload[..]), (at, &payload(at)[..]));
            at += 1;
        }
    }
}

/// Offloads once with the manifest's first put faulted by `op`: the pass
/// succeeds on the manifest the store holds, and the local copies go.
async fn offload_with_manifest_put(op: Op) {
    let dir = tempfile::tempdir().unwrap();
    let shard = small_shard(dir.path());
    fill(&shard, RECORDS);
    let inner = stores::in_memory();
    let faulty = Arc::new(FaultStore::on(Arc::clone(&inner), op, 0, "/manifest/"));
    let store: Arc<dyn ObjectStore> = faulty.clone();
    let tiered = TieredShard::open(Arc::clone(&shard), key(), store, config())
        .await
        .unwrap();
    let outcome = tiered.offload().await.unwrap();
    assert!(faulty.fired(), "{op:?} never fired");
    assert_eq!(outcome.manifest_seq, 1);
    assert!(!outcome.uploaded.is_empty());
    assert_eq!(outcome.local_start, tiered.remote_range().end);
    assert_eq!(shard.offsets().base, outcome.local_start);
    assert_eq!(manifests(&inner).await, vec![manifest_path(1)]);
    all_readable(&tiered).await;
    // A fresh process over the store finds the same manifest.
    drop(tiered);
    let reopened = TieredShard::open(Arc::clone(&shard), key(), inner, config())
        .await
        .unwrap();
    assert_eq!(reopened.manifest().seq, 1);
    assert_eq!(reopened.remote_range().end, outcome.local_start);
    all_readable(&reopened).await;
}

#[tokio::test]
async fn offload_manifest_put_applied_then_retried_into_already_exists_is_success() {
    offload_with_manifest_put(Op::RetriedPut).await;
}

#[tokio::test]
async fn offload_manifest_put_applied_then_reported_failed_is_success() {
    offload_with_manifest_put(Op::AppliedPut).await;
}

#[tokio::test]
async fn offload_manifest_put_refused_leaves_every_segment_local() {
    let dir = tempfile::tempdir().unwrap();
    let shard = small_shard(dir.path());
    fill(&shard, RECORDS);
    let inner = stores::in_memory();
    let faulty = Arc::new(FaultStore::on(Arc::clone(&inner), Op::Put, 0, "/manifest/"));
    let store: Arc<dyn ObjectStore> = faulty.clone();
    let tiered = TieredShard::open(Arc::clone(&shard), key(), store, config())
        .await
        .unwrap();
    let err = tiered.offload().await.unwrap_err();
    assert!(
        matches!(&err, TieredError::Store { operation: "put", object, .. } if *object == manifest_path(1)),
        "{err:?}"
    );
    assert_eq!(shard.offsets().base, 0);
    assert!(manifests(&inner).await.is_empty());
    // The next pass takes the next number and succeeds.
    let outcome = tiered.offload().await.unwrap();
    assert_eq!(outcome.manifest_seq, 2);
    assert_eq!(shard.offsets().base, outcome.local_start);
    all_readable(&tiered).await;
}

#[tokio::test]
async fn offload_manifest_put_over_another_writers_manifest_is_fenced() {
    let store = stores::in_memory();
    // Two shards holding the same records, both tiered to one key: two
    // writers.
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (shard_a, shard_b) = (small_shard(dir_a.path()), small_shard(dir_b.path()));
    fill(&shard_a, RECORDS);
    fill(&shard_b, RECORDS);
    let a = TieredShard::open(Arc::clone(&shard_a), key(), store.clone(), config())
        .await
        .unwrap();
    // B's put goes through the fault layer too: its retried put finds A's
    // manifest there, and that is not B's own.
    let faulty = Arc::new(FaultStore::on(
        store.clone(),
        Op::RetriedPut,
        0,
        "/manifest/",
    ));
    let store_b: Arc<dyn ObjectStore> = faulty.clone();
    let b = TieredShard::open(Arc::clone(&shard_b), key(), store_b, config())
        .await
        .unwrap();
    assert_eq!(a.offload().await.unwrap().manifest_seq, 1);
    let a_bytes = get(&store, &manifest_path(1)).await;
    let err = b.offload().await.unwrap_err();
    assert!(faulty.fired());
    assert!(
        matches!(&err, TieredError::Fenced { object } if *object == manifest_path(1)),
        "{err:?}"
    );
    // A's manifest is untouched, and B deleted nothing locally.
    assert_eq!(manifests(&store).await, vec![manifest_path(1)]);
    assert_eq!(get(&store, &manifest_path(1)).await, a_bytes);
    assert_eq!(shard_b.offsets().base, 0);
    assert_eq!(
        shard_b.read(0, 1, ReadBound::Committed).unwrap()[0].payload[..],
        payload(0)[..]
    );
    all_readable(&a).await;
}

#[tokio::test]
async fn offload_manifest_put_over_a_damaged_object_is_not_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let shard = small_shard(dir.path());
    fill(&shard, RECORDS);
    let store = stores::in_memory();
    let tiered = TieredShard::open(Arc::clone(&shard), key(), store.clone(), config())
        .await
        .unwrap();
    // Debris under the number the next manifest takes, written after the
    // open (which would otherwise count it as used).
    store
        .put(
            &manifest_path(1),
            Bytes::from_static(b"not a manifest").into(),
        )
        .await
        .unwrap();
    let err = tiered.offload().await.unwrap_err();
    assert!(
        matches!(&err, TieredError::Manifest { object, .. } if *object == manifest_path(1)),
        "{err:?}"
    );
    assert_eq!(shard.offsets().base, 0);
    // Readers pass over it, and the next pass takes a higher number.
    let outcome = tiered.offload().await.unwrap();
    assert_eq!(outcome.manifest_seq, 2);
    all_readable(&tiered).await;
}
