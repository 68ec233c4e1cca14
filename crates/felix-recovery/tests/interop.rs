//! Shards written by the reference implementation read exactly as its README
//! says a correct reader must report.

mod common;

use std::path::Path;

use common::{interop_copy, interop_payload, snapshot};
use felix_format::CorruptionKind;
use felix_recovery::{
    Action, FindingContext, IndexProblem, InspectOptions, Note, OpenOptions, RecoveredShard,
    RepairClass, inspect, open_shard,
};
use felix_segment::{ReadLimit, SegmentFile, SparseIndex};

fn options() -> InspectOptions {
    InspectOptions {
        index_spacing_bytes: 4096,
        full_verify: false,
        ..InspectOptions::default()
    }
}

/// Reads every record of a recovered shard and checks it against the
/// corpus payload pattern.
fn check_all_payloads(dir: &Path, shard: &RecoveredShard, payload_len: usize) -> u64 {
    let mut count = 0;
    let mut segments: Vec<(u64, u64, u64, u64)> = shard
        .sealed
        .iter()
        .map(|s| (s.id, s.base_offset, s.next_offset, s.len))
        .collect();
    if let Some(newest) = &shard.newest {
        segments.push((
            newest.file.id(),
            newest.file.base_offset(),
            newest.next_offset,
            newest.len,
        ));
    }
    for (id, base, next, len) in segments {
        let (file, _) = SegmentFile::open(
            &felix_io::FileSystem::os(),
            dir,
            id,
            "interop".into(),
            felix_io::OpenMode::Read,
        )
        .unwrap();
        let index =
            SparseIndex::load(&felix_io::FileSystem::os(), &file.index_path(), base, len).unwrap();
        let limit = ReadLimit {
            end_position: len,
            next_offset: next,
        };
        let mut offset = base;
        while offset < next {
            for record in file
                .read(index.seek(offset), offset, limit, 1 << 20)
                .unwrap()
            {
                assert_eq!(record.offset, offset);
                assert_eq!(
                    record.payload,
                    interop_payload(offset, payload_len),
                    "offset {offset}"
                );
                offset += 1;
                count += 1;
            }
        }
    }
    count
}

#[test]
fn open_interop_clean_4seg_reports_no_damage() {
    let dir = interop_copy("clean-4seg");
    for full_verify in [false, true] {
        let inspection = inspect(
            &felix_io::FileSystem::os(),
            dir.path(),
            "clean-4seg",
            &InspectOptions {
                full_verify,
                ..options()
            },
        )
        .unwrap();
        assert_eq!(inspection.findings, []);
        assert_eq!(inspection.notes, []);
        assert_eq!(inspection.segments.len(), 4);
        assert_eq!(
            (
                inspection.base_offset(),
                inspection.next_offset(),
                inspection.records()
            ),
            (Some(0), Some(2000), Some(2000))
        );
    }
    let before = snapshot(dir.path());
    let shard = open_shard(
        &felix_io::FileSystem::os(),
        dir.path(),
        "clean-4seg",
        &OpenOptions::default(),
        &common::lock(dir.path()),
    )
    .unwrap();
    assert_eq!(shard.actions, []);
    assert_eq!(
        snapshot(dir.path()),
        before,
        "a clean open modifies nothing"
    );
    assert_eq!(check_all_payloads(dir.path(), &shard, 100), 2000);
}

#[test]
fn open_interop_torn_tail_truncates_offset_1999_by_default() {
    let dir = interop_copy("torn-tail");
    let inspection = inspect(
        &felix_io::FileSystem::os(),
        dir.path(),
        "torn-tail",
        &options(),
    )
    .unwrap();
    assert_eq!(inspection.findings.len(), 1);
    let finding = &inspection.findings[0];
    let newest_len = std::fs::metadata(dir.path().join("00000000000000000003.log"))
        .unwrap()
        .len();
    let record_start = newest_len + 10 - 128;
    assert_eq!(
        finding.kind,
        CorruptionKind::Truncated {
            needed: 128,
            available: 118
        }
    );
    assert_eq!(
        (finding.site.segment, finding.site.position),
        (3, record_start)
    );
    assert_eq!(finding.repair, RepairClass::Default);
    assert_eq!(inspection.next_offset(), Some(1999));

    let before = snapshot(dir.path());
    let shard = open_shard(
        &felix_io::FileSystem::os(),
        dir.path(),
        "torn-tail",
        &OpenOptions::default(),
        &common::lock(dir.path()),
    )
    .unwrap();
    assert!(shard.actions.contains(&Action::Truncate {
        segment: 3,
        path: dir.path().join("00000000000000000003.log"),
        from_len: newest_len,
        to_len: record_start,
    }));
    let newest = shard.newest.as_ref().unwrap();
    assert_eq!((newest.next_offset, newest.len), (1999, record_start));
    let after = snapshot(dir.path());
    for (name, bytes) in &before {
        if !name.starts_with("00000000000000000003") {
            assert_eq!(&after[name], bytes, "{name} must not change");
        }
    }
    assert_eq!(check_all_payloads(dir.path(), &shard, 100), 1999);
    // A second open finds nothing more to do.
    let again = open_shard(
        &felix_io::FileSystem::os(),
        dir.path(),
        "torn-tail",
        &OpenOptions::default(),
        &common::lock(dir.path()),
    )
    .unwrap();
    assert_eq!(again.inspection.findings, []);
}

