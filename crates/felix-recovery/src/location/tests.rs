//! The location decision as a table: facts in, location and never-written
//! blocks out. Each row is one shape the decision distinguishes.

use super::*;
use DamageLocation::{
    NewestConfined, NewestFollowedByIntact, NewestUnwritten, NewestUnwrittenBlocks, Sealed,
};

const HEADER_CRC: CorruptionKind = CorruptionKind::RecordHeaderChecksum {
    expected: 1,
    found: 2,
};
const RECORD_CRC: CorruptionKind = CorruptionKind::RecordChecksum {
    expected: 1,
    found: 2,
};
const TORN: CorruptionKind = CorruptionKind::Truncated {
    needed: 500,
    available: 100,
};

/// The newest segment's tail: damage at `position` of a `file_len`-byte
/// file, the first non-zero byte at or after it, and the rest.
fn newest(position: u64, file_len: u64, zeros_end: u64, rest: NewestTail) -> TailFacts {
    TailFacts {
        position,
        file_len,
        zeros_end,
        newest: Some(rest),
    }
}

fn rest(
    record_len: Option<u64>,
    intact_after: Option<u64>,
    trailing_zeros_from: u64,
    zeros_around_next: Option<(u64, u64)>,
) -> NewestTail {
    NewestTail {
        record_len,
        intact_after,
        trailing_zeros_from,
        zeros_around_next,
    }
}

fn blocks(from: u64, blocks: u64, first_record: u64) -> Option<UnwrittenBlocks> {
    Some(UnwrittenBlocks {
        from,
        blocks,
        first_record,
    })
}

/// One row: what it shows, the damage, the facts, and the decision
/// (location, intact record, never-written blocks).
type Row = (
    &'static str,
    CorruptionKind,
    TailFacts,
    DamageLocation,
    Option<u64>,
    Option<UnwrittenBlocks>,
);

#[test]
fn locate_table() {
    #[rustfmt::skip]
    let table: &[Row] = &[
        ("a sealed segment's damage is sealed, whatever follows",
         RECORD_CRC, TailFacts { position: 100, file_len: 9000, zeros_end: 9000, newest: None },
         Sealed, None, None),
        ("a torn tail with nothing after it",
         TORN, newest(100, 200, 150, rest(Some(500), None, 200, None)),
         NewestConfined, None, None),
        ("a torn write followed by an intact record is not confined",
         TORN, newest(100, 9000, 150, rest(Some(500), Some(700), 9000, None)),
         NewestFollowedByIntact, Some(700), None),
        ("zeros where the header should be, to the end",
         HEADER_CRC, newest(4096, 8192, 8192, rest(None, None, 4096, None)),
         NewestUnwritten, None, None),
        ("zeros from the header all the way to an intact record",
         HEADER_CRC, newest(4096, 9000, 6000, rest(None, Some(6000), 9000, None)),
         NewestUnwritten, Some(6000), None),
        ("zeros that stop short of the intact record after them",
         HEADER_CRC, newest(4096, 9000, 5000, rest(None, Some(6000), 9000, None)),
         NewestFollowedByIntact, Some(6000), None),
        ("rot with nothing after it",
         HEADER_CRC, newest(100, 9000, 101, rest(None, None, 9000, None)),
         NewestConfined, None, None),
        // Shape 1: the header's own block never written (zeros from the
        // header to its block's end, the header not all zeros itself only
        // because the zeros begin inside it — here they begin at it).
        ("the damaged header's blocks never written, an intact record far after",
         HEADER_CRC, newest(4000, 20000, 8192, rest(None, Some(12000), 20000, None)),
         NewestUnwrittenBlocks, Some(12000), blocks(4000, 2, 4000)),
        // Shape 2, the zeros reaching back into the damaged record: its
        // bytes from 4096 on share the next header's never-written block.
        ("a bad checksum whose record's last block and the next header never reached the disk",
         RECORD_CRC, newest(4000, 10000, 4001, rest(Some(300), None, 9999, Some((4050, 8192)))),
         NewestUnwrittenBlocks, None, blocks(4096, 1, 4000)),
        // Shape 2, the zeros beginning after the last block boundary inside
        // the record: only the records from the next one on were unsynced.
        ("a bad checksum followed by a never-written next header",
         RECORD_CRC, newest(100, 10000, 101, rest(Some(200), None, 9999, Some((250, 8192)))),
         NewestConfined, None, blocks(300, 2, 300)),
        ("the same, with an intact record after the never-written blocks",
         RECORD_CRC, newest(100, 10000, 101, rest(Some(200), Some(9000), 9999, Some((250, 8192)))),
         NewestConfined, Some(9000), blocks(300, 2, 300)),
        // Shape 3: zeros from a block boundary inside the damaged header to
        // the end of the file (its size reached the disk, its data did not).
        ("zeros from a block boundary inside the header to the end",
         HEADER_CRC, newest(4090, 8192, 4094, rest(None, None, 4095, None)),
         NewestUnwrittenBlocks, None, blocks(4096, 1, 4090)),
        ("zeros to the end that begin past the header prove nothing about it",
         HEADER_CRC, newest(4000, 9000, 4001, rest(None, None, 4200, None)),
         NewestConfined, None, None),
        // A verified header whose offset is wrong: zeros after it do not
        // say where the next header is (only a checksum failure does).
        ("an out-of-order offset followed by zeros",
         CorruptionKind::OffsetOutOfOrder { expected: 1, found: 9 },
         newest(100, 10000, 101, rest(Some(200), None, 300, Some((250, 10000)))),
         NewestConfined, None, None),
    ];
    for (name, kind, tail, location, intact, unwritten) in table {
        assert_eq!(
            locate(kind, tail),
            Located {
                location: *location,
                intact_record_at: *intact,
                unwritten: *unwritten,
            },
            "{name}"
        );
    }
}

#[test]
fn tail_all_zero_needs_every_byte_from_the_damage_on() {
    let tail = |zeros_end| TailFacts {
        position: 10,
        file_len: 100,
        zeros_end,
        newest: None,
    };
    assert!(tail(100).all_zero());
    assert!(!tail(99).all_zero());
    assert!(!tail(10).all_zero());
}

#[test]
fn zero_blocks_counts_whole_blocks_before_the_first_nonzero_byte() {
    // (from, first non-zero, file length) → blocks
    #[rustfmt::skip]
    let table = [
        (0,    4096,  8192,  1),
        (0,    4095,  8192,  0),
        (100,  4096,  8192,  1), // the part of the first block from `from` on
        (100,  8192,  8192,  2),
        (4096, 10000, 10000, 2), // the last block ends with the file
        (4096, 9999,  10000, 1),
    ];
    for (from, nonzero, file_len, expected) in table {
        assert_eq!(
            zero_blocks(from, nonzero, file_len),
            expected,
            "{from} {nonzero} {file_len}"
        );
    }
}
