//! Offload and read back through the tier, on the in-memory and the local
//! directory stores.

mod common;

use std::sync::Arc;

use felix_format::ShardKey;
use felix_storage::ReadBound;
use felix_tiered::{TierConfig, TierRetention, TierStore, TieredError, TieredShard, stores};

use common::{fill, payload, small_shard};

fn config(local_bytes: u64) -> TierConfig {
    TierConfig {
        local: TierRetention {
            max_bytes: Some(local_bytes),
            max_age: None,
        },
        chunk_bytes: 4096,
        cache_bytes: 64 << 10,
        ..TierConfig::default()
    }
}

async fn read_all(tiered: &TieredShard, from: u64, to: u64) -> Vec<u64> {
    let mut offsets = Vec::new();
    let mut at = from;
    while at < to {
        let records = tiered.read(at, 300).await.unwrap();
        assert!(!records.is_empty(), "nothing at {at}");
        for r in &records {
            assert_eq!(r.offset, at);
            assert_eq!(&r.payload[..], &payload(at)[..]);
            assert_eq!(r.timestamp_micros, 1_000 + at);
            offsets.push(at);
            at += 1;
        }
    }
    offsets
}

async fn offload_then_read(store: TierStore) {
    let dir = tempfile::tempdir().unwrap();
    let shard = small_shard(dir.path());
    fill(&shard, 200);
    let key = ShardKey::new("acme", "default", "orders", 1);
    let tiered = TieredShard::open(Arc::clone(&shard), key.clone(), store.clone(), config(3000))
        .await
        .unwrap();
    assert_eq!(tiered.remote_range(), 0..0);
    let outcome = tiered.offload().await.unwrap();
    assert!(!outcome.uploaded.is_empty());
    assert_eq!(outcome.manifest_seq, 1);
    let local_start = shard.offsets().base;
    assert!(local_start > 0);
    assert_eq!(tiered.remote_range(), 0..local_start);
    assert_eq!(outcome.local_start, local_start);
    // The local shard no longer holds them; the tier does.
    assert!(matches!(
        shard.read(0, 100, ReadBound::Committed),
        Err(felix_storage::StorageError::Trimmed { .. })
    ));
    assert_eq!(
        read_all(&tiered, 0, 200).await,
        (0..200).collect::<Vec<_>>()
    );
    // Mid-segment starts go through the remote index.
    assert_eq!(
        read_all(&tiered, 37, 60).await,
        (37..60).collect::<Vec<_>>()
    );
    // A second pass with nothing new does nothing.
    let again = tiered.offload().await.unwrap();
    assert!(again.uploaded.is_empty());
    assert_eq!(again.manifest_seq, 1);
    // Reopened over the same store, the manifest is found.
    drop(tiered);
    let reopened = TieredShard::open(shard, key, store, config(3000))
        .await
        .unwrap();
    assert_eq!(reopened.remote_range(), 0..local_start);
    assert_eq!(read_all(&reopened, 0, 200).await.len(), 200);
}

#[tokio::test]
async fn offloaded_records_read_back_from_memory() {
    offload_then_read(stores::in_memory()).await;
}

#[tokio::test]
async fn offloaded_records_read_back_from_a_local_directory() {
    let remote = tempfile::tempdir().unwrap();
    offload_then_read(stores::local_dir(remote.path()).unwrap()).await;
}

#[tokio::test]
async fn more_offloads_append_to_the_manifest_and_keep_two_versions() {
    let dir = tempfile::tempdir().unwrap();
    let shard = small_shard(dir.path());
    let store = stores::in_memory();
    let tiered = TieredShard::open(
        Arc::clone(&shard),
        ShardKey::new("t", "n", "s", 0),
        store.clone(),
        config(2000),
    )
    .await
    .unwrap();
    for round in 1..=3u64 {
        fill(&shard, 100);
        let outcome = tiered.offload().await.unwrap();
        assert_eq!(outcome.manifest_seq, round);
    }
    use futures::TryStreamExt;
    let names: Vec<String> = store
        .list(None)
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    let manifests: Vec<_> = names.iter().filter(|n| n.contains("/manifest/")).collect();
    assert_eq!(manifests.len(), 2, "{manifests:?}");
    assert_eq!(read_all(&tiered, 0, 300).await.len(), 300);
}

#[tokio::test]
async fn below_the_remote_start_is_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let shard = small_shard(dir.path());
    fill(&shard, 100);
    shard.delete_records_before(5).unwrap();
    let tiered = TieredShard::open(
        Arc::clone(&shard),
        ShardKey::new("t", "n", "s", 0),
        stores::in_memory(),
        config(1500),
    )
    .await
    .unwrap();
    assert!(matches!(
        tiered.read(2, 100).await,
        Err(TieredError::Trimmed {
            requested: 2,
            oldest: 5
        })
    ));
    tiered.offload().await.unwrap();
    assert_eq!(tiered.remote_range().start, 5);
    assert!(matches!(
        tiered.read(4, 100).await,
        Err(TieredError::Trimmed {
            requested: 4,
            oldest: 5
        })
    ));
    assert_eq!(read_all(&tiered, 5, 100).await.len(), 95);
}

