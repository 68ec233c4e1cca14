//! `felix-store verify --json` on shards this test builds and then damages,
//! one per kind of damage and place: the kind, segment, position and repair
//! class it reports, its exit status, and that it modified nothing.

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use common::{files, run, s, unhex};
use felix_storage::{Durability, Preallocation, Record, Shard, StoreConfig};
use serde_json::Value;

/// One record as `dump --json` reports it.
#[derive(Debug, Clone)]
struct Rec {
    segment: u64,
    offset: u64,
    position: u64,
    timestamp_micros: u64,
    payload: Vec<u8>,
}

/// A shard of 40 records (100-byte payloads, 128 bytes on disk) in
/// 2 KiB segments, appended two at a time: batches are never split, so
/// segments 0 and 1 hold 14 records each (32 + 7 × 256 bytes), segment 2
/// the last 12.
fn build_shard() -> (tempfile::TempDir, PathBuf, Vec<Rec>) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("shard");
    let config = StoreConfig {
        segment_size_bytes: 2048,
        index_spacing_bytes: 256,
        preallocate: Preallocation::Off,
        durability: Durability::OnCommit,
        ..StoreConfig::default()
    };
    {
        let shard = Shard::options(&dir)
            .config(config)
            .label("shard")
            .open()
            .unwrap();
        for first in (0..40u64).step_by(2) {
            let batch: Vec<_> = (first..first + 2)
                .map(|o| Record::new(1_000 + o, common::reference_payload(o, 100)))
                .collect();
            shard.append(&batch).unwrap();
        }
    }
    let dump = run(["dump", "--json", "--payload", "hex", s(&dir)]);
    assert_eq!(dump.code, 0, "{}", dump.stderr);
    let records: Vec<Rec> = dump
        .json_lines()
        .into_iter()
        .filter(|l| l["type"] == "record")
        .map(|l| Rec {
            segment: l["segment"].as_u64().unwrap(),
            offset: l["offset"].as_u64().unwrap(),
            position: l["position"].as_u64().unwrap(),
            timestamp_micros: l["timestamp_micros"].as_u64().unwrap(),
            payload: unhex(l["payload_hex"].as_str().unwrap()),
        })
        .collect();
    let per_segment: Vec<usize> = (0..3)
        .map(|id| records.iter().filter(|r| r.segment == id).count())
        .collect();
    assert_eq!(per_segment, [14, 14, 12]);
    (root, dir, records)
}

fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:020}.log"))
}

fn write_at(path: &Path, position: u64, bytes: &[u8]) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(bytes, position).unwrap();
}

fn read_at(path: &Path, position: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    std::fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut buf, position)
        .unwrap();
    buf
}

fn flip(path: &Path, position: u64) {
    let byte = read_at(path, position, 1)[0];
    write_at(path, position, &[byte ^ 0x01]);
}

