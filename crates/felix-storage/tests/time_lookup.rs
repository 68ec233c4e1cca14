//! `Shard::offset_for_timestamp` answers as Kafka's ListOffsets does (the
//! earliest offset whose own timestamp reaches the bound) under random,
//! non-ascending timestamps, rolls, retention, deletions and reopens, and
//! whatever state the time index files are in.

mod common;

use std::path::Path;

use common::{config, open};
use felix_format::{FileKind, file_name};
use felix_storage::{
    Durability, Preallocation, ReadBound, Record, Retention, Shard, StorageError, StoreConfig,
};
use proptest::prelude::*;

/// The model's answer: the first record at or above `base` whose timestamp
/// is at least `t`, as `(offset, timestamp)`.
fn model_answer(base: u64, timestamps: &[u64], t: u64) -> Option<(u64, u64)> {
    timestamps
        .iter()
        .enumerate()
        .find(|&(_, &ts)| ts >= t)
        .map(|(i, &ts)| (base + i as u64, ts))
}

fn lookup(shard: &Shard, t: u64) -> Option<(u64, u64)> {
    shard
        .offset_for_timestamp(t, ReadBound::Committed)
        .unwrap()
        .map(|hit| (hit.offset, hit.timestamp_micros))
}

/// Every record's timestamp from `from`, read back.
fn timestamps(shard: &Shard, from: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut next = from;
    while next < shard.offsets().written {
        for r in shard.read(next, 1 << 20, ReadBound::Committed).unwrap() {
            assert_eq!(r.offset, next);
            out.push(r.timestamp_micros);
            next += 1;
        }
    }
    out
}

/// Checks every interesting bound: each timestamp present, one either side,
/// and the extremes.
fn check_against_model(shard: &Shard, base: u64, model: &[u64]) {
    let mut bounds = vec![0, 1, u64::MAX];
    for &ts in model {
        bounds.extend([ts.saturating_sub(1), ts, ts.saturating_add(1)]);
    }
    for t in bounds {
        assert_eq!(lookup(shard, t), model_answer(base, model, t), "t = {t}");
        // From a later offset: the model's answer over the records from
        // there (a replicated shard's start above the shard's own).
        for skip in [
            1,
            model.len() / 2,
            model.len().saturating_sub(1),
            model.len(),
        ] {
            let from = base + skip as u64;
            let expected = model_answer(from, model.get(skip..).unwrap_or_default(), t);
            let found = shard
                .offset_for_timestamp_from(t, from, ReadBound::Committed)
                .unwrap()
                .map(|hit| (hit.offset, hit.timestamp_micros));
            assert_eq!(found, expected, "t = {t}, from {from}");
        }
    }
}

fn small_config() -> StoreConfig {
    StoreConfig {
        segment_size_bytes: 600,
        index_spacing_bytes: 96,
        preallocate: Preallocation::Off,
        durability: Durability::None,
        ..StoreConfig::default()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<u16>),
    Retention { max_bytes: u16 },
    DeleteBefore(prop::sample::Index),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => proptest::collection::vec(0u16..400, 1..8).prop_map(Op::Append),
        1 => (1u16..3000).prop_map(|max_bytes| Op::Retention { max_bytes }),
        1 => any::<prop::sample::Index>().prop_map(Op::DeleteBefore),
        2 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn offset_for_timestamp_matches_a_model_with_non_ascending_timestamps(
        ops in proptest::collection::vec(op(), 1..30),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut shard = open(dir.path(), small_config());
        let mut base = 0u64;
        let mut model: Vec<u64> = Vec::new();
        for op in ops {
            match op {
                Op::Append(stamps) => {
                    let records: Vec<_> = stamps
                        .iter()
                        .map(|&ts| Record::new(u64::from(ts), vec![b'x'; 40]))
                        .collect();
                    shard.append(&records).wait().unwrap();
                    model.extend(stamps.iter().map(|&ts| u64::from(ts)));
                }
                Op::Retention { max_bytes } => {
                    let config = StoreConfig {
                        retention: Retention { max_bytes: Some(u64::from(max_bytes)), ..Retention::default() },
                        ..small_config()
                    };
                    drop(shard);
                    shard = open(dir.path(), config);
                    shard.apply_retention().unwrap();
                    let new_base = shard.offsets().base;
                    model.drain(..(new_base - base) as usize);
                    base = new_base;
                }
                Op::DeleteBefore(at) => {
                    let offset = base + at.index(model.len() + 1) as u64;
                    prop_assert_eq!(shard.delete_records_before(offset).unwrap(), offset.max(base));
                    model.drain(..(offset - base) as usize);
                    base = offset;
                }
                Op::Reopen => {
                    drop(shard);
                    shard = open(dir.path(), small_config());
                }
            }
            prop_assert_eq!(shard.offsets().base, base);
            check_against_model(&shard, base, &model);
            let max = |from: u64, to: u64| {
                (from.max(base)..to)
                    .map(|o| model[(o - base) as usize])
                    .max()
            };
            for info in shard.segments() {
                // A segment's maximum covers all its records, deleted ones
                // included: check it only where none is deleted.
                if info.extent.base_offset >= base {
                    prop_assert_eq!(
                        info.max_timestamp_micros,
                        max(info.extent.base_offset, info.extent.next_offset),
                        "{:?}", info.extent
                    );
                }
            }
        }
    }
}