fn check_trimmed(case: &str, ids: [u64; 3]) {
    let dir = interop_copy(case);
    let inspection = inspect(&felix_io::FileSystem::os(), dir.path(), case, &options()).unwrap();
    assert_eq!(inspection.findings, []);
    assert_eq!(
        inspection.segments.iter().map(|s| s.id).collect::<Vec<_>>(),
        ids
    );
    assert_eq!(
        (
            inspection.base_offset(),
            inspection.next_offset(),
            inspection.records()
        ),
        (Some(511), Some(2000), Some(1489))
    );
    let shard = open_shard(
        &felix_io::FileSystem::os(),
        dir.path(),
        case,
        &OpenOptions::default(),
        &common::lock(dir.path()),
    )
    .unwrap();
    assert_eq!(check_all_payloads(dir.path(), &shard, 100), 1489);
}

#[test]
fn open_interop_trimmed_head_begins_at_511_from_the_header() {
    check_trimmed("trimmed-head", [1, 2, 3]);
}

#[test]
fn open_interop_foreign_ids_takes_offsets_from_headers_not_names() {
    check_trimmed("foreign-ids", [7, 8, 9]);
}

#[test]
fn open_interop_garbage_index_rebuilds_both_indexes() {
    let dir = interop_copy("garbage-index");
    let inspection = inspect(
        &felix_io::FileSystem::os(),
        dir.path(),
        "garbage-index",
        &options(),
    )
    .unwrap();
    assert_eq!(inspection.findings, []);
    assert!(inspection.notes.contains(&Note::IndexUnusable {
        segment: 1,
        reason: IndexProblem::Missing
    }));
    assert!(inspection.notes.iter().any(|n| matches!(
        n,
        Note::IndexUnusable {
            segment: 2,
            reason: IndexProblem::Invalid(_)
        }
    )));
    let shard = open_shard(
        &felix_io::FileSystem::os(),
        dir.path(),
        "garbage-index",
        &OpenOptions::default(),
        &common::lock(dir.path()),
    )
    .unwrap();
    let rebuilt: Vec<_> = shard
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::RebuildIndex { segment, .. } => Some(*segment),
            _ => None,
        })
        .collect();
    assert_eq!(rebuilt, [1, 2]);
    assert_eq!(check_all_payloads(dir.path(), &shard, 100), 2000);
    let again = inspect(
        &felix_io::FileSystem::os(),
        dir.path(),
        "garbage-index",
        &options(),
    )
    .unwrap();
    assert_eq!(again.notes, [], "rebuilt indexes load cleanly");
}

#[test]
fn open_interop_killed_on_commit_keeps_every_acknowledged_offset() {
    let acks = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/interop/killed-on-commit.acks.jsonl"),
    )
    .unwrap();
    let last_acked = acks
        .lines()
        .filter(|l| l.contains("\"event\":\"ack\""))
        .filter_map(|l| l.split("\"last_offset\":").nth(1))
        .map(|v| v.trim_end_matches('}').parse::<u64>().unwrap())
        .max()
        .unwrap();
    assert_eq!(last_acked, 2729);

    let dir = interop_copy("killed-on-commit");
    let inspection = inspect(
        &felix_io::FileSystem::os(),
        dir.path(),
        "killed-on-commit",
        &InspectOptions {
            index_spacing_bytes: 1024,
            full_verify: true,
            ..InspectOptions::default()
        },
    )
    .unwrap();
    for finding in &inspection.findings {
        assert_eq!(finding.repair, RepairClass::Default, "{finding}");
        assert!(matches!(
            finding.context,
            FindingContext::Record { .. } | FindingContext::AbandonedSegment { .. }
        ));
    }
    let shard = open_shard(
        &felix_io::FileSystem::os(),
        dir.path(),
        "killed-on-commit",
        &OpenOptions::default(),
        &common::lock(dir.path()),
    )
    .unwrap();
    let next = shard.newest.as_ref().unwrap().next_offset;
    assert!(
        next > last_acked,
        "next offset {next} loses acknowledged records"
    );
    assert_eq!(check_all_payloads(dir.path(), &shard, 200), next);
}
