//! Replacing a damaged sealed segment with a verified copy: the copy is
//! checked in full before anything changes, readers see the old segment or
//! the new one whole, and the shard reopens with the copy.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use felix_format::{
    CorruptionKind, FileKind, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN, ShardFileName, file_name,
};
use felix_storage::{
    CopyProblem, Durability, ReadBound, Record, SegmentCopy, Shard, StorageError, StoreConfig,
};

const PAYLOAD: usize = 12;
const PER_SEGMENT: u64 = 8;
const RECORD: u64 = (RECORD_HEADER_LEN + PAYLOAD) as u64;

fn config() -> StoreConfig {
    StoreConfig {
        segment_size_bytes: SEGMENT_HEADER_LEN as u64 + PER_SEGMENT * RECORD,
        durability: Durability::None,
        ..StoreConfig::default()
    }
}

fn payload(offset: u64) -> Vec<u8> {
    format!("record-{offset:05}").into_bytes()
}

fn shard(dir: &Path) -> Shard {
    let shard = Shard::options(dir)
        .config(config())
        .label("orders-0")
        .open()
        .unwrap();
    for offset in 0..3 * PER_SEGMENT + 2 {
        shard
            .append(&[Record::new(1_000 + offset, payload(offset))])
            .wait()
            .unwrap();
    }
    shard
}

fn segment_path(dir: &Path, id: u64) -> std::path::PathBuf {
    dir.join(file_name(id, FileKind::Segment).as_str())
}

/// Rots a payload byte of record `record` of segment `id`, returning the
/// segment's bytes from before.
fn rot(dir: &Path, id: u64, record: u64) -> Vec<u8> {
    let path = segment_path(dir, id);
    let good = std::fs::read(&path).unwrap();
    let mut bad = good.clone();
    bad[(SEGMENT_HEADER_LEN as u64 + record * RECORD + 30) as usize] ^= 0x10;
    std::fs::write(&path, bad).unwrap();
    good
}

fn read_all(shard: &Shard) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut next = shard.offsets().base;
    while next < shard.offsets().written {
        let batch = shard.read(next, 1 << 20, ReadBound::Committed).unwrap();
        next = batch.last().unwrap().offset + 1;
        out.extend(batch.into_iter().map(|r| (r.offset, r.payload.to_vec())));
    }
    out
}

fn expected() -> Vec<(u64, Vec<u8>)> {
    (0..3 * PER_SEGMENT + 2).map(|o| (o, payload(o))).collect()
}

#[test]
fn replace_sealed_segment_with_a_verified_copy_heals_reads_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let shard = shard(dir.path());
    let segment = shard.segments()[1].extent;
    let good = rot(dir.path(), segment.id, 3);
    let rotted = segment.base_offset + 3;
    assert!(matches!(
        shard.read(rotted, 1, ReadBound::Committed),
        Err(StorageError::Segment { .. })
    ));
    assert_eq!(shard.scrub().unwrap().damage().count(), 1);

    let extent = shard
        .replace_sealed_segment(segment.id, &SegmentCopy::Bytes(Bytes::from(good.clone())))
        .unwrap();
    assert_eq!(extent, segment);
    assert_eq!(
        std::fs::read(segment_path(dir.path(), segment.id)).unwrap(),
        good
    );
    assert_eq!(read_all(&shard), expected());
    assert!(shard.scrub().unwrap().is_clean());
    let copy = ShardFileName::SegmentCopy(segment.id).file_name().unwrap();
    assert!(!dir.path().join(copy.as_str()).exists());
    shard.close().unwrap();

    let reopened = Shard::options(dir.path()).config(config()).open().unwrap();
    assert_eq!(read_all(&reopened), expected());
    assert!(reopened.scrub().unwrap().is_clean());
}

#[test]
fn replace_sealed_segment_from_a_file_leaves_the_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let shard = shard(dir.path());
    let segment = shard.segments()[0].extent;
    let good = rot(dir.path(), segment.id, 0);
    let elsewhere = tempfile::tempdir().unwrap();
    let fetched = elsewhere.path().join("from-replica.log");
    std::fs::write(&fetched, &good).unwrap();
    shard
        .replace_sealed_segment(segment.id, &SegmentCopy::File(fetched.clone()))
        .unwrap();
    assert_eq!(std::fs::read(&fetched).unwrap(), good);
    assert_eq!(read_all(&shard), expected());
}

