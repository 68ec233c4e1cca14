//! An index entry that points into a payload holding a valid-looking record
//! header: the header the entry names verifies (its CRC, its offset), so
//! only a walk of the records from the segment's start can tell the entry
//! is wrong. Built with the project's own encoders.

use std::path::Path;

use felix_format::{IndexEntry, RECORD_HEADER_LEN, decode_record_header, encode_record_header};
use felix_recovery::{
    Action, IndexCheck, IndexProblem, InspectOptions, Note, RepairPolicy, ShardLock, inspect,
    repair,
};
use felix_segment::{
    Record, SegmentConfig, SegmentFile, SegmentWriter, SparseIndex, first_stale_entry,
};

const SPACING: u64 = 128;
const LABEL: &str = "embedded";

/// Where the records of the fixture are.
struct Fixture {
    /// The wrong entry: offset 3 at the embedded header, inside record 2.
    wrong: IndexEntry,
    /// Where record 3 really begins.
    real_3: u64,
    /// The index the writer wrote for segment 0, before it was replaced.
    writers_index: Vec<u8>,
    /// How many entries it has.
    writers_entries: usize,
}

/// Record 2's payload: a few bytes, then a whole encoded record claiming
/// offset 3 (header and payload, both checksums valid), then a few more.
fn embedding_payload() -> Vec<u8> {
    let fake = b"a record that does not exist";
    let mut payload = b"pad--".to_vec();
    payload.extend_from_slice(&encode_record_header(3, 3_000, fake).unwrap());
    payload.extend_from_slice(fake);
    payload.extend_from_slice(b"--tail");
    payload
}

fn payload(offset: u64) -> Vec<u8> {
    if offset == 2 {
        embedding_payload()
    } else {
        format!("record-{offset:04}-").into_bytes().repeat(3)
    }
}

/// Segment 0 (sealed): offsets 0..8, record 2 embedding a record; its index
/// `[(0, 32), (3, inside record 2), (6, record 6)]`: right first and last
/// entries, a wrong middle one. Segment 1 (newest): offsets 8..10.
fn build(dir: &Path) -> Fixture {
    let config = SegmentConfig {
        index_spacing_bytes: SPACING,
        preallocate_bytes: None,
    };
    let mut writer =
        SegmentWriter::create(&felix_io::FileSystem::os(), dir, 0, 0, config, LABEL.into())
            .unwrap();
    let records: Vec<Record> = (0..8).map(|o| Record::new(o * 1_000, payload(o))).collect();
    writer.append(&records).unwrap();
    writer.finish().unwrap();
    let segment = writer.segment().clone();
    let mut positions = vec![32u64];
    for o in 0..8 {
        let next = positions[o as usize] + RECORD_HEADER_LEN as u64 + payload(o).len() as u64;
        positions.push(next);
    }
    let wrong = IndexEntry {
        offset: 3,
        position: positions[2] + RECORD_HEADER_LEN as u64 + 5,
    };
    let writers_index = std::fs::read(segment.index_path()).unwrap();
    let writers_entries = SparseIndex::load(
        &felix_io::FileSystem::os(),
        &segment.index_path(),
        0,
        positions[8],
    )
    .unwrap()
    .entries()
    .len();
    let entries = vec![
        IndexEntry {
            offset: 0,
            position: 32,
        },
        wrong,
        IndexEntry {
            offset: 6,
            position: positions[6],
        },
    ];
    SparseIndex::from_entries(0, entries)
        .write_file(&felix_io::FileSystem::os(), &segment.index_path())
        .unwrap();
    drop(writer);
    let mut newest =
        SegmentWriter::create(&felix_io::FileSystem::os(), dir, 1, 8, config, LABEL.into())
            .unwrap();
    newest
        .append(&[
            Record::new(8_000, payload(8)),
            Record::new(9_000, payload(9)),
        ])
        .unwrap();
    newest.sync().unwrap();
    Fixture {
        wrong,
        real_3: positions[3],
        writers_index,
        writers_entries,
    }
}

