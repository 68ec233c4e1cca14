//! Where damage lies, as far as repair is concerned: the decision, from
//! facts a scan measured ([`TailFacts`]), of the [`DamageLocation`] that
//! [`crate::is_repairable_tail`] weighs — in particular, whether the
//! newest segment's damage runs into space a power loss left unwritten.
//!
//! File systems write a file's data back in 4 KiB blocks aligned to file
//! position ([`BLOCK_BYTES`]), the blocks of one write in any order, and may
//! make a file's size durable before its data: a block that never reached
//! the disk reads as zeros. A sync writes back every dirty block of the file
//! (it covers every earlier write), and a record header is never all zeros.
//! So zeros that fill the blocks where the walk of verified records puts a
//! header prove that the header's write, and every later one, was never
//! synced. `docs/storage-format.md` ("What recovery may repair") gives the
//! argument and its limits.
//!
//! Pure: no I/O, no file-system handle; every input is a value.

use felix_format::{CorruptionKind, RECORD_HEADER_LEN};

use crate::classify::DamageLocation;

/// The unit in which file systems persist a file's data: 4 KiB, aligned to
/// file position. Zeros shaped like these blocks are what a power loss
/// leaves where data did not reach the disk; a few stray zero bytes are not.
pub const BLOCK_BYTES: u64 = 4096;

/// Blocks after the newest segment's first damage that read as never
/// written, and the first record they prove was never synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UnwrittenBlocks {
    /// Byte where the zeros begin: a block boundary, or the damaged
    /// record's header when the zeros begin there.
    pub from: u64,
    /// Consecutive blocks from `from` on that read entirely as zeros (the
    /// first may begin at `from` inside a block, the last may end with the
    /// file).
    pub blocks: u64,
    /// Start of the first record the zeros overlap. Neither it nor any
    /// record after it was ever synced, so none was acknowledged: the
    /// damaged record itself, or the one the walk puts right after it.
    pub first_record: u64,
}

/// What a scan measured from a segment's first damage to the end of the
/// file: the facts the location decision reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TailFacts {
    /// Where the damaged record begins.
    pub(crate) position: u64,
    /// The file's length.
    pub(crate) file_len: u64,
    /// The first byte at or after `position` that is not zero (`file_len`
    /// when there is none).
    pub(crate) zeros_end: u64,
    /// Measured only for the newest segment, the one place a record can
    /// have been mid-write.
    pub(crate) newest: Option<NewestTail>,
}

/// What only the newest segment's damage is measured for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NewestTail {
    /// The damaged record's length, when its header verified (a
    /// `Truncated`, `RecordChecksum`, `OffsetOutOfOrder` or `OffsetOverflow`
    /// record): a length that can be trusted.
    pub(crate) record_len: Option<u64>,
    /// The first intact record (header CRC and record CRC valid) found byte
    /// by byte from the damaged record's end when its length is trusted
    /// (its own payload may hold bytes that look like a record), or from
    /// its second byte otherwise.
    pub(crate) intact_after: Option<u64>,
    /// Where the zeros that run to the end of the file begin (just after
    /// the last byte that is not zero; `position` at the earliest).
    pub(crate) trailing_zeros_from: u64,
    /// When `record_len` is known and the record ends within the file:
    /// where the zeros ending at the record's end begin (`position` at the
    /// earliest), and the first byte from its end on that is not zero.
    pub(crate) zeros_around_next: Option<(u64, u64)>,
}

impl TailFacts {
    /// Whether every byte from the damage to the end of the file is zero.
    pub(crate) fn all_zero(&self) -> bool {
        self.position < self.file_len && self.zeros_end >= self.file_len
    }

    /// Whether every byte of `[position, to)` is zero (an empty range is
    /// not).
    fn zero_from_damage_to(&self, to: u64) -> bool {
        let to = to.min(self.file_len);
        self.position < to && self.zeros_end >= to
    }
}

/// Where a segment's damage lies, with the facts that decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Located {
    pub(crate) location: DamageLocation,
    /// The first intact record after the damage, if any.
    pub(crate) intact_record_at: Option<u64>,
    pub(crate) unwritten: Option<UnwrittenBlocks>,
}

