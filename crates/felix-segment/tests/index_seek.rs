//! Reads through the sparse index: every offset found, and damaged indexes
//! never turning into wrong records.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{interop_payload, label, payload_for, record, writer};
use felix_format::{CorruptionKind, INDEX_HEADER_LEN, IndexEntry, IndexHeader, encode_index_entry};
use felix_segment::{IndexLoadError, ReadLimit, SegmentError, SegmentFile, SparseIndex};

const RECORDS: u64 = 10_000;

/// Writes and seals a 10,000-record segment with the given spacing.
fn sealed(dir: &Path, spacing: u64) -> (Arc<SegmentFile>, ReadLimit) {
    let mut w = writer(dir, 0, spacing);
    for chunk in (0..RECORDS).collect::<Vec<_>>().chunks(500) {
        let records: Vec<_> = chunk
            .iter()
            .map(|&o| record(o, (o % 97) as usize))
            .collect();
        w.append(&records).unwrap();
    }
    let sealed = w.seal().unwrap();
    let limit = ReadLimit {
        end_position: sealed.extent.len,
        next_offset: sealed.extent.next_offset,
    };
    (sealed.segment, limit)
}

fn check_every_offset(segment: &SegmentFile, index: &SparseIndex, limit: ReadLimit) {
    for offset in 0..RECORDS {
        let records = segment.read(index.seek(offset), offset, limit, 1).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].offset, offset);
        assert_eq!(
            records[0].payload,
            payload_for(offset, (offset % 97) as usize)
        );
    }
}

#[test]
fn read_every_offset_through_index_with_spacing_one_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, limit) = sealed(dir.path(), 1);
    let index = SparseIndex::load(
        &felix_io::FileSystem::os(),
        &segment.index_path(),
        0,
        limit.end_position,
    )
    .unwrap();
    assert_eq!(
        index.entries().len(),
        RECORDS as usize,
        "spacing 1 indexes every record"
    );
    check_every_offset(&segment, &index, limit);
}

#[test]
fn read_every_offset_through_index_with_spacing_4_kib() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, limit) = sealed(dir.path(), 4096);
    let index = SparseIndex::load(
        &felix_io::FileSystem::os(),
        &segment.index_path(),
        0,
        limit.end_position,
    )
    .unwrap();
    let expected_entries = (limit.end_position - 32).div_ceil(4096) as usize;
    assert!(index.entries().len().abs_diff(expected_entries) <= 1 + expected_entries / 10);
    for pair in index.entries().windows(2) {
        assert!(pair[1].position - pair[0].position >= 4096);
        assert!(pair[1].position - pair[0].position < 4096 + 28 + 97);
    }
    check_every_offset(&segment, &index, limit);
}

#[test]
fn read_every_offset_through_index_with_spacing_larger_than_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, limit) = sealed(dir.path(), 1 << 40);
    let index = SparseIndex::load(
        &felix_io::FileSystem::os(),
        &segment.index_path(),
        0,
        limit.end_position,
    )
    .unwrap();
    assert_eq!(
        index.entries(),
        [IndexEntry {
            offset: 0,
            position: 32
        }]
    );
    check_every_offset(&segment, &index, limit);
}

fn write_index(path: &Path, base: u64, entries: &[(u64, u64)], tail: &[u8]) {
    let mut bytes = IndexHeader { base_offset: base }.encode().to_vec();
    for &(offset, position) in entries {
        bytes.extend(encode_index_entry(IndexEntry { offset, position }));
    }
    bytes.extend_from_slice(tail);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn load_damaged_indexes_reports_a_reason_to_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, limit) = sealed(dir.path(), 4096);
    let path = segment.index_path();
    let load = || SparseIndex::load(&felix_io::FileSystem::os(), &path, 0, limit.end_position);

    std::fs::remove_file(&path).unwrap();
    assert!(matches!(load(), Err(IndexLoadError::Missing { path: p }) if p == path));

    std::fs::write(&path, b"").unwrap();
    assert!(matches!(
        load(),
        Err(IndexLoadError::Invalid {
            kind: CorruptionKind::Truncated {
                needed: 24,
                available: 0
            },
            ..
        })
    ));

    std::fs::write(&path, [0x5Au8; 100]).unwrap();
    assert!(matches!(
        load(),
        Err(IndexLoadError::Invalid {
            kind: CorruptionKind::IndexMagic { found: 0x5A5A_5A5A },
            ..
        })
    ));

    write_index(&path, 9, &[(9, 32)], &[]);
    assert!(matches!(
        load(),
        Err(IndexLoadError::Invalid {
            kind: CorruptionKind::IndexBaseOffset {
                expected: 0,
                found: 9
            },
            ..
        })
    ));

    write_index(&path, 0, &[(0, 32), (50, 5000), (40, 6000)], &[]);
    assert!(matches!(
        load(),
        Err(IndexLoadError::Invalid {
            kind: CorruptionKind::IndexEntryOutOfOrder {
                entry: 2,
                offset: 40,
                position: 6000
            },
            ..
        })
    ));

    write_index(&path, 0, &[(0, 32), (5, limit.end_position)], &[]);
    assert!(matches!(
        load(),
        Err(IndexLoadError::Invalid {
            kind: CorruptionKind::IndexEntryOutOfOrder { entry: 1, .. },
            ..
        })
    ));

    // A torn final entry is dropped, not a reason to rebuild.
    write_index(&path, 0, &[(0, 32)], &[0, 0, 0, 1]);
    assert_eq!(
        load().unwrap().entries(),
        [IndexEntry {
            offset: 0,
            position: 32
        }]
    );
    std::fs::write(
        &path,
        [&IndexHeader { base_offset: 0 }.encode()[..], &[1; 7]].concat(),
    )
    .unwrap();
    assert_eq!(load().unwrap().entries().len(), 0);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        INDEX_HEADER_LEN as u64 + 7
    );
}

