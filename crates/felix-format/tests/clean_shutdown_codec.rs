//! The clean-shutdown file codec: round trips of any consistent list, and
//! arbitrary bytes never panic.

use felix_format::SegmentExtent;
use felix_format::clean::{decode_clean_shutdown, encode_clean_shutdown};
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
        prop_assert!(decode_clean_shutdown(&bytes).is_err());
    }
}
