//! Operator-facing text of every corruption kind, reviewed through snapshots.

use felix_format::{CorruptionKind, CorruptionSite, MAX_PAYLOAD_BYTES, WIRE_FRAME_MAGIC};

#[test]
fn corruption_kind_display_text_for_every_variant() {
    let kinds = [
        CorruptionKind::SegmentMagic {
            found: WIRE_FRAME_MAGIC,
        },
        CorruptionKind::SegmentMagic { found: 0 },
        CorruptionKind::SegmentMagic { found: 0xDEAD_BEEF },
        CorruptionKind::SegmentVersion { found: 1 },
        CorruptionKind::SegmentVersion { found: 3 },
        CorruptionKind::SegmentFlags { found: 0x0100 },
        CorruptionKind::SegmentHeaderChecksum {
            expected: 0x7A09_E5B1,
            found: 0x1234_5678,
        },
        CorruptionKind::SegmentReserved { found: 1 },
        CorruptionKind::Truncated {
            needed: 128,
            available: 118,
        },
        CorruptionKind::RecordHeaderChecksum {
            expected: 0,
            found: 0x2144_DF1C,
        },
        CorruptionKind::RecordChecksum {
            expected: 1,
            found: 2,
        },
        CorruptionKind::RecordTooLarge {
            payload_len: u32::MAX,
            max: MAX_PAYLOAD_BYTES,
        },
        CorruptionKind::OffsetOutOfOrder {
            expected: 10,
            found: 12,
        },
        CorruptionKind::OffsetOverflow { found: u64::MAX },
        CorruptionKind::IndexMagic {
            found: u32::from_be_bytes(*b"FLSG"),
        },
        CorruptionKind::IndexVersion { found: 7 },
        CorruptionKind::IndexFlags { found: 1 },
        CorruptionKind::IndexBaseOffset {
            expected: 511,
            found: 0,
        },
        CorruptionKind::IndexEntryOutOfOrder {
            entry: 3,
            offset: 9,
            position: 31,
        },
    ];
    let text: String = kinds
        .iter()
        .map(|k| format!("{}: {k}\n", k.name()))
        .collect();
    insta::assert_snapshot!(text);
}

#[test]
fn corruption_site_display_names_shard_segment_and_byte() {
    let site = CorruptionSite::new("acme_default_orders_0-0d3aed4b998d2798", 3, 65_498);
    insta::assert_snapshot!(site.to_string());
}
