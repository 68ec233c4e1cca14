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
            shard.append(&batch).wait().unwrap();
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

/// One kind of damage at one place, and what verify must report for it:
/// the single finding's kind, segment, position and repair class (the exit
/// status follows from the class).
struct Case {
    name: &'static str,
    /// Rot only the checksums of every record find (a default open does
    /// not read it): reported under `rot`, not as a finding.
    rot: bool,
    /// Damages the shard; returns the segment and byte the finding names.
    damage: fn(&Path, &[Rec]) -> (u64, u64),
    kind: &'static str,
    repair: &'static str,
}

fn last(records: &[Rec]) -> &Rec {
    records.last().unwrap()
}

fn record(records: &[Rec], offset: u64) -> &Rec {
    records.iter().find(|r| r.offset == offset).unwrap()
}

/// Every case, one row each.
fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "newest segment: torn tail",
            rot: false,
            damage: |dir, records| {
                let path = segment_path(dir, 2);
                set_len(&path, file_len(&path) - 10);
                (2, last(records).position)
            },
            kind: "Truncated",
            repair: "default",
        },
        Case {
            name: "newest segment: torn header",
            rot: false,
            damage: |dir, records| {
                set_len(&segment_path(dir, 2), last(records).position + 10);
                (2, last(records).position)
            },
            kind: "Truncated",
            repair: "default",
        },
        Case {
            name: "newest segment: rotten length",
            rot: false,
            damage: |dir, records| {
                flip(&segment_path(dir, 2), last(records).position + 3);
                (2, last(records).position)
            },
            kind: "RecordHeaderChecksum",
            repair: "opt_in",
        },
        Case {
            name: "newest segment: rotten payload",
            rot: false,
            damage: |dir, records| {
                flip(&segment_path(dir, 2), last(records).position + 28 + 50);
                (2, last(records).position)
            },
            kind: "RecordChecksum",
            repair: "opt_in",
        },
        Case {
            name: "newest segment: wrong offset, header resealed",
            rot: false,
            damage: |dir, records| {
                let rec = last(records);
                let header = felix_format::encode_record_header(
                    rec.offset + 1,
                    rec.timestamp_micros,
                    &rec.payload,
                )
                .unwrap();
                write_at(&segment_path(dir, 2), rec.position, &header);
                (2, rec.position)
            },
            kind: "OffsetOutOfOrder",
            repair: "opt_in",
        },
        Case {
            name: "newest segment: impossible length, header resealed",
            rot: false,
            damage: |dir, records| {
                let path = segment_path(dir, 2);
                let rec = last(records);
                let mut header = read_at(&path, rec.position, 28);
                header[..4].copy_from_slice(&(felix_format::MAX_PAYLOAD_BYTES + 1).to_be_bytes());
                let crc = crc32fast::hash(&header[..20]);
                header[20..24].copy_from_slice(&crc.to_be_bytes());
                write_at(&path, rec.position, &header);
                (2, rec.position)
            },
            kind: "RecordTooLarge",
            repair: "opt_in",
        },
        Case {
            name: "newest segment: rot followed by an intact record",
            rot: false,
            damage: |dir, records| {
                let rec = record(records, 32);
                assert_eq!(rec.segment, 2);
                flip(&segment_path(dir, 2), rec.position + 28 + 5);
                (2, rec.position)
            },
            kind: "RecordChecksum",
            repair: "never",
        },
        Case {
            name: "sealed segment: its last record's header rotten",
            rot: false,
            damage: |dir, records| {
                let rec = records.iter().rfind(|r| r.segment == 0).unwrap();
                flip(&segment_path(dir, 0), rec.position + 6);
                (0, rec.position)
            },
            kind: "RecordHeaderChecksum",
            repair: "never",
        },
        Case {
            name: "sealed segment: a payload rotten",
            rot: true,
            damage: |dir, records| {
                let rec = record(records, 20);
                assert_eq!(rec.segment, 1);
                flip(&segment_path(dir, 1), rec.position + 28 + 99);
                (1, rec.position)
            },
            kind: "RecordChecksum",
            repair: "never",
        },
        Case {
            name: "segment magic",
            rot: false,
            damage: |dir, _| {
                flip(&segment_path(dir, 1), 3);
                (1, 0)
            },
            kind: "SegmentMagic",
            repair: "never",
        },
        Case {
            name: "segment header CRC",
            rot: false,
            damage: |dir, _| {
                flip(&segment_path(dir, 0), 15);
                (0, 0)
            },
            kind: "SegmentHeaderChecksum",
            repair: "never",
        },
        Case {
            name: "an abandoned newest segment is removed",
            rot: false,
            damage: |dir, _| {
                std::fs::write(segment_path(dir, 3), [0u8; 10]).unwrap();
                (3, 0)
            },
            kind: "Truncated",
            repair: "default",
        },
        Case {
            name: "a missing middle segment",
            rot: false,
            damage: |dir, _| {
                std::fs::remove_file(segment_path(dir, 1)).unwrap();
                std::fs::remove_file(dir.join(format!("{:020}.index", 1))).unwrap();
                (2, 0)
            },
            kind: "OffsetOutOfOrder",
            repair: "never",
        },
    ]
}