fn set_len(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// What verify must report for one damaged shard.
struct Expect {
    kind: &'static str,
    segment: u64,
    position: u64,
    repair: &'static str,
}

/// Damages a fresh shard with `damage`, runs verify (with `--full` when
/// asked) and checks the single finding, the exit status and that no byte
/// changed.
fn check(name: &str, full: bool, damage: impl FnOnce(&Path, &[Rec]) -> Expect) {
    let (root, dir, records) = build_shard();
    let expect = damage(&dir, &records);
    let before = files(root.path());
    let mut args = vec!["verify", "--json"];
    if full {
        args.push("--full");
    }
    args.push(s(&dir));
    let result = run(&args);
    assert_eq!(files(root.path()), before, "{name}: verify modified a file");
    let line = &result.json_lines()[0];
    let findings = line["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{name}: {line}");
    let f = &findings[0];
    assert_eq!(
        (
            f["kind"].as_str().unwrap(),
            f["segment"].as_u64().unwrap(),
            f["position"].as_u64().unwrap(),
            f["repair"].as_str().unwrap()
        ),
        (expect.kind, expect.segment, expect.position, expect.repair),
        "{name}: {line}"
    );
    let expected_code = i32::from(expect.repair != "default");
    assert_eq!(result.code, expected_code, "{name}: {line}");
}

fn last(records: &[Rec]) -> &Rec {
    records.last().unwrap()
}

#[test]
fn verify_newest_segment_torn_tail_is_truncated_default() {
    check("torn tail", false, |dir, records| {
        let path = segment_path(dir, 2);
        set_len(&path, file_len(&path) - 10);
        Expect {
            kind: "Truncated",
            segment: 2,
            position: last(records).position,
            repair: "default",
        }
    });
}

#[test]
fn verify_newest_segment_torn_header_is_truncated_default() {
    check("torn header", false, |dir, records| {
        let path = segment_path(dir, 2);
        set_len(&path, last(records).position + 10);
        Expect {
            kind: "Truncated",
            segment: 2,
            position: last(records).position,
            repair: "default",
        }
    });
}

#[test]
fn verify_newest_segment_rotten_length_is_record_header_checksum_opt_in() {
    check("header rot", false, |dir, records| {
        flip(&segment_path(dir, 2), last(records).position + 3);
        Expect {
            kind: "RecordHeaderChecksum",
            segment: 2,
            position: last(records).position,
            repair: "opt_in",
        }
    });
}

#[test]
fn verify_newest_segment_rotten_payload_is_record_checksum_opt_in() {
    check("payload rot", false, |dir, records| {
        flip(&segment_path(dir, 2), last(records).position + 28 + 50);
        Expect {
            kind: "RecordChecksum",
            segment: 2,
            position: last(records).position,
            repair: "opt_in",
        }
    });
}

#[test]
fn verify_newest_segment_resealed_wrong_offset_is_offset_out_of_order_opt_in() {
    check("offset gap in record", false, |dir, records| {
        let rec = last(records);
        let header =
            felix_format::encode_record_header(rec.offset + 1, rec.timestamp_micros, &rec.payload)
                .unwrap();
        write_at(&segment_path(dir, 2), rec.position, &header);
        Expect {
            kind: "OffsetOutOfOrder",
            segment: 2,
            position: rec.position,
            repair: "opt_in",
        }
    });
}

#[test]
fn verify_newest_segment_resealed_impossible_length_is_record_too_large_opt_in() {
    check("too large", false, |dir, records| {
        let path = segment_path(dir, 2);
        let rec = last(records);
        let mut header = read_at(&path, rec.position, 28);
        header[..4].copy_from_slice(&(felix_format::MAX_PAYLOAD_BYTES + 1).to_be_bytes());
        let crc = crc32fast::hash(&header[..20]);
        header[20..24].copy_from_slice(&crc.to_be_bytes());
        write_at(&path, rec.position, &header);
        Expect {
            kind: "RecordTooLarge",
            segment: 2,
            position: rec.position,
            repair: "opt_in",
        }
    });
}

#[test]
fn verify_newest_segment_rot_followed_by_intact_record_is_never() {
    check("rot before intact", false, |dir, records| {
        let rec = records
            .iter()
            .find(|r| r.segment == 2 && r.offset == 32)
            .unwrap();
        flip(&segment_path(dir, 2), rec.position + 28 + 5);
        Expect {
            kind: "RecordChecksum",
            segment: 2,
            position: rec.position,
            repair: "never",
        }
    });
}

#[test]
fn verify_sealed_segment_last_header_rot_is_never() {
    check("sealed header rot", false, |dir, records| {
        let rec = records.iter().rfind(|r| r.segment == 0).unwrap();
        flip(&segment_path(dir, 0), rec.position + 6);
        Expect {
            kind: "RecordHeaderChecksum",
            segment: 0,
            position: rec.position,
            repair: "never",
        }
    });
}

#[test]
fn verify_full_sealed_segment_payload_rot_is_never() {
    check("sealed payload rot", true, |dir, records| {
        let rec = records
            .iter()
            .find(|r| r.segment == 1 && r.offset == 20)
            .unwrap();
        flip(&segment_path(dir, 1), rec.position + 28 + 99);
        Expect {
            kind: "RecordChecksum",
            segment: 1,
            position: rec.position,
            repair: "never",
        }
    });
}

#[test]
fn verify_segment_magic_is_never_at_byte_0() {
    check("magic", false, |dir, _| {
        flip(&segment_path(dir, 1), 3);
        Expect {
            kind: "SegmentMagic",
            segment: 1,
            position: 0,
            repair: "never",
        }
    });
}

#[test]
fn verify_segment_header_rot_is_segment_header_checksum_never() {
    check("header crc", false, |dir, _| {
        flip(&segment_path(dir, 0), 15);
        Expect {
            kind: "SegmentHeaderChecksum",
            segment: 0,
            position: 0,
            repair: "never",
        }
    });
}

#[test]
fn verify_abandoned_newest_segment_is_removed_by_default() {
    check("abandoned", false, |dir, _| {
        std::fs::write(segment_path(dir, 3), [0u8; 10]).unwrap();
        Expect {
            kind: "Truncated",
            segment: 3,
            position: 0,
            repair: "default",
        }
    });
}

#[test]
fn verify_missing_middle_segment_is_offset_out_of_order_never() {
    check("gap", false, |dir, _| {
        std::fs::remove_file(segment_path(dir, 1)).unwrap();
        std::fs::remove_file(dir.join(format!("{:020}.index", 1))).unwrap();
        Expect {
            kind: "OffsetOutOfOrder",
            segment: 2,
            position: 0,
            repair: "never",
        }
    });
}

#[test]
fn verify_garbage_index_is_a_note_not_a_finding() {
    let (root, dir, _) = build_shard();
    std::fs::write(dir.join(format!("{:020}.index", 1)), b"not an index at all").unwrap();
    let before = files(root.path());
    let result = run(["verify", "--json", s(&dir)]);
    assert_eq!(files(root.path()), before);
    assert_eq!(result.code, 0);
    let line = &result.json_lines()[0];
    assert_eq!(line["findings"], Value::Array(vec![]));
    let notes = line["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{line}");
    assert!(
        notes[0]
            .as_str()
            .unwrap()
            .contains("00000000000000000001.index is invalid"),
        "{line}"
    );
    assert_eq!(
        (line["next_offset"].as_u64(), line["records"].as_u64()),
        (Some(40), Some(40))
    );
}