#[test]
fn offset_for_timestamp_is_never_after_a_record_that_reaches_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), small_config());
    // A late producer clock: 500 at offset 3, then earlier stamps again.
    let stamps = [100, 200, 300, 500, 250, 260, 600, 100];
    let records: Vec<_> = stamps.iter().map(|&ts| Record::new(ts, "r")).collect();
    shard.append(&records).wait().unwrap();
    assert_eq!(lookup(&shard, 250), Some((2, 300)));
    // Not offset 5 (260): offset 2 already reaches it.
    assert_eq!(lookup(&shard, 260), Some((2, 300)));
    assert_eq!(lookup(&shard, 301), Some((3, 500)));
    assert_eq!(lookup(&shard, 501), Some((6, 600)));
    assert_eq!(lookup(&shard, 600), Some((6, 600)));
    assert_eq!(lookup(&shard, 601), None);
    assert_eq!(lookup(&shard, 0), Some((0, 100)));
    let newest = shard.newest_timestamp().unwrap().unwrap();
    assert_eq!((newest.offset, newest.timestamp_micros), (7, 100));
}

#[test]
fn offset_for_timestamp_is_bounded_by_the_read_bound() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(4096, Durability::OnCommit));
    shard.append(&[Record::new(10, "a")]).wait().unwrap();
    shard.append(&[Record::new(20, "b")]).written().unwrap();
    // Written, maybe not durable: a committed lookup sees offset 1 only
    // once it is readable.
    let written = shard
        .offset_for_timestamp(20, ReadBound::Written)
        .unwrap()
        .unwrap();
    assert_eq!(written.offset, 1);
    shard.wait_durable(2).wait().unwrap();
    assert_eq!(lookup(&shard, 20), Some((1, 20)));
    assert_eq!(lookup(&shard, 21), None);
}

#[test]
fn offset_for_timestamp_below_the_log_start_answers_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), small_config());
    let records: Vec<_> = (0..30u64).map(|i| Record::new(i * 10, "r")).collect();
    shard.append(&records).wait().unwrap();
    shard.delete_records_before(12).unwrap();
    assert_eq!(lookup(&shard, 0), Some((12, 120)));
    assert_eq!(lookup(&shard, 125), Some((13, 130)));
    shard.delete_records_before(30).unwrap();
    assert_eq!(lookup(&shard, 0), None);
    assert_eq!(shard.newest_timestamp().unwrap(), None);
}

#[test]
fn offset_for_timestamp_from_an_offset_answers_from_there_and_never_below_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), small_config());
    // Ten records stamped 100, 200, … 1,000, then one stamped 50: a
    // clock that went back.
    let mut records: Vec<_> = (0..10u64)
        .map(|i| Record::new((i + 1) * 100, "r"))
        .collect();
    records.push(Record::new(50, "late"));
    shard.append(&records).wait().unwrap();
    let from = |t, from, bound| {
        shard
            .offset_for_timestamp_from(t, from, bound)
            .unwrap()
            .map(|hit| hit.offset)
    };
    assert_eq!(from(100, 0, ReadBound::Committed), Some(0));
    assert_eq!(from(100, 4, ReadBound::Committed), Some(4));
    assert_eq!(from(750, 4, ReadBound::Committed), Some(7));
    // Only offset 9 reaches 1,000; from 10 on, the late record does not.
    assert_eq!(from(1_000, 10, ReadBound::Committed), None);
    // Bounded above as a read is, and nothing from past the end.
    assert_eq!(from(900, 4, ReadBound::Below(6)), None);
    assert_eq!(from(100, 4, ReadBound::Below(6)), Some(4));
    assert_eq!(from(0, 11, ReadBound::Committed), None);
    // The shard's own start still holds below a lower `from`.
    shard.delete_records_before(6).unwrap();
    assert_eq!(from(100, 2, ReadBound::Committed), Some(6));
}

fn time_index_path(dir: &Path, id: u64) -> std::path::PathBuf {
    dir.join(file_name(id, FileKind::TimeIndex).as_str())
}

/// A shard of several sealed segments with non-ascending timestamps,
/// closed cleanly; returns the timestamps.
fn sealed_shard(dir: &Path) -> Vec<u64> {
    let shard = open(dir, small_config());
    let stamps: Vec<u64> = (0..60u64).map(|i| (i * 37) % 101 + i * 3).collect();
    for chunk in stamps.chunks(4) {
        let records: Vec<_> = chunk
            .iter()
            .map(|&ts| Record::new(ts, vec![0u8; 40]))
            .collect();
        shard.append(&records).wait().unwrap();
    }
    assert!(shard.segments().len() > 3);
    stamps
}

