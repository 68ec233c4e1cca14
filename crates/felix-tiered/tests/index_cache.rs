//! A remote segment's index is fetched, checked and parsed once and then
//! kept: warm reads make no request for it, and a manifest that drops the
//! segment drops its index too. A damaged index object is walked around.

mod common;

use std::sync::Arc;

use felix_format::tier_manifest::segment_object_name;
use felix_format::{FileKind, ShardKey};
use felix_tiered::{TierConfig, TierRetention, TieredError, TieredShard, stores};
use object_store::ObjectStoreExt;

use common::counting::CountingStore;
use common::{fill, payload, small_shard};

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

/// Whether `path` is an object of kind `kind`.
fn is_kind(path: &object_store::path::Path, kind: FileKind) -> bool {
    let suffix = segment_object_name(0, 0, kind);
    let ext = suffix.rsplit('.').next().unwrap();
    path.as_ref().ends_with(&format!(".{ext}"))
}

async fn open(store: Arc<CountingStore>, records: u64) -> (tempfile::TempDir, TieredShard) {
    let dir = tempfile::tempdir().unwrap();
    let shard = small_shard(dir.path());
    fill(&shard, records);
    let mut cfg = config();
    cfg.remote.max_bytes = Some(3000);
    let tiered = TieredShard::open(shard, ShardKey::new("t", "n", "s", 0), store, cfg)
        .await
        .unwrap();
    tiered.offload().await.unwrap();
    (dir, tiered)
}

#[tokio::test]
async fn a_warm_read_makes_no_request_and_checks_every_record() {
    let store = Arc::new(CountingStore::new(stores::in_memory()));
    let (_dir, tiered) = open(Arc::clone(&store), 200).await;
    let manifest = tiered.manifest();
    let segment = manifest
        .segments
        .iter()
        .find(|s| s.index_len > 0 && s.extent.next_offset - s.extent.base_offset > 4)
        .unwrap();
    let target = segment.extent.base_offset + 3;
    store.take_gets();

    let cold = tiered.read(target, 1).await.unwrap();
    assert_eq!(cold[0].offset, target);
    assert_eq!(&cold[0].payload[..], &payload(target)[..]);
    let gets = store.take_gets();
    assert_eq!(
        gets.iter().filter(|p| is_kind(p, FileKind::Index)).count(),
        1,
        "{gets:?}"
    );

    // Every other record of the segment, through the kept index.
    for offset in segment.extent.base_offset..segment.extent.next_offset {
        let warm = tiered.read(offset, 1).await.unwrap();
        assert_eq!(warm[0].offset, offset);
        assert_eq!(&warm[0].payload[..], &payload(offset)[..]);
    }
    assert_eq!(store.take_gets(), Vec::<object_store::path::Path>::new());
}

#[tokio::test]
async fn a_segment_remote_retention_drops_takes_its_index_with_it() {
    let store = Arc::new(CountingStore::new(stores::in_memory()));
    let (_dir, tiered) = open(Arc::clone(&store), 300).await;
    let before = tiered.manifest();
    let oldest = before.segments[0];
    let newest = *before.segments.last().unwrap();
    // Warm both: one read each fetches their index and chunks.
    tiered.read(oldest.extent.base_offset + 1, 1).await.unwrap();
    tiered.read(newest.extent.base_offset + 1, 1).await.unwrap();
    let warm_bytes = tiered.cached_bytes();

    let removed = tiered.apply_remote_retention().await.unwrap();
    assert!(removed.contains(&oldest.extent.id));
    assert!(tiered.cached_bytes() < warm_bytes);
    let start = tiered.manifest().start_offset;
    // The dropped segment's kept index does not serve a read any more.
    assert!(matches!(
        tiered.read(oldest.extent.base_offset + 1, 1).await,
        Err(TieredError::Trimmed { requested, oldest }) if requested == before.segments[0].extent.base_offset + 1 && oldest == start
    ));
    // The segment the new manifest still lists keeps its index: no request.
    store.take_gets();
    let again = tiered.read(newest.extent.base_offset + 1, 1).await.unwrap();
    assert_eq!(again[0].offset, newest.extent.base_offset + 1);
    assert_eq!(&again[0].payload[..], &payload(again[0].offset)[..]);
    assert_eq!(store.take_gets(), Vec::<object_store::path::Path>::new());
}

#[tokio::test]
async fn read_remote_segment_with_damaged_index_walks_from_first_record_and_counts_it() {
    let store = Arc::new(CountingStore::new(stores::in_memory()));
    let (_dir, tiered) = open(Arc::clone(&store), 200).await;
    let manifest = tiered.manifest();
    let segment = *manifest
        .segments
        .iter()
        .find(|s| s.index_len > 0 && s.extent.next_offset - s.extent.base_offset > 4)
        .unwrap();
    // One bit of the index object flipped: the manifest's CRC no longer
    // matches it; the segment's `.log` is intact.
    let key = ShardKey::new("t", "n", "s", 0);
    let path = object_store::path::Path::from(format!(
        "felix/{}/{}",
        key.dir_name(),
        segment_object_name(segment.extent.id, segment.upload, FileKind::Index)
    ));
    let mut bytes = store
        .get(&path)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x10;
    store.put(&path, bytes.into()).await.unwrap();
    store.take_gets();
    assert_eq!(tiered.unusable_remote_indexes(), 0);

    // Every record of the segment, each read on its own, exactly.
    for offset in segment.extent.base_offset..segment.extent.next_offset {
        let read = tiered.read(offset, 1).await.unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].offset, offset);
        assert_eq!(&read[0].payload[..], &payload(offset)[..]);
        assert_eq!(read[0].timestamp_micros, 1_000 + offset);
    }
    // A read of many from the first offset: the whole segment, in order.
    let all = tiered
        .read(segment.extent.base_offset, 1 << 20)
        .await
        .unwrap();
    let offsets: Vec<u64> = all.iter().map(|r| r.offset).collect();
    assert_eq!(
        offsets,
        (segment.extent.base_offset..segment.extent.next_offset).collect::<Vec<_>>()
    );
    // Found unusable once, and not fetched again while the cache holds it.
    assert_eq!(tiered.unusable_remote_indexes(), 1);
    let gets = store.take_gets();
    assert_eq!(
        gets.iter().filter(|p| is_kind(p, FileKind::Index)).count(),
        1,
        "{gets:?}"
    );
}

#[tokio::test]
async fn read_remote_segment_with_missing_index_walks_from_first_record_and_counts_it() {
    let store = Arc::new(CountingStore::new(stores::in_memory()));
    let (_dir, tiered) = open(Arc::clone(&store), 200).await;
    let manifest = tiered.manifest();
    let segment = *manifest
        .segments
        .iter()
        .find(|s| s.index_len > 0 && s.extent.next_offset - s.extent.base_offset > 4)
        .unwrap();
    let key = ShardKey::new("t", "n", "s", 0);
    let path = object_store::path::Path::from(format!(
        "felix/{}/{}",
        key.dir_name(),
        segment_object_name(segment.extent.id, segment.upload, FileKind::Index)
    ));
    store.delete(&path).await.unwrap();

    let target = segment.extent.next_offset - 2;
    let read = tiered.read(target, 1).await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].offset, target);
    assert_eq!(&read[0].payload[..], &payload(target)[..]);
    assert_eq!(tiered.unusable_remote_indexes(), 1);
}
