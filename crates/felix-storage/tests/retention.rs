//! Retention deletes whole sealed segments from the head, never the active one.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{ManualClock, config, open, read_all, segment_files};
use felix_storage::{Durability, ReadBound, Record, Retention, Shard, StorageError, StoreConfig};

fn shard_config(retention: Retention) -> StoreConfig {
    StoreConfig {
        retention,
        ..config(600, Durability::OnCommit)
    }
}

#[test]
fn retention_by_bytes_deletes_oldest_sealed_segments_only() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(
        dir.path(),
        shard_config(Retention {
            max_bytes: Some(1500),
            ..Retention::default()
        }),
    );
    for i in 0..40 {
        shard
            .append(&[Record::new(i, vec![7u8; 40])])
            .wait()
            .unwrap();
    }
    let before = segment_files(dir.path());
    shard.begin_generation(1).unwrap();
    let outcome = shard.apply_retention().unwrap();
    let after = segment_files(dir.path());
    // Five segments of eight 68-byte records (576 bytes each): three go
    // before the shard is at or below 1,500 bytes.
    assert_eq!(before.len(), 5);
    assert_eq!(outcome.deleted_segments, [0, 1, 2]);
    assert_eq!(after.len(), 2);
    let total: u64 = after
        .iter()
        .map(|n| std::fs::metadata(dir.path().join(n)).unwrap().len())
        .sum();
    assert!(total <= 1500, "{total} bytes left");
    assert_eq!(outcome.base_offset, shard.offsets().base);
    let err = shard.read(0, 10, ReadBound::Committed).unwrap_err();
    assert!(
        matches!(err, StorageError::Trimmed { requested: 0, oldest, .. } if oldest == outcome.base_offset),
        "{err:?}"
    );
    assert_eq!(
        read_all(&shard, outcome.base_offset).len() as u64,
        40 - outcome.base_offset
    );
    assert_eq!(
        shard.stats().segments_deleted,
        outcome.deleted_segments.len() as u64
    );
    // The generation that began at the log end still covers it.
    assert_eq!(shard.generation_at(40), Some(1));
}

#[test]
fn retention_never_deletes_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(
        dir.path(),
        shard_config(Retention {
            max_bytes: Some(1),
            ..Retention::default()
        }),
    );
    for i in 0..20 {
        shard
            .append(&[Record::new(i, vec![1u8; 40])])
            .wait()
            .unwrap();
    }
    shard.apply_retention().unwrap();
    assert_eq!(segment_files(dir.path()).len(), 1);
    assert_eq!(shard.segments().len(), 1);
    // The active segment holds what the last roll left: 20 records of 68
    // bytes, eight to a segment.
    assert_eq!(shard.offsets().base, 16);
    assert_eq!(read_all(&shard, 16).len(), 4);
}

#[test]
fn retention_by_age_uses_each_segments_newest_timestamp_even_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let retention = Retention {
        max_age: Some(Duration::from_secs(100)),
        ..Retention::default()
    };
    {
        let shard = open(dir.path(), shard_config(retention));
        // Timestamps in seconds-as-micros: old records, then new ones.
        for i in 0..16u64 {
            shard
                .append(&[Record::new(i * 1_000_000, vec![0u8; 40])])
                .wait()
                .unwrap();
        }
        for i in 0..16u64 {
            shard
                .append(&[Record::new(1_000_000_000 + i, vec![0u8; 40])])
                .wait()
                .unwrap();
        }
    }
    let clock = Arc::new(ManualClock::default());
    let shard = Shard::options(dir.path())
        .config(shard_config(retention))
        .clock(clock.clone())
        .open()
        .unwrap();
    clock.set(Duration::from_micros(1_000_000_000) + Duration::from_secs(50));
    let outcome = shard.apply_retention().unwrap();
    // Segments whose newest record is older than now - 100 s hold only the
    // old records (offsets 0..16), 8 records per segment.
    assert_eq!(outcome.deleted_segments, [0, 1]);
    assert_eq!(outcome.base_offset, 16);
}
