#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

use alloc::vec;
use alloc::vec::Vec;

use super::*;
use crate::FileKind;
use crate::checksum::{crc32, crc32_continue};
use crate::side_file::SideFileDefect as D;

fn segment(id: u64, base: u64, next: u64) -> RemoteSegment {
    RemoteSegment {
        extent: SegmentExtent {
            id,
            base_offset: base,
            next_offset: next,
            len: 1_000 + id,
        },
        index_len: 40 + id,
        time_index_len: 56 + id,
        max_timestamp_micros: (id != 2).then_some(1_700_000_000_000_000 + id),
        upload: 0xabc0 + id,
        segment_crc: 0x1111_0000 + id as u32,
        index_crc: 0x2222_0000 + id as u32,
        time_index_crc: 0x3333_0000 + id as u32,
    }
}

fn manifest() -> Manifest {
    Manifest {
        seq: 9,
        key: ShardKey::new("acme", "default", "orders", 3),
        start_offset: 105,
        segments: vec![
            segment(1, 100, 200),
            segment(2, 200, 250),
            segment(4, 250, 251),
        ],
    }
}

fn encoded(m: &Manifest) -> Vec<u8> {
    let mut out = Vec::new();
    encode_manifest(m, &mut out).unwrap();
    out
}

/// Re-seals a body edited by a test so only the body checks see it.
fn reseal(bytes: &mut [u8]) {
    let crc = crc32_continue(crc32(&bytes[..20]), &[&bytes[MANIFEST_HEADER_LEN..]]);
    bytes[20..24].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn round_trips_and_writes_the_documented_header() {
    let m = manifest();
    let bytes = encoded(&m);
    assert_eq!(&bytes[..4], b"FLTM");
    assert_eq!(&bytes[4..8], &[0, 1, 0, 0]);
    assert_eq!(&bytes[8..16], &9u64.to_be_bytes());
    let mut key = Vec::new();
    encode_key_file(&m.key, &mut key).unwrap();
    let body_len = 4 + key.len() + 12 + 3 * MANIFEST_ENTRY_LEN;
    assert_eq!(&bytes[16..20], &(body_len as u32).to_be_bytes());
    assert_eq!(bytes.len(), MANIFEST_HEADER_LEN + body_len);
    let view = decode_manifest(&bytes).unwrap();
    assert_eq!(view.len(), 3);
    assert_eq!(view.get(1), Some(m.segments[1]));
    assert_eq!(view.get(3), None);
    assert_eq!(view.to_manifest(), m);
    assert_eq!(m.next_offset(), 251);
}

#[test]
fn an_empty_manifest_accepts_any_start() {
    let m = Manifest {
        segments: vec![],
        start_offset: 77,
        ..manifest()
    };
    let bytes = encoded(&m);
    let view = decode_manifest(&bytes).unwrap();
    assert!(view.is_empty());
    assert_eq!(view.to_manifest().next_offset(), 77);
}

#[test]
fn every_truncation_and_every_extension_is_refused() {
    let bytes = encoded(&manifest());
    for len in 0..bytes.len() {
        let err = decode_manifest(&bytes[..len]).unwrap_err();
        if len < MANIFEST_HEADER_LEN {
            assert_eq!(
                err,
                error(D::Short {
                    len,
                    header_len: MANIFEST_HEADER_LEN
                })
            );
        } else {
            assert!(
                matches!(err, SideFileError { kind: SideFileKind::Manifest, defect: D::LengthMismatch { found, .. }, embedded: None } if found == len - MANIFEST_HEADER_LEN),
                "{len}: {err:?}"
            );
        }
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(
        decode_manifest(&longer),
        Err(SideFileError {
            kind: SideFileKind::Manifest,
            defect: D::LengthMismatch { .. },
            embedded: None,
        })
    ));
}

#[test]
fn every_bit_flip_is_refused() {
    let bytes = encoded(&manifest());
    for bit in 0..bytes.len() * 8 {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let err = decode_manifest(&flipped).unwrap_err();
        let expected = match bit / 8 {
            0..4 => "ManifestMagic",
            4..6 => "ManifestVersion",
            6..8 => "ManifestFlags",
            16..20 => "ManifestBodyLength",
            _ => "ManifestChecksum",
        };
        assert_eq!(err.name(), expected, "bit {bit}: {err:?}");
    }
}

#[test]
fn overlaps_gaps_and_disorder_are_refused_even_with_a_good_checksum() {
    let cases: [(Vec<RemoteSegment>, u64, SideFileError); 5] = [
        (
            vec![segment(1, 100, 200), segment(2, 199, 250)],
            100,
            error(D::Order { entry: 1 }),
        ),
        (
            vec![segment(1, 100, 200), segment(2, 201, 250)],
            100,
            error(D::Order { entry: 1 }),
        ),
        (
            vec![segment(2, 100, 200), segment(1, 200, 250)],
            100,
            error(D::Order { entry: 1 }),
        ),
        (
            vec![segment(1, 100, 200)],
            200,
            error(D::Start { start_offset: 200 }),
        ),
        (
            vec![segment(1, 100, 100)],
            100,
            error(D::RemoteEntry { entry: 0 }),
        ),
    ];
    for (segments, start_offset, expected) in cases {
        let m = Manifest {
            segments,
            start_offset,
            ..manifest()
        };
        assert_eq!(decode_manifest(&encoded(&m)).unwrap_err(), expected);
    }
}

#[test]
fn a_count_that_disagrees_with_the_entries_is_refused() {
    let m = manifest();
    let mut bytes = encoded(&m);
    let mut key = Vec::new();
    encode_key_file(&m.key, &mut key).unwrap();
    let count_at = MANIFEST_HEADER_LEN + 4 + key.len() + 8;
    bytes[count_at..count_at + 4].copy_from_slice(&2u32.to_be_bytes());
    reseal(&mut bytes);
    assert_eq!(
        decode_manifest(&bytes).unwrap_err(),
        error(D::Body { at: count_at })
    );
    // A key length past the body.
    let mut bytes = encoded(&m);
    bytes[MANIFEST_HEADER_LEN..MANIFEST_HEADER_LEN + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    reseal(&mut bytes);
    assert_eq!(
        decode_manifest(&bytes).unwrap_err(),
        error(D::Body {
            at: MANIFEST_HEADER_LEN
        })
    );
}

#[test]
fn reserved_entry_bytes_must_be_zero() {
    let m = manifest();
    let mut bytes = encoded(&m);
    let last = bytes.len() - 1;
    bytes[last] = 1;
    reseal(&mut bytes);
    assert_eq!(
        decode_manifest(&bytes).unwrap_err(),
        error(D::RemoteEntry { entry: 2 })
    );
}

#[test]
fn object_names_round_trip_and_strays_are_other() {
    for kind in [FileKind::Segment, FileKind::Index, FileKind::TimeIndex] {
        let name = segment_object_name(u64::MAX, u64::MAX, kind);
        assert_eq!(
            RemoteObjectName::parse(&name),
            RemoteObjectName::Segment {
                id: u64::MAX,
                upload: u64::MAX,
                kind
            }
        );
    }
    assert_eq!(
        RemoteObjectName::parse(&manifest_object_name(u64::MAX)),
        RemoteObjectName::Manifest(u64::MAX)
    );
    for stray in [
        "manifest/00000000000000000001.tmp",
        "manifest/0000000000000000000x",
        "segments/00000000000000000001-00000000000000AB.log",
        "segments/00000000000000000001-000000000000000ab.log",
        "segments/00000000000000000001.log",
        "segments/00000000000000000001-00000000000000ab.log.tmp",
        "other/00000000000000000001",
        "manifest/99999999999999999999",
    ] {
        assert_eq!(
            RemoteObjectName::parse(stray),
            RemoteObjectName::Other,
            "{stray}"
        );
    }
}