#[tokio::test]
async fn a_shard_with_its_own_retention_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = felix_storage::StoreConfig {
        retention: felix_storage::Retention {
            max_bytes: Some(1 << 20),
            ..Default::default()
        },
        ..Default::default()
    };
    let shard = Arc::new(
        felix_storage::Shard::options(dir.path())
            .config(config)
            .open()
            .unwrap(),
    );
    let err = TieredShard::open(
        shard,
        ShardKey::new("t", "n", "s", 0),
        stores::in_memory(),
        TierConfig::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, TieredError::ShardRetentionOn));
}

#[tokio::test]
async fn remote_retention_moves_the_manifest_then_deletes_the_objects() {
    let dir = tempfile::tempdir().unwrap();
    let shard = small_shard(dir.path());
    fill(&shard, 300);
    let store = stores::in_memory();
    let mut cfg = config(1500);
    cfg.remote.max_bytes = Some(3000);
    let tiered = TieredShard::open(
        Arc::clone(&shard),
        ShardKey::new("t", "n", "s", 0),
        store.clone(),
        cfg,
    )
    .await
    .unwrap();
    tiered.offload().await.unwrap();
    let before = tiered.manifest();
    let removed = tiered.apply_remote_retention().await.unwrap();
    let after = tiered.manifest();
    assert!(!removed.is_empty());
    assert_eq!(after.seq, before.seq + 1);
    assert!(after.segments.iter().map(|s| s.extent.len).sum::<u64>() <= 3000);
    let start = after.start_offset;
    assert_eq!(start, after.segments[0].extent.base_offset);
    assert!(matches!(
        tiered.read(start - 1, 100).await,
        Err(TieredError::Trimmed { oldest, .. }) if oldest == start
    ));
    assert_eq!(
        read_all(&tiered, start, 300).await.len() as u64,
        300 - start
    );
    // Nothing is left for a sweep: the objects went after the manifest.
    assert_eq!(tiered.sweep().await.unwrap(), 0);
    use futures::TryStreamExt;
    let segment_objects = store
        .list(None)
        .try_filter(|m| futures::future::ready(m.location.as_ref().contains("/segments/")))
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .len();
    assert_eq!(segment_objects, after.segments.len() * 3);
}

#[tokio::test]
async fn a_damaged_remote_segment_is_an_error_naming_object_and_byte() {
    use object_store::{ObjectStoreExt, PutPayload};
    let dir = tempfile::tempdir().unwrap();
    let shard = small_shard(dir.path());
    fill(&shard, 100);
    let store = stores::in_memory();
    let tiered = TieredShard::open(
        Arc::clone(&shard),
        ShardKey::new("t", "n", "s", 0),
        store.clone(),
        config(1500),
    )
    .await
    .unwrap();
    tiered.offload().await.unwrap();
    let first = tiered.manifest().segments[0];
    let path = object_store::path::Path::from(format!(
        "felix/{}/{}",
        ShardKey::new("t", "n", "s", 0).dir_name(),
        felix_format::tier_manifest::segment_object_name(
            first.extent.id,
            first.upload,
            felix_format::FileKind::Segment
        )
    ));
    let mut bytes = store
        .get(&path)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    // The first record's payload (header 32 + record header 28).
    bytes[32 + 28 + 3] ^= 0x40;
    store.put(&path, PutPayload::from(bytes)).await.unwrap();
    let err = tiered.read(0, 100).await.unwrap_err();
    assert!(
        matches!(
            &err,
            TieredError::RemoteCorrupt { object, position: 32, kind: felix_format::CorruptionKind::RecordChecksum { .. } }
                if *object == path
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn lookups_by_time_reach_into_the_remote_segments() {
    let dir = tempfile::tempdir().unwrap();
    let shard = small_shard(dir.path());
    // Timestamps 1_000 + offset, except offsets 30 and 149, stamped late.
    for offset in 0..150u64 {
        let ts = match offset {
            30 => 5_000,
            149 => 6_000,
            _ => 1_000 + offset,
        };
        shard
            .append(&[felix_storage::Record::new(ts, payload(offset))])
            .wait()
            .unwrap();
    }
    let tiered = TieredShard::open(
        Arc::clone(&shard),
        ShardKey::new("t", "n", "s", 0),
        stores::in_memory(),
        config(1500),
    )
    .await
    .unwrap();
    tiered.offload().await.unwrap();
    let local_start = shard.offsets().base;
    assert!(local_start > 40);
    let at = |t| {
        let tiered = &tiered;
        async move {
            tiered
                .offset_for_timestamp(t)
                .await
                .unwrap()
                .map(|h| h.offset)
        }
    };
    assert_eq!(at(0).await, Some(0));
    assert_eq!(at(1_010).await, Some(10));
    // Offset 30 reaches 1_040 first (its timestamp is 5_000).
    assert_eq!(at(1_040).await, Some(30));
    assert_eq!(at(1_000 + local_start + 1).await, Some(30));
    // Past every remote timestamp: the local shard answers.
    assert!(local_start < 149);
    assert_eq!(at(5_001).await, Some(149));
    assert_eq!(at(6_001).await, None);
}