/// Each way a copy can be wrong is refused with what is wrong, the segment
/// left exactly as it was and no temporary left behind.
#[test]
fn replace_sealed_segment_refuses_a_copy_that_does_not_verify() {
    let dir = tempfile::tempdir().unwrap();
    let shard = shard(dir.path());
    let segments = shard.segments();
    let target = segments[1].extent;
    let good = rot(dir.path(), target.id, 3);
    let damaged_now = std::fs::read(segment_path(dir.path(), target.id)).unwrap();
    let other = std::fs::read(segment_path(dir.path(), segments[0].extent.id)).unwrap();
    let mut rotted_copy = good.clone();
    let rot_at = SEGMENT_HEADER_LEN as u64 + 5 * RECORD;
    rotted_copy[(rot_at + 29) as usize] ^= 1;
    let mut bad_header = good.clone();
    bad_header[0] ^= 1;
    let short = good[..good.len() - RECORD as usize].to_vec();
    let torn = good[..good.len() - 3].to_vec();

    let cases: Vec<(&str, Vec<u8>, CopyProblem)> = vec![
        (
            "another segment",
            other,
            CopyProblem::BaseOffset {
                expected: target.base_offset,
                found: segments[0].extent.base_offset,
            },
        ),
        (
            "a rotted record",
            rotted_copy,
            CopyProblem::Damaged {
                kind: CorruptionKind::RecordChecksum {
                    expected: 0,
                    found: 0,
                },
                position: rot_at,
            },
        ),
        (
            "a damaged header",
            bad_header,
            CopyProblem::Header {
                kind: CorruptionKind::SegmentMagic { found: 0 },
            },
        ),
        (
            "a record short",
            short,
            CopyProblem::NextOffset {
                expected: target.next_offset,
                found: target.next_offset - 1,
            },
        ),
        (
            "a torn last record",
            torn,
            CopyProblem::Damaged {
                kind: CorruptionKind::Truncated {
                    needed: RECORD,
                    available: RECORD - 3,
                },
                position: target.len - RECORD,
            },
        ),
    ];
    for (what, copy, want) in cases {
        let err = shard
            .replace_sealed_segment(target.id, &SegmentCopy::Bytes(Bytes::from(copy)))
            .unwrap_err();
        let StorageError::CopyRejected {
            segment, problem, ..
        } = &err
        else {
            panic!("{what}: {err:?}");
        };
        assert_eq!(*segment, target.id, "{what}");
        // Checksums carry computed values: compare the kind's variant and
        // the rest exactly.
        match (problem, &want) {
            (
                CopyProblem::Damaged { kind, position },
                CopyProblem::Damaged {
                    kind: want_kind,
                    position: want_position,
                },
            ) => {
                assert_eq!(position, want_position, "{what}");
                assert_eq!(
                    std::mem::discriminant(kind),
                    std::mem::discriminant(want_kind),
                    "{what}: {kind:?}"
                );
                if let CorruptionKind::Truncated { .. } = want_kind {
                    assert_eq!(kind, want_kind, "{what}");
                }
            }
            (CopyProblem::Header { kind }, CopyProblem::Header { .. }) => {
                assert!(
                    matches!(kind, CorruptionKind::SegmentMagic { .. }),
                    "{what}"
                );
            }
            (got, want) => assert_eq!(got, want, "{what}"),
        }
        assert_eq!(
            std::fs::read(segment_path(dir.path(), target.id)).unwrap(),
            damaged_now,
            "{what}"
        );
        let copy = ShardFileName::SegmentCopy(target.id).file_name().unwrap();
        assert!(!dir.path().join(copy.as_str()).exists(), "{what}");
    }
    insta::assert_snapshot!(
        shard
            .replace_sealed_segment(target.id, &SegmentCopy::Bytes(Bytes::from(good[..112].to_vec())))
            .unwrap_err()
            .to_string(),
        @"shard orders-0: the copy of segment 1 was refused (its records end before offset 10, the segment's before 16); the segment was left as it was"
    );
}

#[test]
fn replace_sealed_segment_of_the_active_or_a_deleted_segment_is_not_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let shard = shard(dir.path());
    let active = shard.segments().last().unwrap().extent;
    let err = shard
        .replace_sealed_segment(active.id, &SegmentCopy::Bytes(Bytes::new()))
        .unwrap_err();
    assert!(
        matches!(err, StorageError::NotSealed { segment, .. } if segment == active.id),
        "{err:?}"
    );
    let err = shard
        .replace_sealed_segment(99, &SegmentCopy::Bytes(Bytes::new()))
        .unwrap_err();
    assert!(
        matches!(err, StorageError::NotSealed { segment: 99, .. }),
        "{err:?}"
    );
}

/// Readers running through the replacement see every record of the
/// segment either as the old file holds it (the rotted one failing) or as
/// the copy does: never an I/O error, a wrong payload or a half segment.
#[test]
fn replace_sealed_segment_readers_see_the_old_or_the_new_segment_whole() {
    let dir = tempfile::tempdir().unwrap();
    let shard = Arc::new(shard(dir.path()));
    let segment = shard.segments()[1].extent;
    let good = rot(dir.path(), segment.id, 3);
    let rotted = segment.base_offset + 3;
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (shard, done) = (Arc::clone(&shard), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !done.load(Ordering::Relaxed) || reads < 50 {
                    for offset in segment.base_offset..segment.next_offset {
                        match shard.read(offset, 1, ReadBound::Committed) {
                            Ok(records) => {
                                assert_eq!(records[0].offset, offset);
                                assert_eq!(records[0].payload, payload(offset));
                            }
                            Err(StorageError::Segment { .. }) if offset == rotted => {}
                            Err(other) => panic!("offset {offset}: {other:?}"),
                        }
                    }
                    reads += 1;
                }
            })
        })
        .collect();
    shard
        .replace_sealed_segment(segment.id, &SegmentCopy::Bytes(Bytes::from(good)))
        .unwrap();
    done.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.join().unwrap();
    }
    assert_eq!(
        shard.read(rotted, 1, ReadBound::Committed).unwrap()[0].payload,
        payload(rotted)
    );
}
