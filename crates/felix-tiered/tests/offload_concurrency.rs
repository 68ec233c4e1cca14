//! An offload uploads several segments at once, never more than
//! `TierConfig::offload_concurrency`, and still lists them in offset order
//! in one manifest written after all of them.

mod common;

use std::sync::Arc;
use std::time::Duration;

use felix_format::ShardKey;
use felix_tiered::{TierConfig, TierConfigError, TierRetention, TieredShard, stores};

use common::counting::CountingStore;
use common::{fill, payload, small_shard};

fn config(offload_concurrency: usize) -> TierConfig {
    TierConfig {
        local: TierRetention {
            max_bytes: Some(1500),
            max_age: None,
        },
        chunk_bytes: 4096,
        cache_bytes: 64 << 10,
        offload_concurrency,
        ..TierConfig::default()
    }
}

/// Offloads a shard of ~1 KiB segments through a store that holds each
/// put for 20 ms, checks that every segment the pass uploaded is listed,
/// in order, in its one manifest, and returns the most puts in flight at
/// once and the tier.
async fn offload_with(offload_concurrency: usize) -> (usize, tempfile::TempDir, TieredShard) {
    let dir = tempfile::tempdir().unwrap();
    let shard = small_shard(dir.path());
    fill(&shard, 200);
    let sealed: Vec<u64> = shard
        .segments()
        .iter()
        .filter(|s| !s.active)
        .map(|s| s.extent.id)
        .collect();
    let store =
        Arc::new(CountingStore::new(stores::in_memory()).with_put_delay(Duration::from_millis(20)));
    let tiered = TieredShard::open(
        Arc::clone(&shard),
        ShardKey::new("t", "n", "s", 0),
        Arc::clone(&store) as _,
        config(offload_concurrency),
    )
    .await
    .unwrap();
    let outcome = tiered.offload().await.unwrap();
    let uploaded = outcome.uploaded;
    assert!(
        uploaded.len() >= 8,
        "too few segments to overlap: {uploaded:?}"
    );
    assert_eq!(uploaded[..], sealed[..uploaded.len()]);
    let manifest = tiered.manifest();
    assert_eq!(manifest.seq, 1);
    let listed: Vec<u64> = manifest.segments.iter().map(|s| s.extent.id).collect();
    assert_eq!(listed, uploaded);
    for pair in manifest.segments.windows(2) {
        assert_eq!(pair[0].extent.next_offset, pair[1].extent.base_offset);
    }
    assert_eq!(tiered.remote_range().end, shard.offsets().base);
    (store.most_puts_in_flight(), dir, tiered)
}

#[tokio::test]
async fn offload_many_segments_puts_several_at_once_within_the_bound() {
    let (most, _dir, tiered) = offload_with(3).await;
    // Each segment's three files go one after another, so three segments
    // at once are exactly three puts at once.
    assert_eq!(most, 3);
    let end = tiered.remote_range().end;
    let mut at = 0;
    while at < end {
        for r in tiered.read(at, 1 << 20).await.unwrap() {
            assert_eq!(r.offset, at);
            assert_eq!(&r.payload[..], &payload(at)[..]);
            at += 1;
        }
    }
}

#[tokio::test]
async fn offload_with_concurrency_one_puts_one_at_a_time() {
    let (most, ..) = offload_with(1).await;
    assert_eq!(most, 1);
}

#[test]
fn validate_offload_concurrency_outside_its_range_is_refused() {
    for value in [0usize, 65] {
        assert_eq!(
            config(value).validate(),
            Err(TierConfigError::Range {
                field: "offload_concurrency",
                value: value as u64,
                min: 1,
                max: 64,
            })
        );
    }
    assert_eq!(config(64).validate(), Ok(()));
    assert_eq!(TierConfig::default().offload_concurrency, 4);
}