#[test]
fn read_through_entry_pointing_mid_record_is_stale_index_never_data() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, limit) = sealed(dir.path(), 4096);
    let good = SparseIndex::load(
        &felix_io::FileSystem::os(),
        &segment.index_path(),
        0,
        limit.end_position,
    )
    .unwrap();
    let real = good.entries()[3];
    for delta in 1..40u64 {
        let wrong = IndexEntry {
            offset: real.offset,
            position: real.position + delta,
        };
        let result = segment.read(wrong, real.offset + 2, limit, 1);
        match result {
            Err(SegmentError::StaleIndex { entry, site, .. }) => {
                assert_eq!(entry, wrong);
                assert_eq!(site.position, wrong.position);
            }
            other => panic!("delta {delta}: {other:?}"),
        }
    }
}

#[test]
fn read_through_entry_with_wrong_offset_is_stale_index_never_data() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, limit) = sealed(dir.path(), 4096);
    let good = SparseIndex::load(
        &felix_io::FileSystem::os(),
        &segment.index_path(),
        0,
        limit.end_position,
    )
    .unwrap();
    let real = good.entries()[3];
    // The entry claims an earlier offset at the right position: following it
    // would mislabel every record, so the first record's offset must refute it.
    let wrong = IndexEntry {
        offset: real.offset - 1,
        position: real.position,
    };
    let err = segment.read(wrong, real.offset, limit, 1).unwrap_err();
    assert!(
        matches!(err, SegmentError::StaleIndex { kind: CorruptionKind::OffsetOutOfOrder { expected, found }, .. } if expected == real.offset - 1 && found == real.offset),
        "{err:?}"
    );
}

#[test]
fn read_through_entry_past_the_target_is_stale_index() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, limit) = sealed(dir.path(), 4096);
    let err = segment
        .read(
            IndexEntry {
                offset: 500,
                position: 9000,
            },
            100,
            limit,
            1,
        )
        .unwrap_err();
    assert!(matches!(err, SegmentError::StaleIndex { .. }), "{err:?}");
}

/// Copies an interop case so nothing can modify the in-repository corpus (`fixtures/interop/`).
fn interop_copy(case: &str) -> tempfile::TempDir {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/interop")
        .join(case);
    let dst = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&src).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dst.path().join(entry.file_name())).unwrap();
    }
    dst
}

#[test]
fn read_interop_clean_4seg_record_by_record_gives_the_readme_payloads() {
    let dir = interop_copy("clean-4seg");
    let mut offset = 0u64;
    for id in 0..4 {
        let (segment, len) = SegmentFile::open(
            &felix_io::FileSystem::os(),
            dir.path(),
            id,
            label(),
            felix_io::OpenMode::ReadWrite,
        )
        .unwrap();
        assert_eq!(segment.base_offset(), offset);
        let index = SparseIndex::load(
            &felix_io::FileSystem::os(),
            &segment.index_path(),
            offset,
            len,
        )
        .unwrap();
        // The segment's record count is found by reading to its end.
        let all = segment
            .read(
                index.seek(offset),
                offset,
                ReadLimit {
                    end_position: len,
                    next_offset: u64::MAX,
                },
                u64::MAX,
            )
            .unwrap_err();
        // Reading past the last record runs into the end of the file.
        assert!(
            matches!(
                all,
                SegmentError::Corrupt {
                    kind: CorruptionKind::Truncated {
                        needed: 28,
                        available: 0
                    },
                    ..
                }
            ),
            "{all:?}"
        );
        loop {
            let limit = ReadLimit {
                end_position: len,
                next_offset: offset + 1,
            };
            let records = segment.read(index.seek(offset), offset, limit, 1).unwrap();
            assert_eq!(records[0].offset, offset);
            assert_eq!(records[0].payload, interop_payload(offset, 100));
            offset += 1;
            if records[0].position + 128 == len {
                break;
            }
        }
    }
    assert_eq!(offset, 2000);
}

