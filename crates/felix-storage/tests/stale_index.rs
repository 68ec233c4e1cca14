//! Reads through a sealed index whose middle entry points into a payload
//! that embeds a whole, valid record claiming the entry's offset (built with
//! the project's encoders). An open does not look at middle entries; the
//! read that meets the entry must not return the embedded record, nor fail:
//! it rebuilds the index from the records in memory, reads again, and adds
//! a note.

use std::path::Path;

use felix_format::{IndexEntry, RECORD_HEADER_LEN, encode_record_header};
use felix_recovery::{IndexProblem, Note};
use felix_segment::{Record as SegmentRecord, SegmentConfig, SegmentWriter, SparseIndex};
use felix_storage::{Durability, Preallocation, ReadBound, Shard, StoreConfig};

const SPACING: u64 = 128;

/// Record 2's payload embeds a whole record claiming offset 3.
fn payload(offset: u64) -> Vec<u8> {
    if offset == 2 {
        let fake = b"a record that does not exist";
        let mut payload = b"pad--".to_vec();
        payload.extend_from_slice(&encode_record_header(3, 3_000, fake).unwrap());
        payload.extend_from_slice(fake);
        payload.extend_from_slice(b"--tail");
        payload
    } else {
        format!("record-{offset:04}-").into_bytes().repeat(3)
    }
}

/// Segment 0 sealed (offsets 0..8) with index `[(0, 32), (3, inside
/// record 2), (6, record 6)]`, segment 1 newest (offsets 8..10). Returns
/// the wrong entry.
fn build(dir: &Path) -> IndexEntry {
    let config = SegmentConfig {
        index_spacing_bytes: SPACING,
        preallocate_bytes: None,
    };
    let mut writer = SegmentWriter::create(
        &felix_io::FileSystem::os(),
        dir,
        0,
        0,
        config,
        "shard".into(),
    )
    .unwrap();
    let records: Vec<SegmentRecord> = (0..8)
        .map(|o| SegmentRecord::new(o * 1_000, payload(o)))
        .collect();
    writer.append(&records).unwrap();
    writer.finish().unwrap();
    let index_path = writer.segment().index_path();
    drop(writer);
    let mut positions = vec![32u64];
    for o in 0..8u64 {
        positions.push(positions[o as usize] + RECORD_HEADER_LEN as u64 + payload(o).len() as u64);
    }
    let wrong = IndexEntry {
        offset: 3,
        position: positions[2] + RECORD_HEADER_LEN as u64 + 5,
    };
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
        .write_file(&felix_io::FileSystem::os(), &index_path)
        .unwrap();
    let mut newest = SegmentWriter::create(
        &felix_io::FileSystem::os(),
        dir,
        1,
        8,
        config,
        "shard".into(),
    )
    .unwrap();
    newest
        .append(&[
            SegmentRecord::new(8_000, payload(8)),
            SegmentRecord::new(9_000, payload(9)),
        ])
        .unwrap();
    newest.sync().unwrap();
    wrong
}

fn open(dir: &Path) -> Shard {
    let config = StoreConfig {
        index_spacing_bytes: SPACING,
        preallocate: Preallocation::Off,
        durability: Durability::OnCommit,
        ..StoreConfig::default()
    };
    Shard::options(dir)
        .config(config)
        .label("shard")
        .open()
        .unwrap()
}

fn stale_note(wrong: IndexEntry) -> Note {
    Note::IndexUnusable {
        segment: 0,
        reason: IndexProblem::StaleEntry {
            number: 1,
            offset: wrong.offset,
            position: wrong.position,
        },
    }
}

/// (offset, payload) of what `shard.read(from, max_bytes, ReadBound::Committed)` returns.
fn read(shard: &Shard, from: u64, max_bytes: u64) -> Vec<(u64, Vec<u8>)> {
    shard
        .read(from, max_bytes, ReadBound::Committed)
        .unwrap()
        .into_iter()
        .map(|r| (r.offset, r.payload.to_vec()))
        .collect()
}

#[test]
fn read_one_record_at_an_entry_naming_an_embedded_record_returns_the_real_one() {
    let dir = tempfile::tempdir().unwrap();
    let wrong = build(dir.path());
    let shard = open(dir.path());
    let before = shard.stats().notes;
    assert!(
        !before.contains(&stale_note(wrong)),
        "an open does not check middle entries: {before:?}"
    );
    // The embedded record verifies in full; only the header after it shows
    // it is not the segment's record 3.
    assert_eq!(read(&shard, 3, 1), [(3, payload(3))]);
    let mut expected = before.clone();
    expected.push(stale_note(wrong));
    assert_eq!(shard.stats().notes, expected);
    // The rebuilt index serves from now on: no second note.
    assert_eq!(read(&shard, 3, 1), [(3, payload(3))]);
    assert_eq!(read(&shard, 4, 1), [(4, payload(4))]);
    assert_eq!(shard.stats().notes, expected);
}

#[test]
fn read_through_an_entry_naming_an_embedded_record_is_never_damage() {
    for (from, max_bytes) in [(3, 1 << 20), (4, 1), (5, 1 << 20)] {
        let dir = tempfile::tempdir().unwrap();
        let wrong = build(dir.path());
        let shard = open(dir.path());
        let before = shard.stats().notes.len();
        let got = read(&shard, from, max_bytes);
        assert_eq!(got[0], (from, payload(from)), "from {from}");
        assert!(got.iter().all(|(o, p)| *p == payload(*o)), "from {from}");
        assert_eq!(
            shard.stats().notes[before..],
            [stale_note(wrong)],
            "from {from}"
        );
    }
}

#[test]
fn read_at_a_right_entry_adds_no_note() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let shard = open(dir.path());
    let before = shard.stats().notes;
    assert_eq!(read(&shard, 6, 1), [(6, payload(6))]);
    assert_eq!(read(&shard, 1, 1), [(1, payload(1))]);
    assert_eq!(shard.stats().notes, before);
}