/// For each case: damages a fresh shard, runs verify and checks the single
/// finding (or, for rot a default open does not read, the single rot
/// entry), the exit status and that no byte changed; then `verify --quick`,
/// which checks what an open checks and so does not see the rot.
#[test]
fn verify_reports_each_damage_with_its_kind_site_and_repair_class() {
    for case in cases() {
        let name = case.name;
        let (root, dir, records) = build_shard();
        let (segment, position) = (case.damage)(&dir, &records);
        let before = files(root.path());
        let result = run(["verify", "--json", s(&dir)]);
        assert_eq!(files(root.path()), before, "{name}: verify modified a file");
        let line = &result.json_lines()[0];
        let (found, other) = if case.rot {
            (&line["rot"], &line["findings"])
        } else {
            (&line["findings"], &line["rot"])
        };
        let found = found.as_array().unwrap();
        assert_eq!(found.len(), 1, "{name}: {line}");
        assert_eq!(other, &serde_json::json!([]), "{name}: {line}");
        let f = &found[0];
        assert_eq!(
            (
                f["kind"].as_str().unwrap(),
                f["segment"].as_u64().unwrap(),
                f["position"].as_u64().unwrap(),
            ),
            (case.kind, segment, position),
            "{name}: {line}"
        );
        // Damage a default open refuses, and rot, exit 1.
        let expected_code = i32::from(case.rot || case.repair != "default");
        assert_eq!(result.code, expected_code, "{name}: {line}");
        if case.rot {
            assert_eq!(
                (f["offset"].as_u64(), &line["verdict"], &line["open_would"]),
                (Some(20), &"rot".into(), &"ok".into()),
                "{name}: {line}"
            );
            let quick = run(["verify", "--json", "--quick", s(&dir)]);
            let quick_line = &quick.json_lines()[0];
            assert_eq!(quick.code, 0, "{name}: {quick_line}");
            assert_eq!(quick_line["rot"], Value::Null, "{name}: {quick_line}");
        } else {
            assert_eq!(f["repair"], case.repair, "{name}: {line}");
        }
    }
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
    // 19 bytes: shorter than an index header.
    assert_eq!(
        line["notes"],
        serde_json::json!([
            "index 00000000000000000001.index is invalid (truncated: 24 bytes needed, 19 available); rebuilt from its segment"
        ]),
        "{line}"
    );
    assert_eq!(
        (line["next_offset"].as_u64(), line["records"].as_u64()),
        (Some(40), Some(40))
    );
}

/// Rot in the middle of a sealed segment: a default open accepts the shard
/// (it does not read sealed payloads), so `verify` says so on a line of its
/// own, reports the rot, and exits 1; `--full` is the same check, `--quick`
/// only what an open checks (exit 0); `dump` stops at the rot and exits as
/// `verify` does.
#[test]
fn verify_sealed_rot_reports_what_an_open_would_do_and_exits_1() {
    let (root, dir, records) = build_shard();
    let rec = record(&records, 20);
    flip(
        &dir.join(format!("{:020}.log", rec.segment)),
        rec.position + 28 + 3,
    );
    let before = files(root.path());
    let text = [
        common::transcript(&["verify", s(&dir)], root.path()),
        common::transcript(&["verify", "--full", s(&dir)], root.path()),
        common::transcript(&["verify", "--quick", s(&dir)], root.path()),
        common::transcript(
            &["dump", "--from", "20", "--count", "1", s(&dir)],
            root.path(),
        ),
    ]
    .join("\n");
    assert_eq!(files(root.path()), before);
    // The segment's creation time is the clock's.
    let text: Vec<String> = text
        .lines()
        .map(|line| match line.split_once("created_at_micros ") {
            Some((head, tail)) => {
                let rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
                format!("{head}created_at_micros [TIME]{rest}")
            }
            None => line.to_owned(),
        })
        .collect();
    insta::assert_snapshot!(text.join("\n"));
    let both = run(["verify", "--quick", "--full", s(&dir)]);
    assert_eq!(both.code, 2, "{}", both.stderr);
}
