//! The clean-shutdown file codec: round trips of any consistent list, and
//! arbitrary bytes never panic.

use felix_format::SegmentExtent;
use felix_format::clean::{decode_clean_shutdown, encode_clean_shutdown};
use felix_format::side_file::{SideFileDefect as D, SideFileError, SideFileKind};

fn error(defect: D) -> SideFileError {
    SideFileError::new(SideFileKind::CleanShutdown, defect)
}

use proptest::prelude::*;

/// A consistent list: ascending ids, offsets continuing, lengths at least a
/// segment header.
fn segments() -> impl Strategy<Value = Vec<SegmentExtent>> {
    (
        any::<u32>(),
        any::<u32>(),
        prop::collection::vec((1u64..1_000, 0u64..10_000, 32u64..1 << 40), 1..64),
    )
        .prop_map(|(first_id, first_base, steps)| {
            let mut id = u64::from(first_id);
            let mut base = u64::from(first_base);
            steps
                .into_iter()
                .map(|(id_step, records, len)| {
                    let s = SegmentExtent {
                        id,
                        base_offset: base,
                        next_offset: base + records,
                        len,
                    };
                    id += id_step;
                    base += records;
                    s
                })
                .collect()
        })
}

proptest! {
    #[test]
    fn any_consistent_list_round_trips(list in segments()) {
        let mut bytes = Vec::new();
        encode_clean_shutdown(&list, &mut bytes).unwrap();
        prop_assert_eq!(bytes.len(), 16 + 32 * list.len());
        prop_assert_eq!(decode_clean_shutdown(&bytes).unwrap(), list);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_clean_shutdown(&bytes);
    }

    #[test]
    fn a_corrupted_valid_file_is_rejected(list in segments(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut bytes = Vec::new();
        encode_clean_shutdown(&list, &mut bytes).unwrap();
        let i = at.index(bytes.len());
        bytes[i] ^= 1 << bit;
        prop_assert_eq!(decode_clean_shutdown(&bytes), Err(flip_error(&bytes, i)));
    }
}

/// What a valid file with byte `i` flipped must be rejected as, field by
/// field in the decoder's order: magic, version, flags, count, then the CRC
/// (over bytes 0..12 and the entries), which every other flip fails.
fn flip_error(bytes: &[u8], i: usize) -> SideFileError {
    let u16_at = |at: usize| u16::from_be_bytes([bytes[at], bytes[at + 1]]);
    let u32_at = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    match i {
        0..4 => error(D::Magic {
            found: u32_at(0),
            expected: 0x464C_4353,
        }),
        4..6 => error(D::Version {
            found: u16_at(4),
            expected: 1,
        }),
        6..8 => error(D::Flags {
            found: u16_at(6),
            known: 0,
        }),
        8..12 => {
            let count = u32_at(8);
            let max = felix_format::clean::MAX_CLEAN_SHUTDOWN_ENTRIES as u32;
            if count == 0 || count > max {
                error(D::Count { count, max, min: 1 })
            } else {
                error(D::CountMismatch {
                    count,
                    expected: count as usize * 32,
                    found: bytes.len() - 16,
                })
            }
        }
        _ => {
            let mut crc = crc32fast::Hasher::new();
            crc.update(&bytes[..12]);
            crc.update(&bytes[16..]);
            error(D::Checksum {
                expected: u32_at(12),
                found: crc.finalize(),
            })
        }
    }
}
