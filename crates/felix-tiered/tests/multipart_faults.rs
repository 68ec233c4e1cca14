//! Faults in a multipart upload: a segment larger than a part (5 MiB, the
//! smallest S3 allows) goes up in parts, and each part, the completion,
//! and a completion the store applied but reported failed fail in turn.
//! Nothing local is deleted while the remote copy is not listed in a
//! durable manifest; the next offload pass succeeds, every record reads
//! back once, and a sweep leaves only listed objects.

mod common;

use std::sync::Arc;

use futures::TryStreamExt;
use object_store::ObjectStore;

use felix_format::{FileKind, ShardKey, file_name};
use felix_tiered::{TieredError, TieredShard, stores};

use common::faults::{FaultStore, Op};
use common::multipart::{PART, payload, shard, tier};

/// Records written: the first segment (12 MB, three parts) sealed.
const RECORDS: u64 = 130;

async fn object_names(store: &Arc<dyn ObjectStore>) -> Vec<String> {
    let mut all: Vec<String> = store
        .list(None)
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    all.sort();
    all
}

/// Every record reads back through `tiered`, once, in order.
async fn all_readable(tiered: &TieredShard, end: u64) {
    let mut at = 0;
    while at < end {
        let records = tiered.read(at, 1 << 20).await.unwrap();
        assert!(!records.is_empty(), "offset {at} unreadable");
        for r in records {
            assert_eq!(r.offset, at);
            assert_eq!(&r.payload[..], &payload(at)[..], "offset {at}");
            at += 1;
        }
    }
}

/// One run with the `nth` call of `op` failing in the first offload pass;
/// false when the pass makes fewer than `nth + 1` such calls.
async fn run(op: Op, nth: usize) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let shard = shard(dir.path(), RECORDS);
    let first = shard.segments()[0];
    assert!(first.extent.len > 2 * PART);
    let inner = stores::in_memory();
    let faulty = Arc::new(FaultStore::new(Arc::clone(&inner), op, nth));
    let store: Arc<dyn ObjectStore> = faulty.clone();
    let key = ShardKey::new("t", "n", "multipart", 0);
    let tiered = TieredShard::open(Arc::clone(&shard), key, store, tier())
        .await
        .unwrap();
    let first_pass = tiered.offload().await;
    if !faulty.fired() {
        assert_eq!(first_pass.unwrap().uploaded, vec![first.extent.id]);
        return false;
    }
    // The `.log`, the only object over a part, failed: nothing listed,
    // nothing deleted locally.
    let err = first_pass.unwrap_err();
    assert!(
        matches!(&err, TieredError::Store { operation: "put", object, .. }
            if object.as_ref().ends_with(".log")),
        "{op:?} #{nth}: {err:?}"
    );
    assert_eq!(tiered.remote_range(), 0..0, "{op:?} #{nth}");
    assert!(
        !object_names(&inner)
            .await
            .iter()
            .any(|n| n.contains("/manifest/")),
        "{op:?} #{nth}"
    );
    assert_eq!(shard.offsets().base, 0, "{op:?} #{nth}");
    assert_eq!(shard.segments()[0].extent, first.extent, "{op:?} #{nth}");
    for kind in [FileKind::Segment, FileKind::Index, FileKind::TimeIndex] {
        let local = dir.path().join(file_name(first.extent.id, kind).as_str());
        assert!(local.exists(), "{op:?} #{nth}: {local:?} deleted");
    }
    // A completion the store applied leaves the one object no manifest
    // lists; a refused part or completion leaves nothing.
    let orphans = usize::from(op == Op::AppliedComplete);
    assert_eq!(object_names(&inner).await.len(), orphans, "{op:?} #{nth}");

    // The next pass (the fault has fired) offloads it.
    let outcome = tiered.offload().await.unwrap();
    assert_eq!(outcome.uploaded, vec![first.extent.id], "{op:?} #{nth}");
    assert_eq!(shard.offsets().base, first.extent.next_offset);
    assert!(
        !dir.path()
            .join(file_name(first.extent.id, FileKind::Segment).as_str())
            .exists()
    );
    all_readable(&tiered, shard.offsets().written).await;
    assert_eq!(tiered.sweep().await.unwrap(), orphans, "{op:?} #{nth}");
    // Three objects of the segment and one manifest.
    assert_eq!(object_names(&inner).await.len(), 4, "{op:?} #{nth}");
    all_readable(&tiered, shard.offsets().written).await;
    true
}

/// Runs `op` failing at every call it can; the number of calls faulted.
async fn sweep_op(op: Op) -> usize {
    let mut nth = 0;
    while run(op, nth).await {
        nth += 1;
    }
    nth
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offload_every_failed_part_keeps_the_segment_local_until_a_retry() {
    // 12 MB in 5 MiB parts: three parts, each failed once.
    let expected = (12_u64 << 20).div_ceil(PART) as usize;
    assert_eq!(sweep_op(Op::Part).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offload_failed_completion_keeps_the_segment_local_until_a_retry() {
    assert_eq!(sweep_op(Op::Complete).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offload_completion_applied_then_failed_keeps_the_segment_local_until_a_retry() {
    assert_eq!(sweep_op(Op::AppliedComplete).await, 1);
}