/// Decides where damage of `kind` lies: [`DamageLocation::Sealed`] outside
/// the newest segment; in the newest, from what follows it.
pub(crate) fn locate(kind: &CorruptionKind, tail: &TailFacts) -> Located {
    let Some(newest) = tail.newest else {
        return Located {
            location: DamageLocation::Sealed,
            intact_record_at: None,
            unwritten: None,
        };
    };
    let intact_at = newest.intact_after;
    if matches!(kind, CorruptionKind::Truncated { .. }) {
        // The file ends short of what a verified header promised: an
        // unfinished write. (No intact record can begin after the end.)
        return Located {
            location: match intact_at {
                Some(_) => DamageLocation::NewestFollowedByIntact,
                None => DamageLocation::NewestConfined,
            },
            intact_record_at: intact_at,
            unwritten: None,
        };
    }
    // Zeros where the damaged record's header should be (and, if an intact
    // record follows, zeros all the way to it) were never written: see
    // `DamageLocation::NewestUnwritten`.
    let header_end = tail.position.saturating_add(RECORD_HEADER_LEN as u64);
    let zeros_to = intact_at.map_or(header_end, |at| at.max(header_end));
    if tail.zero_from_damage_to(zeros_to) {
        return Located {
            location: DamageLocation::NewestUnwritten,
            intact_record_at: intact_at,
            unwritten: None,
        };
    }
    let unwritten = unwritten_blocks(kind, tail, &newest);
    let location = match unwritten {
        Some(u) if u.first_record == tail.position => DamageLocation::NewestUnwrittenBlocks,
        // `intact_after` is the first intact record, so one at or after
        // `first_record` means none lies between: what follows the damage
        // was never synced, and the damage itself is judged alone.
        Some(u) if intact_at.is_none_or(|at| at >= u.first_record) => {
            DamageLocation::NewestConfined
        }
        _ if intact_at.is_some() => DamageLocation::NewestFollowedByIntact,
        _ => DamageLocation::NewestConfined,
    };
    Located {
        location,
        intact_record_at: intact_at,
        unwritten,
    }
}

/// Finds zeros after the damage that prove records unsynced, preferring
/// the proof that reaches furthest back (to the damaged record itself).
///
/// The walk knows two header positions here: the damaged record's own,
/// and — when only its checksum failed, so its header (length and offset
/// included) verified — the next record's. Three shapes count:
///
/// 1. zeros from the damaged record's header to the block boundary at or
///    past its end (or to the end of the file): that header was never
///    written, nor anything after it;
/// 2. zeros from the next record's header to the block boundary at or past
///    its end (or to the end of the file): that record and everything after
///    it were never synced; when the zeros also reach back to a block
///    boundary inside the damaged record, its bytes there share those
///    never-written blocks, so it was not synced either;
/// 3. zeros from a block boundary inside the damaged record (its header,
///    or, when that verified, anywhere before its end) to the end of the
///    file: space whose size reached the disk ahead of its data.
fn unwritten_blocks(
    kind: &CorruptionKind,
    tail: &TailFacts,
    newest: &NewestTail,
) -> Option<UnwrittenBlocks> {
    let (at, file_len) = (tail.position, tail.file_len);
    let header_end = at.saturating_add(RECORD_HEADER_LEN as u64);
    // Only a bad record checksum leaves the header as the walk expects it
    // (checksum, offset and length bound all verified), so only then is
    // the next header's position known.
    let next = match kind {
        CorruptionKind::RecordChecksum { .. } => newest.record_len.map(|len| at + len),
        _ => None,
    };
    let record_end = next.unwrap_or(header_end);

    // (zeros begin, first record never synced, first byte not zero after).
    let mut found = None;
    // 1. The damaged record's own header.
    if header_end <= file_len {
        let end = block_end_after(header_end, file_len);
        if at < end && tail.zeros_end >= end {
            found = Some((at, at, tail.zeros_end));
        }
    }
    // 2. The next record's header.
    if found.is_none()
        && let Some(next) = next
        && next.saturating_add(RECORD_HEADER_LEN as u64) <= file_len
        && let Some((zeros_before, nonzero_after)) = newest.zeros_around_next
    {
        let end = block_end_after(next + RECORD_HEADER_LEN as u64, file_len);
        if next < end && nonzero_after >= end {
            let back = block_ceil(zeros_before);
            found = Some(if back > at && back < next {
                (back, at, nonzero_after)
            } else {
                (next, next, nonzero_after)
            });
        }
    }
    // 3. A zero run to the end of the file from inside the damaged record.
    if found.is_none_or(|(_, first, _)| first > at) {
        let run = block_ceil(newest.trailing_zeros_from);
        if run > at && run < file_len && run < record_end {
            found = Some((run, at, file_len));
        }
    }
    let (from, first_record, nonzero) = found?;
    Some(UnwrittenBlocks {
        from,
        blocks: zero_blocks(from, nonzero, file_len),
        first_record,
    })
}

/// Consecutive blocks from `from` (counting the part of its block from
/// `from` on) that lie wholly before `nonzero`, the first byte at or after
/// `from` that is not zero.
fn zero_blocks(from: u64, nonzero: u64, file_len: u64) -> u64 {
    let mut blocks = 0;
    let mut start = from;
    while start < file_len {
        let end = block_end_after(start + 1, file_len);
        if end > nonzero {
            break;
        }
        blocks += 1;
        start = end;
    }
    blocks
}

/// The first block boundary at or after `position`.
fn block_ceil(position: u64) -> u64 {
    position.div_ceil(BLOCK_BYTES).saturating_mul(BLOCK_BYTES)
}

/// The block boundary at or after `position`, or the end of the file if
/// that comes first.
fn block_end_after(position: u64, file_len: u64) -> u64 {
    block_ceil(position).min(file_len)
}

#[cfg(test)]
#[path = "location/tests.rs"]
mod tests;
