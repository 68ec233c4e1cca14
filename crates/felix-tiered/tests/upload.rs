//! What an offload sends: a segment larger than a part goes up in parts,
//! each record checked before the part holding its last byte is sent, and
//! a rotted or cut local segment's upload is aborted: nothing completed,
//! listed or deleted.

mod common;

use std::sync::Arc;

use common::counting::{CountingStore, PartCounts};
use common::multipart::{PART, PAYLOAD, payload, shard, tier};

use futures::TryStreamExt;
use object_store::ObjectStore;

use felix_format::{CorruptionKind, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN, ShardKey};
use felix_tiered::{RemoteShard, TierConfig, TieredError, TieredShard, stores};

/// Where record `offset` of the first segment starts.
fn position(offset: u64) -> u64 {
    SEGMENT_HEADER_LEN as u64 + offset * (RECORD_HEADER_LEN + PAYLOAD) as u64
}

async fn objects(store: &Arc<dyn ObjectStore>) -> Vec<(String, u64)> {
    let mut all: Vec<(String, u64)> = store
        .list(None)
        .map_ok(|m| (m.location.to_string(), m.size))
        .try_collect()
        .await
        .unwrap();
    all.sort();
    all
}

/// Flips one bit of the payload of record `offset` of the first segment.
fn rot(dir: &std::path::Path, offset: u64) -> u64 {
    use std::os::unix::fs::FileExt;
    let log = dir.join(felix_format::file_name(0, felix_format::FileKind::Segment).as_str());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(log)
        .unwrap();
    let at = position(offset) + RECORD_HEADER_LEN as u64 + 10;
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ 0x08], at).unwrap();
    position(offset)
}

/// The offload failed on the rotted record at `position`, by its checksum.
fn assert_rot_refused<T: std::fmt::Debug>(offload: Result<T, TieredError>, position: u64) {
    let err = offload.unwrap_err();
    assert!(
        matches!(
            &err,
            TieredError::LocalCorrupt { position: p, kind: CorruptionKind::RecordChecksum { .. }, .. }
                if *p == position
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_segment_larger_than_a_part_goes_up_in_parts_and_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let shard = shard(dir.path(), 130);
    let first = shard.segments()[0];
    assert!(first.extent.len > 2 * PART);
    let parts = Arc::new(CountingStore::new(stores::in_memory()));
    let store: Arc<dyn ObjectStore> = parts.clone();
    let key = ShardKey::new("t", "n", "parts", 0);
    let tiered = TieredShard::open(Arc::clone(&shard), key.clone(), store.clone(), tier())
        .await
        .unwrap();
    let outcome = tiered.offload().await.unwrap();
    assert_eq!(outcome.uploaded, vec![first.extent.id]);
    // Only the `.log` is over a part: one multipart upload, in whole parts
    // and a last short one.
    assert_eq!(
        parts.parts(),
        PartCounts {
            started: 1,
            parts: first.extent.len.div_ceil(PART) as usize,
            completed: 1,
            aborted: 0,
        }
    );
    let listed = tiered.manifest().segments[0];
    assert_eq!(listed.extent, first.extent);
    // The CRCs summed part by part are the stored objects' own.
    let remote = RemoteShard::new(store.clone(), "felix", &key);
    let findings = remote.verify_segment(&listed).await;
    assert!(findings.is_empty(), "{findings:?}");
    let log = objects(&store)
        .await
        .into_iter()
        .find(|(name, _)| name.ends_with(".log"))
        .unwrap();
    assert_eq!(log.1, first.extent.len);
    let mut at = 0;
    while at < first.extent.next_offset {
        for r in tiered.read(at, 1 << 20).await.unwrap() {
            assert_eq!(r.offset, at);
            assert_eq!(&r.payload[..], &payload(at)[..], "offset {at}");
            at += 1;
        }
    }
}

#[tokio::test]
async fn rot_in_a_later_part_aborts_the_upload_and_keeps_the_segment_local() {
    let dir = tempfile::tempdir().unwrap();
    let shard = shard(dir.path(), 130);
    let first = shard.segments()[0];
    // A record wholly in the third part: the first two were sent already
    // when it is found.
    let offset = (2 * PART + 300_000) / (RECORD_HEADER_LEN + PAYLOAD) as u64;
    let position = rot(dir.path(), offset);
    assert!(position > 2 * PART && position < first.extent.len);
    let parts = Arc::new(CountingStore::new(stores::in_memory()));
    let store: Arc<dyn ObjectStore> = parts.clone();
    let key = ShardKey::new("t", "n", "rot", 0);
    let tiered = TieredShard::open(Arc::clone(&shard), key, store.clone(), tier())
        .await
        .unwrap();
    assert_rot_refused(tiered.offload().await, position);
    // Two parts went up before the third was read; the upload was aborted,
    // not completed. Nothing listed, nothing deleted.
    assert_eq!(
        parts.parts(),
        PartCounts {
            started: 1,
            parts: 2,
            completed: 0,
            aborted: 1,
        }
    );
    assert_eq!(tiered.remote_range(), 0..0);
    assert!(
        objects(&store).await.is_empty(),
        "{:?}",
        objects(&store).await
    );
    assert_eq!(shard.offsets().base, 0);
    assert_eq!(shard.segments()[0].extent, first.extent);
}

#[tokio::test]
async fn rot_in_a_segment_within_one_part_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let shard = shard(dir.path(), 130);
    let position = rot(dir.path(), 3);
    let store = stores::in_memory();
    let config = TierConfig {
        part_bytes: 16 << 20,
        ..tier()
    };
    let key = ShardKey::new("t", "n", "one-put", 0);
    let tiered = TieredShard::open(Arc::clone(&shard), key, store.clone(), config)
        .await
        .unwrap();
    assert_rot_refused(tiered.offload().await, position);
    assert!(objects(&store).await.is_empty());
    assert_eq!(shard.offsets().base, 0);
}

#[tokio::test]
async fn a_local_segment_cut_short_of_its_extent_is_not_offloaded() {
    let dir = tempfile::tempdir().unwrap();
    let shard = shard(dir.path(), 130);
    let first = shard.segments()[0];
    let log = dir
        .path()
        .join(felix_format::file_name(0, felix_format::FileKind::Segment).as_str());
    let cut = first.extent.len - 10;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(cut)
        .unwrap();
    let parts = Arc::new(CountingStore::new(stores::in_memory()));
    let store: Arc<dyn ObjectStore> = parts.clone();
    let key = ShardKey::new("t", "n", "cut", 0);
    let tiered = TieredShard::open(Arc::clone(&shard), key, store.clone(), tier())
        .await
        .unwrap();
    let err = tiered.offload().await.unwrap_err();
    // The last record lost its last 10 bytes: the walk, bounded by the
    // file, finds it torn where it starts.
    let last = position(first.extent.next_offset - 1);
    assert!(
        matches!(
            &err,
            TieredError::LocalCorrupt { position: p, kind: CorruptionKind::Truncated { needed, available }, .. }
                if *p == last && *needed == (RECORD_HEADER_LEN + PAYLOAD) as u64 && *available == *needed - 10
        ),
        "{err:?}"
    );
    assert_eq!(parts.parts().completed, 0);
    assert_eq!(parts.parts().aborted, 1);
    assert!(objects(&store).await.is_empty());
    assert_eq!(tiered.remote_range(), 0..0);
    assert_eq!(shard.offsets().base, 0);
}
