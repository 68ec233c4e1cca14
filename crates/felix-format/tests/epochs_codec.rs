//! The epochs file codec: layout, round trip and every reason bytes fail.

use felix_format::epochs::{EpochEntry, MAX_EPOCH_ENTRIES, decode_epochs, encode_epochs};
use felix_format::side_file::{SideFileDefect as D, SideFileError, SideFileKind};
use proptest::prelude::*;

fn error(defect: D) -> SideFileError {
    SideFileError::new(SideFileKind::Epochs, defect)
}

fn encoded(entries: &[EpochEntry]) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_epochs(entries, &mut bytes).unwrap();
    bytes
}

#[rustfmt::skip]
#[test]
fn encode_epochs_has_the_spec_layout() {
    let bytes = encoded(&[EpochEntry { generation: 3, start_offset: 0x10 }]);
    let crc = crc32fast::hash(&bytes[12..]).to_be_bytes();
    assert_eq!(bytes, [
        0x46, 0x4C, 0x45, 0x50,                         // magic "FLEP"
        0x00, 0x01,                                     // version 1
        0x00, 0x01,                                     // count
        crc[0], crc[1], crc[2], crc[3],                 // body_crc
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, // generation
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, // start_offset
    ]);
}

#[test]
fn decode_epochs_reports_each_reason() {
    let good = encoded(&[EpochEntry {
        generation: 1,
        start_offset: 0,
    }]);
    assert_eq!(
        decode_epochs(&good[..11]).unwrap_err(),
        error(D::Short {
            len: 11,
            header_len: 12
        })
    );

    let mut bad = good.clone();
    bad[0] = b'X';
    assert_eq!(
        decode_epochs(&bad).unwrap_err(),
        error(D::Magic {
            found: 0x584C_4550,
            expected: 0x464C_4550
        })
    );

    let mut bad = good.clone();
    bad[5] = 9;
    assert_eq!(
        decode_epochs(&bad).unwrap_err(),
        error(D::Version {
            found: 9,
            expected: 1
        })
    );

    assert_eq!(
        decode_epochs(&good[..27]).unwrap_err(),
        error(D::CountMismatch {
            count: 1,
            expected: 16,
            found: 15
        })
    );

    let mut bad = good.clone();
    bad[6..8].copy_from_slice(&u16::MAX.to_be_bytes());
    assert_eq!(
        decode_epochs(&bad).unwrap_err(),
        error(D::Count {
            count: u32::from(u16::MAX),
            max: MAX_EPOCH_ENTRIES as u32,
            min: 0
        })
    );

    let mut bad = good.clone();
    bad[27] ^= 1;
    assert_eq!(decode_epochs(&bad).unwrap_err(), flip_error(&bad, 27));
    assert!(matches!(flip_error(&bad, 27).defect, D::Checksum { .. }));
}

/// What a valid file with byte `i` flipped must be rejected as, field by
/// field in the decoder's order: magic, version, count (too many, or not
/// the entries present), then the body CRC, which the CRC field itself and
/// every entry byte fail.
fn flip_error(bytes: &[u8], i: usize) -> SideFileError {
    let u16_at = |at: usize| u16::from_be_bytes([bytes[at], bytes[at + 1]]);
    match i {
        0..4 => error(D::Magic {
            found: u32::from_be_bytes(bytes[..4].try_into().unwrap()),
            expected: 0x464C_4550,
        }),
        4..6 => error(D::Version {
            found: u16_at(4),
            expected: 1,
        }),
        6..8 if usize::from(u16_at(6)) > MAX_EPOCH_ENTRIES => error(D::Count {
            count: u32::from(u16_at(6)),
            max: MAX_EPOCH_ENTRIES as u32,
            min: 0,
        }),
        6..8 => error(D::CountMismatch {
            count: u32::from(u16_at(6)),
            expected: usize::from(u16_at(6)) * 16,
            found: bytes.len() - 12,
        }),
        _ => error(D::Checksum {
            expected: u32::from_be_bytes(bytes[8..12].try_into().unwrap()),
            found: crc32fast::hash(&bytes[12..]),
        }),
    }
}

#[test]
fn encode_epochs_over_the_cap_is_refused() {
    let entries = vec![
        EpochEntry {
            generation: 0,
            start_offset: 0
        };
        MAX_EPOCH_ENTRIES + 1
    ];
    let mut out = Vec::new();
    assert_eq!(
        encode_epochs(&entries, &mut out),
        Err(error(D::Count {
            count: 4097,
            max: MAX_EPOCH_ENTRIES as u32,
            min: 0
        }))
    );
    assert!(out.is_empty());
}

proptest! {
    #[test]
    fn epochs_round_trip(raw in proptest::collection::vec((any::<u64>(), any::<u64>()), 0..64)) {
        let entries: Vec<_> = raw.into_iter().map(|(generation, start_offset)| EpochEntry { generation, start_offset }).collect();
        let bytes = encoded(&entries);
        let decoded: Vec<_> = decode_epochs(&bytes).unwrap().collect();
        prop_assert_eq!(decoded, entries);
    }

    #[test]
    fn decode_epochs_any_single_bit_flip_is_detected(count in 1usize..8, bit_seed in any::<usize>()) {
        let entries: Vec<_> = (0..count as u64).map(|g| EpochEntry { generation: g, start_offset: g * 10 }).collect();
        let bytes = encoded(&entries);
        let bit = bit_seed % (bytes.len() * 8);
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        prop_assert_eq!(decode_epochs(&flipped).err(), Some(flip_error(&flipped, bit / 8)));
    }

    #[test]
    fn decode_epochs_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
        if let Ok(entries) = decode_epochs(&bytes) {
            prop_assert_eq!(entries.len() * 16 + 12, bytes.len());
        }
    }
}