#[test]
fn read_through_entry_claiming_a_later_offset_at_the_first_record_is_stale_index() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, limit) = sealed(dir.path(), 4096);
    // Position 32 is the first record, but it holds offset 0, not 1.
    let wrong = IndexEntry {
        offset: 1,
        position: 32,
    };
    let err = segment.read(wrong, 5, limit, 1).unwrap_err();
    assert!(
        matches!(err, SegmentError::StaleIndex { entry, kind: CorruptionKind::OffsetOutOfOrder { expected: 1, found: 0 }, .. } if entry == wrong),
        "{err:?}"
    );
}

#[test]
fn read_of_rotted_payload_at_a_correct_entry_is_corruption_not_stale_index() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, limit) = sealed(dir.path(), 4096);
    let index = SparseIndex::load(
        &felix_io::FileSystem::os(),
        &segment.index_path(),
        0,
        limit.end_position,
    )
    .unwrap();
    let entry = index.entries()[2];
    // Flip the last payload byte of the record the entry points at (offset
    // % 97 bytes of payload; pick an entry whose record has a payload).
    let payload_len = entry.offset % 97;
    assert!(payload_len > 0);
    let at = entry.position + 28 + payload_len - 1;
    let mut bytes = std::fs::read(segment.path()).unwrap();
    bytes[at as usize] ^= 1;
    std::fs::write(segment.path(), &bytes).unwrap();
    let err = segment.read(entry, entry.offset, limit, 1).unwrap_err();
    // What felix-format says of the record's bytes as they now are: the
    // CRC stored in its header against the one they compute to.
    let record = &bytes[entry.position as usize..(at + 1) as usize];
    let kind = felix_format::decode_record(record, Some(entry.offset)).unwrap_err();
    assert!(matches!(kind, CorruptionKind::RecordChecksum { .. }));
    assert!(
        matches!(&err, SegmentError::Corrupt { site, kind: k } if *site == segment.site(entry.position) && *k == kind),
        "{err:?}"
    );
}

/// A segment whose record 2 carries, inside its payload, a whole valid
/// record claiming offset 3; returns the segment, its limit, the position of
/// the embedded record and of the real record 3.
fn embedding(dir: &Path) -> (Arc<SegmentFile>, ReadLimit, u64, u64) {
    let fake = b"a record that does not exist";
    let mut embedded = b"pad--".to_vec();
    embedded.extend_from_slice(&felix_format::encode_record_header(3, 30, fake).unwrap());
    embedded.extend_from_slice(fake);
    embedded.extend_from_slice(b"--tail");
    let mut w = writer(dir, 0, 1 << 20);
    let records: Vec<_> = (0..6)
        .map(|o| match o {
            2 => felix_segment::Record::new(20, embedded.clone()),
            _ => record(o, 40),
        })
        .collect();
    w.append(&records).unwrap();
    let sealed = w.seal().unwrap();
    let limit = ReadLimit {
        end_position: sealed.extent.len,
        next_offset: sealed.extent.next_offset,
    };
    let record_2 = 32 + 2 * (28 + 40);
    let real_3 = record_2 + 28 + embedded.len() as u64;
    (sealed.segment, limit, record_2 + 28 + 5, real_3)
}

#[test]
fn read_from_hint_at_an_entry_naming_an_embedded_record_is_stale_index() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, limit, fake, _) = embedding(dir.path());
    let wrong = IndexEntry {
        offset: 3,
        position: fake,
    };
    // The embedded record verifies in full, so a plain read returns it.
    let misled = segment.read_within(wrong, None, 3, limit, 1).unwrap();
    assert_eq!(misled[0].payload, &b"a record that does not exist"[..]);
    // The header after it shows it is no record of the segment's.
    let err = segment
        .read_from_hint(wrong, None, 3, limit, 1)
        .unwrap_err();
    assert!(
        matches!(err, SegmentError::StaleIndex { entry, ref site, kind: CorruptionKind::RecordHeaderChecksum { .. } }
            if entry == wrong && site.position == fake + 28 + 28),
        "{err:?}"
    );
}

#[test]
fn read_from_hint_at_a_real_entry_returns_the_record_up_to_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, limit, _, real_3) = embedding(dir.path());
    let right = IndexEntry {
        offset: 3,
        position: real_3,
    };
    let got = segment.read_from_hint(right, None, 3, limit, 1).unwrap();
    assert_eq!((got[0].offset, got[0].position), (3, real_3));
    assert_eq!(got[0].payload, payload_for(3, 40));
    // The last record has no header after it to check, and needs none.
    let index = SparseIndex::from_entries(0, Vec::new());
    let last = segment.read(index.seek(5), 5, limit, 1).unwrap()[0].position;
    let entry = IndexEntry {
        offset: 5,
        position: last,
    };
    let got = segment.read_from_hint(entry, None, 5, limit, 1).unwrap();
    assert_eq!(got[0].payload, payload_for(5, 40));
}
