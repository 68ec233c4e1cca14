//! Where the newest segment's first damage lies, as far as repair is
//! concerned — in particular, whether it runs into space a power loss left
//! unwritten.
//!
//! File systems write a file's data back in 4 KiB blocks aligned to file
//! position ([`BLOCK_BYTES`]), the blocks of one write in any order, and may
//! make a file's size durable before its data: a block that never reached
//! the disk reads as zeros. A sync writes back every dirty block of the file
//! (it covers every earlier write), and a record header is never all zeros.
//! So zeros that fill the blocks where the walk of verified records puts a
//! header prove that the header's write, and every later one, was never
//! synced. `docs/storage-format.md` ("What recovery may repair") gives the
//! argument and its limits; [`crate::classify`] decides what each location
//! allows. This module only reads.

use felix_format::{CorruptionKind, RECORD_HEADER_LEN, decode_record_header};
use felix_io::IoError;
use felix_segment::SegmentFile;

use crate::chunked::ChunkedReader;
use crate::classify::DamageLocation;
use crate::scan::{Damage, find_intact_record, range_is_zero, search_start};

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

/// Where the newest segment's damage lies, with the facts that decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Located {
    pub(crate) location: DamageLocation,
    /// The first intact record after the damage, if any.
    pub(crate) intact_record_at: Option<u64>,
    pub(crate) unwritten: Option<UnwrittenBlocks>,
}

/// Classifies the location of `damage`, the first damage in the newest
/// segment (of `file_len` bytes).
pub(crate) fn locate_newest(
    segment: &SegmentFile,
    file_len: u64,
    damage: &Damage,
) -> Result<Located, IoError> {
    let from = search_start(damage, segment, file_len)?;
    let intact_at = find_intact_record(segment, file_len, from)?;
    if matches!(damage.kind, CorruptionKind::Truncated { .. }) {
        // The file ends short of what a verified header promised: an
        // unfinished write. (No intact record can begin after the end.)
        return Ok(Located {
            location: match intact_at {
                Some(_) => DamageLocation::NewestFollowedByIntact,
                None => DamageLocation::NewestConfined,
            },
            intact_record_at: intact_at,
            unwritten: None,
        });
    }
    // Zeros where the damaged record's header should be (and, if an intact
    // record follows, zeros all the way to it) were never written: see
    // `DamageLocation::NewestUnwritten`.
    let header_end = damage.position.saturating_add(RECORD_HEADER_LEN as u64);
    let zeros_to = intact_at.map_or(header_end, |at| at.max(header_end));
    if range_is_zero(segment, file_len, damage.position, zeros_to)? {
        return Ok(Located {
            location: DamageLocation::NewestUnwritten,
            intact_record_at: intact_at,
            unwritten: None,
        });
    }
    let unwritten = unwritten_blocks(segment, file_len, damage)?;
    let location = match unwritten {
        Some(u) if u.first_record == damage.position => DamageLocation::NewestUnwrittenBlocks,
        // `find_intact_record` returns the first intact record, so one at or
        // after `first_record` means none lies between: what follows the
        // damage was never synced, and the damage itself is judged alone.
        Some(u) if intact_at.is_none_or(|at| at >= u.first_record) => {
            DamageLocation::NewestConfined
        }
        _ if intact_at.is_some() => DamageLocation::NewestFollowedByIntact,
        _ => DamageLocation::NewestConfined,
    };
    Ok(Located {
        location,
        intact_record_at: intact_at,
        unwritten,
    })
}

/// Finds zeros after `damage` that prove records unsynced, preferring the
/// proof that reaches furthest back (to the damaged record itself).
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
    segment: &SegmentFile,
    file_len: u64,
    damage: &Damage,
) -> Result<Option<UnwrittenBlocks>, IoError> {
    let at = damage.position;
    let header_end = at.saturating_add(RECORD_HEADER_LEN as u64);
    let mut reader = ChunkedReader::new(segment.file(), segment.path(), file_len);
    // Only a bad record checksum leaves the header as the walk expects it
    // (checksum, offset and length bound all verified), so only then is
    // the next header's position known.
    let next = match damage.kind {
        CorruptionKind::RecordChecksum { .. } => reader
            .get(at, RECORD_HEADER_LEN as u64)?
            .and_then(|bytes| decode_record_header(bytes).ok())
            .map(|h| at.saturating_add(h.encoded_len())),
        _ => None,
    };
    let record_end = next.unwrap_or(header_end);

    let mut found = None;
    // 1. The damaged record's own header.
    if header_end <= file_len && is_zero(&mut reader, at, block_end_after(header_end, file_len))? {
        found = Some((at, at));
    }
    // 2. The next record's header.
    if found.is_none()
        && let Some(next) = next
        && next.saturating_add(RECORD_HEADER_LEN as u64) <= file_len
        && is_zero(
            &mut reader,
            next,
            block_end_after(next + RECORD_HEADER_LEN as u64, file_len),
        )?
    {
        let back = block_ceil(zero_run_start(&mut reader, at, next)?);
        found = Some(if back > at && back < next {
            (back, at)
        } else {
            (next, next)
        });
    }
    // 3. A zero run to the end of the file from inside the damaged record.
    if found.is_none_or(|(_, first)| first > at) {
        let run = block_ceil(zero_run_start(&mut reader, at, file_len)?);
        if run > at && run < file_len && run < record_end {
            found = Some((run, at));
        }
    }
    let Some((from, first_record)) = found else {
        return Ok(None);
    };
    let blocks = count_zero_blocks(&mut reader, from, file_len)?;
    Ok(Some(UnwrittenBlocks {
        from,
        blocks,
        first_record,
    }))
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

/// Whether every byte in `[from, to)` is zero (an empty range is not).
fn is_zero(reader: &mut ChunkedReader<'_>, from: u64, to: u64) -> Result<bool, IoError> {
    if from >= to {
        return Ok(false);
    }
    Ok(zero_run_start(reader, from, to)? == from)
}

/// Where the run of zeros that ends at `to` begins, looking no further back
/// than `from`: `to` when the byte before it is not zero, `from` when the
/// whole range is zero.
fn zero_run_start(reader: &mut ChunkedReader<'_>, from: u64, to: u64) -> Result<u64, IoError> {
    let mut start = from;
    let mut position = from;
    while position < to {
        let window = reader.window(position, 1)?;
        let take = usize::try_from(to - position)
            .unwrap_or(usize::MAX)
            .min(window.len());
        let Some(bytes) = window.get(..take).filter(|b| !b.is_empty()) else {
            break;
        };
        if let Some(last) = bytes.iter().rposition(|&b| b != 0) {
            start = position + last as u64 + 1;
        }
        position += bytes.len() as u64;
    }
    Ok(start)
}

/// Consecutive blocks from `from` (counting the part of its block from
/// `from` on) that are all zeros up to the end of the file.
fn count_zero_blocks(
    reader: &mut ChunkedReader<'_>,
    from: u64,
    file_len: u64,
) -> Result<u64, IoError> {
    let mut blocks = 0;
    let mut start = from;
    while start < file_len {
        let end = block_end_after(start + 1, file_len);
        if !is_zero(reader, start, end)? {
            break;
        }
        blocks += 1;
        start = end;
    }
    Ok(blocks)
}
