//! Crash safety against the object store: every put, truncated put, put
//! applied then reported failed (alone or followed by a retry), get, list
//! and delete of an offload and a remote retention pass fails in turn;
//! afterwards every record is still readable (locally, remotely or both),
//! a retry completes, and a sweep leaves only listed objects.

mod common;

use std::sync::Arc;

use felix_format::ShardKey;
use felix_tiered::{TierConfig, TierRetention, TieredShard, stores};
use futures::TryStreamExt;
use object_store::ObjectStore;

use common::faults::{FaultStore, Op};
use common::{fill, payload, small_shard};

const RECORDS: u64 = 120;

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

/// Every offset in `from..RECORDS` reads back with its own payload, once.
async fn all_readable(tiered: &TieredShard, from: u64) {
    let mut at = from;
    while at < RECORDS {
        let records = tiered.read(at, 500).await.unwrap();
        assert!(!records.is_empty(), "offset {at} unreadable");
        for r in records {
            assert_eq!((r.offset, &r.payload[..]), (at, &payload(at)[..]));
            at += 1;
        }
    }
}

async fn segment_objects(store: &Arc<dyn ObjectStore>) -> usize {
    store
        .list(None)
        .try_filter(|m| futures::future::ready(m.location.as_ref().contains("/segments/")))
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .len()
}

/// One run with the `nth` call of `op` failing; false once the run makes
/// fewer than `nth + 1` such calls (the sweep over `n` is complete).
async fn run(op: Op, nth: usize, with_remote_retention: bool) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let key = ShardKey::new("t", "n", "s", 0);
    let shard = small_shard(dir.path());
    fill(&shard, RECORDS / 2);
    let inner = stores::in_memory();
    let faulty = Arc::new(FaultStore::new(Arc::clone(&inner), op, nth));
    let mut cfg = config();
    if with_remote_retention {
        cfg.remote.max_bytes = Some(2500);
    }
    let faulty_dyn: Arc<dyn ObjectStore> = faulty.clone();
    // Opening may fail too (it lists and gets the manifest).
    if let Ok(tiered) =
        TieredShard::open(Arc::clone(&shard), key.clone(), faulty_dyn, cfg.clone()).await
    {
        let _ = tiered.offload().await;
        fill(&shard, RECORDS / 2);
        let _ = tiered.offload().await;
        if with_remote_retention {
            let _ = tiered.apply_remote_retention().await;
        }
    } else {
        fill(&shard, RECORDS / 2);
    }
    let fired = faulty.fired();
    // A fresh process over the healthy store.
    let tiered = TieredShard::open(Arc::clone(&shard), key, Arc::clone(&inner), cfg)
        .await
        .unwrap();
    let oldest = if with_remote_retention {
        let m = tiered.manifest();
        if m.segments.is_empty() {
            shard.offsets().base
        } else {
            m.start_offset
        }
    } else {
        0
    };
    all_readable(&tiered, oldest).await;
    tiered.sweep().await.unwrap();
    tiered.offload().await.unwrap();
    if with_remote_retention {
        tiered.apply_remote_retention().await.unwrap();
    }
    tiered.sweep().await.unwrap();
    let m = tiered.manifest();
    let oldest = if with_remote_retention {
        m.start_offset
    } else {
        0
    };
    if !with_remote_retention {
        assert_eq!(m.start_offset, 0, "{op:?} #{nth}");
    }
    all_readable(&tiered, oldest).await;
    assert_eq!(
        segment_objects(&inner).await,
        m.segments.len() * 3,
        "{op:?} #{nth}"
    );
    fired
}

async fn sweep_op(op: Op, with_remote_retention: bool) {
    let mut nth = 0;
    while run(op, nth, with_remote_retention).await {
        nth += 1;
    }
    assert!(nth > 0, "{op:?} never called");
}

#[tokio::test]
async fn every_failed_put_leaves_every_record_readable() {
    sweep_op(Op::Put, false).await;
    sweep_op(Op::Put, true).await;
}

#[tokio::test]
async fn every_truncated_put_leaves_every_record_readable() {
    sweep_op(Op::TruncatedPut, false).await;
    sweep_op(Op::TruncatedPut, true).await;
}

#[tokio::test]
async fn every_put_applied_then_failed_leaves_every_record_readable() {
    sweep_op(Op::AppliedPut, false).await;
    sweep_op(Op::AppliedPut, true).await;
}

#[tokio::test]
async fn every_put_applied_then_retried_leaves_every_record_readable() {
    sweep_op(Op::RetriedPut, false).await;
    sweep_op(Op::RetriedPut, true).await;
}

#[tokio::test]
async fn every_failed_get_leaves_every_record_readable() {
    sweep_op(Op::Get, false).await;
    sweep_op(Op::Get, true).await;
}

#[tokio::test]
async fn every_failed_list_leaves_every_record_readable() {
    sweep_op(Op::List, false).await;
    sweep_op(Op::List, true).await;
}

#[tokio::test]
async fn every_failed_delete_leaves_every_record_readable() {
    sweep_op(Op::Delete, true).await;
}