#[test]
fn offset_for_timestamp_sealing_writes_a_time_index_per_segment() {
    let dir = tempfile::tempdir().unwrap();
    let stamps = sealed_shard(dir.path());
    let shard = open(dir.path(), small_config());
    for info in shard.segments().iter().filter(|s| !s.active) {
        assert!(
            time_index_path(dir.path(), info.extent.id).exists(),
            "{info:?}"
        );
    }
    check_against_model(&shard, 0, &stamps);
}

#[test]
fn offset_for_timestamp_missing_garbage_or_wrong_time_index_is_rebuilt() {
    for damage in ["missing", "garbage", "short", "wrong"] {
        let dir = tempfile::tempdir().unwrap();
        let stamps = sealed_shard(dir.path());
        // No clean close: the files are checked against the records.
        std::fs::remove_file(dir.path().join(felix_format::CLEAN_SHUTDOWN_FILE_NAME)).ok();
        let victim = time_index_path(dir.path(), 1);
        let good = std::fs::read(&victim).unwrap();
        match damage {
            "missing" => std::fs::remove_file(&victim).unwrap(),
            "garbage" => std::fs::write(&victim, b"not a time index at all").unwrap(),
            "short" => std::fs::write(&victim, &good[..good.len() - 3]).unwrap(),
            _ => {
                // Valid bytes that claim a larger maximum than the records
                // hold: segment 0's file, which names another extent, is
                // not what is wanted; build a sound file with a bad claim.
                use felix_format::time_index::{decode_time_index, encode_time_index};
                let view = decode_time_index(&good).unwrap();
                let mut entries: Vec<_> = view.iter().collect();
                let last = entries.last_mut().unwrap();
                last.timestamp_micros += 1_000;
                let mut bytes = Vec::new();
                encode_time_index(&view.header, &entries, &mut bytes).unwrap();
                std::fs::write(&victim, bytes).unwrap();
            }
        }
        let shard = open(dir.path(), small_config());
        check_against_model(&shard, 0, &stamps);
        assert_eq!(std::fs::read(&victim).unwrap(), good, "{damage}: rewritten");
    }
}

#[test]
fn offset_for_timestamp_interop_corpus_without_time_indexes_answers_correctly() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop/clean-4seg");
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&corpus).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    let shard = open(
        dir.path(),
        StoreConfig {
            segment_size_bytes: 64 * 1024,
            index_spacing_bytes: 4096,
            ..small_config()
        },
    );
    let stamps = timestamps(&shard, 0);
    assert_eq!(stamps.len(), 2000);
    check_against_model(&shard, 0, &stamps);
}

#[test]
fn retention_max_age_keeps_a_segment_whose_largest_timestamp_is_recent() {
    let dir = tempfile::tempdir().unwrap();
    let retention = Retention {
        max_age: Some(std::time::Duration::from_secs(100)),
        ..Retention::default()
    };
    {
        let shard = open(dir.path(), small_config());
        // Segment 0: a recent record followed by old ones (its last record
        // is old, its maximum recent). Segment 1: old only.
        let first: Vec<_> = [1_000_000_000u64, 5, 6, 7, 8, 9, 10, 11]
            .iter()
            .map(|&ts| Record::new(ts, vec![0u8; 40]))
            .collect();
        shard.append(&first).wait().unwrap();
        for i in 0..16u64 {
            shard
                .append(&[Record::new(i, vec![0u8; 40])])
                .wait()
                .unwrap();
        }
        assert!(shard.segments().len() >= 3);
    }
    let clock = std::sync::Arc::new(common::ManualClock::default());
    let shard = Shard::options(dir.path())
        .config(StoreConfig {
            retention,
            ..small_config()
        })
        .clock(clock.clone())
        .open()
        .unwrap();
    clock.set(std::time::Duration::from_micros(1_000_000_000) + std::time::Duration::from_secs(50));
    let outcome = shard.apply_retention().unwrap();
    // The first segment's maximum is within the age: it stays, and so do
    // the ones after it (retention deletes from the head only).
    assert!(outcome.deleted_segments.is_empty(), "{outcome:?}");
    assert_eq!(shard.offsets().base, 0);
    let err = shard.delete_records_before(u64::MAX).unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::DeletePastEnd {
                requested: u64::MAX,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn offset_for_timestamp_after_a_sealed_segment_is_replaced_answers_from_the_copy() {
    let dir = tempfile::tempdir().unwrap();
    let stamps = sealed_shard(dir.path());
    let shard = open(dir.path(), small_config());
    let segment = shard.segments()[1].extent;
    let good = std::fs::read(
        dir.path()
            .join(file_name(segment.id, FileKind::Segment).as_str()),
    )
    .unwrap();
    // Loaded before the replacement, so a stale cached index would show.
    check_against_model(&shard, 0, &stamps);
    shard
        .replace_sealed_segment(
            segment.id,
            &felix_storage::SegmentCopy::Bytes(bytes::Bytes::from(good)),
        )
        .unwrap();
    // The old file described the damaged segment: it went before the copy
    // took the name, and the copy's is built from its records.
    check_against_model(&shard, 0, &stamps);
    drop(shard);
    let shard = open(dir.path(), small_config());
    check_against_model(&shard, 0, &stamps);
    assert!(time_index_path(dir.path(), segment.id).exists());
}
