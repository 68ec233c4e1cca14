//! Replacements of a sealed segment racing other changes to the log: a
//! truncation that makes the segment active again, and a roll that seals it
//! anew with other records, while its copy is being checked; and two
//! replacements of one segment at once. The copy's sync is held at a gate
//! so that the other change happens exactly then.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::gated::GatedFs;
use felix_format::{FileKind, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN, file_name};
use felix_io::OpenMode;
use felix_io::sim::SimFs;
use felix_storage::{
    CopyProblem, Durability, ReadBound, Record, SegmentCopy, Shard, StorageError, StoreConfig,
};

const PAYLOAD: usize = 12;
const PER_SEGMENT: u64 = 8;
const RECORD: u64 = (RECORD_HEADER_LEN + PAYLOAD) as u64;
const DIR: &str = "/shard";
const END: u64 = 3 * PER_SEGMENT + 2;

fn config() -> StoreConfig {
    StoreConfig {
        segment_size_bytes: SEGMENT_HEADER_LEN as u64 + PER_SEGMENT * RECORD,
        durability: Durability::None,
        ..StoreConfig::default()
    }
}

/// 12 bytes: `first-000010`, `again-000010`.
fn payload(tag: &str, offset: u64) -> Vec<u8> {
    format!("{tag}-{offset:06}").into_bytes()
}

/// A shard on `gated` holding offsets `0..END`, three sealed segments of 8
/// and the active one.
fn shard(gated: &GatedFs<SimFs>) -> Arc<Shard> {
    let shard = Shard::options(DIR)
        .config(config())
        .file_system(gated.handle())
        .label("orders-0")
        .open()
        .unwrap();
    for offset in 0..END {
        shard
            .append(&[Record::new(1_000 + offset, payload("first", offset))])
            .wait()
            .unwrap();
    }
    Arc::new(shard)
}

fn segment_bytes(gated: &GatedFs<SimFs>, id: u64) -> Vec<u8> {
    let path = Path::new(DIR).join(file_name(id, FileKind::Segment).as_str());
    let file = gated.handle().open(&path, OpenMode::Read).unwrap();
    let mut bytes = vec![0u8; usize::try_from(file.file_len().unwrap()).unwrap()];
    file.read_exact_at(&mut bytes, 0).unwrap();
    bytes
}

fn read_all(shard: &Shard) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < shard.offsets().written {
        for record in shard.read(offset, 1 << 20, ReadBound::Committed).unwrap() {
            offset = record.offset + 1;
            out.push((record.offset, record.payload.to_vec()));
        }
    }
    out
}

/// A follower truncates into segment 1 while a replica's copy of it is
/// checked, then appends other records until segment 1 is sealed again with
/// the same extent. The copy, checked against the segment as it was, must
/// not be put in: it would bring back the truncated records in place of
/// acknowledged ones.
#[test]
fn replace_sealed_segment_refuses_a_copy_of_a_segment_truncated_and_sealed_again_meanwhile() {
    let gated = GatedFs::new(SimFs::new()).only(".log.copy");
    let shard = shard(&gated);
    let copy = segment_bytes(&gated, 1);
    gated.close_gate();
    let replacing = {
        let shard = Arc::clone(&shard);
        std::thread::spawn(move || {
            shard.replace_sealed_segment(1, &SegmentCopy::Bytes(copy.into()))
        })
    };
    gated.await_waiting(1);
    shard.truncate_to(10).unwrap();
    for offset in 10..END {
        shard
            .append(&[Record::new(2_000 + offset, payload("again", offset))])
            .wait()
            .unwrap();
    }
    gated.open_gate();
    let outcome = replacing.join().unwrap();
    assert!(
        matches!(
            outcome,
            Err(StorageError::CopyRejected {
                segment: 1,
                problem: CopyProblem::SegmentChanged { segment: 1 },
                ..
            })
        ),
        "{outcome:?}"
    );
    let expected: Vec<(u64, Vec<u8>)> = (0..END)
        .map(|o| (o, payload(if o < 10 { "first" } else { "again" }, o)))
        .collect();
    assert_eq!(read_all(&shard), expected);
}

/// Two replacements of one segment: the second waits until the first has
/// renamed its checked copy into place, so it can never write over that
/// copy under their one temporary name; its own bad copy is then refused.
#[test]
fn replace_sealed_segment_twice_at_once_runs_one_after_the_other() {
    let gated = GatedFs::new(SimFs::new()).only(".log.copy");
    let shard = shard(&gated);
    let good = segment_bytes(&gated, 1);
    let mut bad = good.clone();
    let at = SEGMENT_HEADER_LEN + RECORD_HEADER_LEN + 3;
    bad[at] ^= 0x01;
    gated.close_gate();
    let first = {
        let shard = Arc::clone(&shard);
        std::thread::spawn(move || {
            shard.replace_sealed_segment(1, &SegmentCopy::Bytes(good.into()))
        })
    };
    gated.await_waiting(1);
    let second = {
        let shard = Arc::clone(&shard);
        std::thread::spawn(move || shard.replace_sealed_segment(1, &SegmentCopy::Bytes(bad.into())))
    };
    // The second has not reached its copy's sync: it waits for the first.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(gated.waiting(), 1);
    gated.open_gate();
    let first = first.join().unwrap();
    let second = second.join().unwrap();
    assert!(
        matches!(first, Ok(extent) if extent.id == 1 && extent.base_offset == 8 && extent.next_offset == 16),
        "{first:?}"
    );
    assert!(
        matches!(
            second,
            Err(StorageError::CopyRejected {
                segment: 1,
                problem: CopyProblem::Damaged { .. },
                ..
            })
        ),
        "{second:?}"
    );
    let expected: Vec<(u64, Vec<u8>)> = (0..END).map(|o| (o, payload("first", o))).collect();
    assert_eq!(read_all(&shard), expected);
}
