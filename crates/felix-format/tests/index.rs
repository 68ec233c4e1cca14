//! Index parsing: header checks, ordering, bounds and torn final entries.

use felix_format::{
    CorruptionKind, INDEX_MAGIC, IndexEntry, IndexHeader, SEGMENT_MAGIC, encode_index_entry,
    parse_index,
};
use proptest::prelude::*;

fn index_bytes(base: u64, entries: &[(u64, u64)]) -> Vec<u8> {
    let mut bytes = IndexHeader { base_offset: base }.encode().to_vec();
    for &(offset, position) in entries {
        bytes.extend(encode_index_entry(IndexEntry { offset, position }));
    }
    bytes
}

#[rustfmt::skip]
#[test]
fn encode_index_header_has_the_spec_layout() {
    assert_eq!(IndexHeader { base_offset: 0x0102 }.encode(), [
        0x46, 0x4C, 0x53, 0x49,                         // magic "FLSI"
        0x00, 0x02,                                     // version 2
        0x00, 0x00,                                     // flags
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, // base_offset
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // reserved
    ]);
}

#[test]
fn parse_index_valid_entries_are_returned_in_order() {
    let bytes = index_bytes(10, &[(10, 32), (20, 400), (30, 900)]);
    let index = parse_index(&bytes, 10, 1000).unwrap();
    let entries: Vec<_> = index.iter().map(|e| (e.offset, e.position)).collect();
    assert_eq!(entries, [(10, 32), (20, 400), (30, 900)]);
    assert_eq!(
        index.get(1),
        Some(IndexEntry {
            offset: 20,
            position: 400
        })
    );
    assert_eq!(index.get(3), None);
    assert_eq!(index.torn_bytes, 0);
}

#[test]
fn parse_index_every_torn_final_entry_is_dropped() {
    let bytes = index_bytes(0, &[(0, 32), (5, 200)]);
    for cut in 1..16 {
        let index = parse_index(&bytes[..bytes.len() - cut], 0, 1000).unwrap();
        assert_eq!(index.len(), 1, "cut {cut}");
        assert_eq!(index.torn_bytes, 16 - cut);
    }
}

#[test]
fn parse_index_header_only_is_an_empty_index() {
    let bytes = index_bytes(7, &[]);
    let index = parse_index(&bytes, 7, 32).unwrap();
    assert!(index.is_empty());
}

#[test]
fn parse_index_short_header_is_truncated() {
    let bytes = index_bytes(7, &[]);
    assert_eq!(
        parse_index(&bytes[..23], 7, 100),
        Err(CorruptionKind::Truncated {
            needed: 24,
            available: 23
        })
    );
}

#[test]
fn parse_index_segment_file_is_index_magic_naming_the_segment_magic() {
    let mut bytes = index_bytes(0, &[]);
    bytes[..4].copy_from_slice(&SEGMENT_MAGIC.to_be_bytes());
    assert_eq!(
        parse_index(&bytes, 0, 100),
        Err(CorruptionKind::IndexMagic {
            found: SEGMENT_MAGIC
        })
    );
    assert_ne!(SEGMENT_MAGIC, INDEX_MAGIC);
}

#[test]
fn parse_index_other_version_and_flags_are_rejected() {
    let mut bytes = index_bytes(0, &[]);
    bytes[5] = 1;
    assert_eq!(
        parse_index(&bytes, 0, 100),
        Err(CorruptionKind::IndexVersion { found: 1 })
    );
    let mut bytes = index_bytes(0, &[]);
    bytes[7] = 4;
    assert_eq!(
        parse_index(&bytes, 0, 100),
        Err(CorruptionKind::IndexFlags { found: 4 })
    );
}

#[test]
fn parse_index_for_another_base_offset_is_rejected() {
    assert_eq!(
        parse_index(&index_bytes(5, &[]), 6, 100),
        Err(CorruptionKind::IndexBaseOffset {
            expected: 6,
            found: 5
        })
    );
}

#[test]
fn parse_index_descending_or_repeated_entries_are_rejected() {
    for entries in [
        [(0, 32), (5, 100), (4, 200)],
        [(0, 32), (5, 100), (6, 100)],
        [(0, 32), (5, 100), (5, 200)],
    ] {
        assert_eq!(
            parse_index(&index_bytes(0, &entries), 0, 1000),
            Err(CorruptionKind::IndexEntryOutOfOrder {
                entry: 2,
                offset: entries[2].0,
                position: entries[2].1
            })
        );
    }
}

#[test]
fn parse_index_positions_outside_the_records_are_rejected() {
    for (entry, expected) in [((0, 31), 0), ((0, 1000), 0), ((2, 32), 0)] {
        let bytes = index_bytes(3, &[entry]);
        let result = parse_index(&bytes, 3, 1000);
        assert_eq!(
            result,
            Err(CorruptionKind::IndexEntryOutOfOrder {
                entry: expected,
                offset: entry.0,
                position: entry.1
            })
        );
    }
}

proptest! {
    #[test]
    fn index_round_trips(base in 0u64..1 << 40, steps in proptest::collection::vec((1u64..100, 28u64..5000), 0..50)) {
        let mut entries = Vec::new();
        let (mut offset, mut position) = (base, 32u64);
        for (d_offset, d_position) in steps {
            entries.push((offset, position));
            offset += d_offset;
            position += d_position;
        }
        let bytes = index_bytes(base, &entries);
        let index = parse_index(&bytes, base, position + 1).unwrap();
        let decoded: Vec<_> = index.iter().map(|e| (e.offset, e.position)).collect();
        prop_assert_eq!(decoded, entries);
    }

    #[test]
    fn parse_index_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), base in any::<u64>(), len in any::<u64>()) {
        let _ = parse_index(&bytes, base, len);
    }
}