fn options(index_check: IndexCheck, full_verify: bool) -> InspectOptions {
    InspectOptions {
        index_spacing_bytes: SPACING,
        full_verify,
        index_check,
    }
}

fn stale_note(fixture: &Fixture) -> Note {
    Note::IndexUnusable {
        segment: 0,
        reason: IndexProblem::StaleEntry {
            number: 1,
            offset: 3,
            position: fixture.wrong.position,
        },
    }
}

#[test]
fn fixture_embedded_header_verifies_so_only_a_walk_can_refute_it() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = build(dir.path());
    let bytes = std::fs::read(dir.path().join("00000000000000000000.log")).unwrap();
    let at = fixture.wrong.position as usize;
    let header = decode_record_header(&bytes[at..at + RECORD_HEADER_LEN]).unwrap();
    assert_eq!(header.offset, 3);
    assert!(fixture.real_3 > fixture.wrong.position);
    let (segment, len) = SegmentFile::open(
        &felix_io::FileSystem::os(),
        dir.path(),
        0,
        LABEL.into(),
        felix_io::OpenMode::Read,
    )
    .unwrap();
    let index =
        SparseIndex::load(&felix_io::FileSystem::os(), &segment.index_path(), 0, len).unwrap();
    assert_eq!(
        first_stale_entry(&segment, len, index.entries()).unwrap(),
        Some((1, fixture.wrong))
    );
}

#[test]
fn inspect_every_entry_notes_the_middle_entry_and_plans_a_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = build(dir.path());
    for full_verify in [false, true] {
        let inspection = inspect(
            &felix_io::FileSystem::os(),
            dir.path(),
            LABEL,
            &options(IndexCheck::EveryEntry, full_verify),
        )
        .unwrap();
        assert_eq!(inspection.findings, [], "full_verify {full_verify}");
        assert_eq!(inspection.notes, [stale_note(&fixture)], "{full_verify}");
        assert!(!inspection.segments[0].index_ok);
        assert_eq!(
            inspection.plan,
            [Action::RebuildIndex {
                segment: 0,
                path: dir.path().join("00000000000000000000.index"),
                entries: fixture.writers_entries,
            }]
        );
    }
}

#[test]
fn inspect_full_verify_checks_every_entry_whatever_the_index_check() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = build(dir.path());
    let inspection = inspect(
        &felix_io::FileSystem::os(),
        dir.path(),
        LABEL,
        &options(IndexCheck::LastEntry, true),
    )
    .unwrap();
    assert_eq!(inspection.notes, [stale_note(&fixture)]);
}

#[test]
fn inspect_last_entry_leaves_a_middle_entry_to_the_reads_that_meet_it() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let inspection = inspect(
        &felix_io::FileSystem::os(),
        dir.path(),
        LABEL,
        &options(IndexCheck::LastEntry, false),
    )
    .unwrap();
    assert_eq!((inspection.findings.len(), inspection.notes.len()), (0, 0));
    assert!(inspection.segments[0].index_ok);
    assert_eq!(inspection.plan, []);
}

#[test]
fn repair_every_entry_rebuilds_the_writers_index_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = build(dir.path());
    let inspection = inspect(
        &felix_io::FileSystem::os(),
        dir.path(),
        LABEL,
        &options(IndexCheck::EveryEntry, false),
    )
    .unwrap();
    let lock = ShardLock::acquire(&felix_io::FileSystem::os(), dir.path()).unwrap();
    let repaired = repair(
        &felix_io::FileSystem::os(),
        &inspection,
        RepairPolicy::Default,
        &lock,
    )
    .unwrap();
    assert_eq!(
        (repaired.actions, repaired.notes),
        (inspection.plan.clone(), vec![])
    );
    let index = std::fs::read(dir.path().join("00000000000000000000.index")).unwrap();
    assert_eq!(index, fixture.writers_index);
    let again = inspect(
        &felix_io::FileSystem::os(),
        dir.path(),
        LABEL,
        &options(IndexCheck::EveryEntry, false),
    )
    .unwrap();
    assert_eq!((again.notes.len(), again.plan.len()), (0, 0));
}
