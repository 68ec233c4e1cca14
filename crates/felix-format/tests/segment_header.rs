//! Segment header rejection rules, one per row of the compatibility table.

use felix_format::{CorruptionKind, SegmentHeader, WIRE_FRAME_MAGIC};
use proptest::prelude::*;

fn header() -> [u8; 32] {
    SegmentHeader::new(1, 2).encode()
}

#[test]
fn decode_segment_header_wrong_magic_names_the_bytes_found() {
    let mut bytes = header();
    bytes[..4].copy_from_slice(b"FLX1");
    assert_eq!(
        SegmentHeader::decode(&bytes),
        Err(CorruptionKind::SegmentMagic {
            found: WIRE_FRAME_MAGIC
        })
    );
}

#[test]
fn decode_segment_header_version_1_is_rejected_naming_version_1() {
    let mut bytes = header();
    bytes[4..6].copy_from_slice(&1u16.to_be_bytes());
    assert_eq!(
        SegmentHeader::decode(&bytes),
        Err(CorruptionKind::SegmentVersion { found: 1 })
    );
}

#[test]
fn decode_segment_header_unknown_version_is_rejected_before_checksum() {
    let mut bytes = header();
    bytes[4..6].copy_from_slice(&3u16.to_be_bytes());
    assert_eq!(
        SegmentHeader::decode(&bytes),
        Err(CorruptionKind::SegmentVersion { found: 3 })
    );
}

#[test]
fn decode_segment_header_any_flag_is_rejected() {
    for bit in 0..16 {
        let mut bytes = header();
        let flags = 1u16 << bit;
        bytes[6..8].copy_from_slice(&flags.to_be_bytes());
        assert_eq!(
            SegmentHeader::decode(&bytes),
            Err(CorruptionKind::SegmentFlags { found: flags })
        );
    }
}

#[test]
fn decode_segment_header_changed_base_offset_fails_checksum() {
    let mut bytes = header();
    bytes[15] ^= 0x02;
    assert_eq!(
        SegmentHeader::decode(&bytes),
        Err(CorruptionKind::SegmentHeaderChecksum {
            expected: 0x7A09_E5B1,
            found: 0x54FF_CD37
        })
    );
}

#[test]
fn decode_segment_header_nonzero_reserved_is_rejected() {
    let mut bytes = header();
    bytes[31] = 1;
    assert_eq!(
        SegmentHeader::decode(&bytes),
        Err(CorruptionKind::SegmentReserved { found: 1 })
    );
}

#[test]
fn decode_segment_header_every_truncation_is_truncated() {
    let bytes = header();
    for len in 0..32 {
        assert_eq!(
            SegmentHeader::decode(&bytes[..len]),
            Err(CorruptionKind::Truncated {
                needed: 32,
                available: len as u64
            })
        );
    }
}

/// What a valid header with byte `i` flipped must be rejected as, field by
/// field in the decoder's order: magic, version, flags, then the CRC over
/// bytes 0..24 (which the base offset, the creation time and the CRC field
/// fail), and last the reserved field outside the CRC.
fn flip_error(bytes: &[u8; 32], i: usize) -> CorruptionKind {
    let u32_at = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    let u16_at = |at: usize| u16::from_be_bytes([bytes[at], bytes[at + 1]]);
    match i {
        0..4 => CorruptionKind::SegmentMagic { found: u32_at(0) },
        4..6 => CorruptionKind::SegmentVersion { found: u16_at(4) },
        6..8 => CorruptionKind::SegmentFlags { found: u16_at(6) },
        8..28 => CorruptionKind::SegmentHeaderChecksum {
            expected: u32_at(24),
            found: crc32fast::hash(&bytes[..24]),
        },
        _ => CorruptionKind::SegmentReserved { found: u32_at(28) },
    }
}

#[test]
fn decode_segment_header_every_bit_flip_is_detected() {
    let bytes = header();
    for bit in 0..bytes.len() * 8 {
        let mut flipped = bytes;
        flipped[bit / 8] ^= 1 << (bit % 8);
        let result = SegmentHeader::decode(&flipped);
        assert_eq!(
            result,
            Err(flip_error(&flipped, bit / 8)),
            "flip of bit {bit}"
        );
        assert!(result.unwrap_err().is_segment_header(), "bit {bit}");
    }
}

proptest! {
    #[test]
    fn segment_header_round_trips(base in any::<u64>(), created in any::<u64>()) {
        let header = SegmentHeader::new(base, created);
        prop_assert_eq!(SegmentHeader::decode(&header.encode()), Ok(header));
    }

    #[test]
    fn decode_segment_header_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = SegmentHeader::decode(&bytes);
    }
}
