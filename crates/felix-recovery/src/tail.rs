//! Measuring what follows a segment's first damage: the intact record a
//! byte-by-byte search finds after it, and where the zeros lie. The facts
//! go into a [`TailFacts`]; what they mean is [`crate::location`]'s to
//! decide. This module only reads.

use felix_format::{Damage, RECORD_HEADER_LEN, decode_record, decode_record_header};
use felix_io::IoError;
use felix_segment::{ChunkedReader, SegmentFile};

use crate::location::{NewestTail, TailFacts};

/// Measures the tail of `segment` (of `file_len` bytes) from `damage` on:
/// in full for the newest segment, only whether it is all zeros otherwise
/// (a sealed segment's damage is never repairable, so nothing else about
/// it decides anything, and a search of a large sealed tail would cost a
/// read of all of it).
pub(crate) fn measure(
    segment: &SegmentFile,
    file_len: u64,
    damage: &Damage,
    newest: bool,
) -> Result<TailFacts, IoError> {
    let at = damage.position;
    let mut reader = ChunkedReader::new(segment.file(), segment.path(), file_len);
    if !newest {
        return Ok(TailFacts {
            position: at,
            file_len,
            zeros_end: first_nonzero(&mut reader, at, file_len)?,
            newest: None,
        });
    }
    // A verified header's length is the writer's, so the record's own
    // payload is not searched: it may hold bytes that look like a record.
    let record_len = reader
        .get(at, RECORD_HEADER_LEN as u64)?
        .and_then(|bytes| decode_record_header(bytes).ok())
        .map(|header| header.encoded_len());
    let intact_after = find_intact_record(
        &mut reader,
        file_len,
        at.saturating_add(record_len.unwrap_or(1)),
    )?;
    let next = record_len
        .map(|len| at.saturating_add(len))
        .filter(|&next| next <= file_len);
    let zeros = zero_layout(&mut reader, at, file_len, next)?;
    Ok(TailFacts {
        position: at,
        file_len,
        zeros_end: zeros.first_nonzero,
        newest: Some(NewestTail {
            record_len,
            intact_after,
            trailing_zeros_from: zeros.trailing_zeros_from,
            zeros_around_next: zeros.around_next,
        }),
    })
}

/// Finds the first position at or after `from` where a whole, intact record
/// (header CRC and record CRC valid) begins, searching byte by byte.
///
/// Finding one proves that damage before it is not confined to the tail:
/// something complete was written after it, so it cannot be an unfinished
/// write.
fn find_intact_record(
    reader: &mut ChunkedReader<'_>,
    file_len: u64,
    from: u64,
) -> Result<Option<u64>, IoError> {
    let mut position = from;
    while position.saturating_add(RECORD_HEADER_LEN as u64) <= file_len {
        let window = reader.window(position, RECORD_HEADER_LEN as u64)?;
        let mut candidate = None;
        let mut examined = 0u64;
        for (i, slice) in window.windows(RECORD_HEADER_LEN).enumerate() {
            examined = i as u64 + 1;
            // An all-zero header never verifies (its CRC field would have to
            // equal the CRC of twenty zero bytes, which is not zero), and
            // zero runs are the common tail shape: skip them without hashing.
            if slice.iter().all(|&b| b == 0) {
                continue;
            }
            if let Ok(header) = decode_record_header(slice) {
                candidate = Some((position + i as u64, header.encoded_len()));
                break;
            }
        }
        match candidate {
            Some((at, len)) => {
                if let Some(bytes) = reader.get(at, len)?
                    && decode_record(bytes, None).is_ok()
                {
                    return Ok(Some(at));
                }
                position = at + 1;
            }
            None => position += examined.max(1),
        }
    }
    Ok(None)
}

/// Where the zeros lie in `[from, file_len)`.
struct ZeroLayout {
    /// The first byte that is not zero (`file_len` when none is).
    first_nonzero: u64,
    /// Just after the last byte that is not zero (`from` when none is).
    trailing_zeros_from: u64,
    /// For a position `next` in the range: just after the last byte before
    /// it that is not zero (`from` at the earliest), and the first byte at
    /// or after it that is not zero (`file_len` when none is).
    around_next: Option<(u64, u64)>,
}

/// One pass over `[from, file_len)`.
fn zero_layout(
    reader: &mut ChunkedReader<'_>,
    from: u64,
    file_len: u64,
    next: Option<u64>,
) -> Result<ZeroLayout, IoError> {
    let mut first_nonzero = None;
    let mut last_nonzero = None;
    let mut last_nonzero_before_next = None;
    let mut first_nonzero_from_next = None;
    let mut position = from;
    while position < file_len {
        let window = reader.window(position, 1)?;
        let take = usize::try_from(file_len - position)
            .unwrap_or(usize::MAX)
            .min(window.len());
        let Some(bytes) = window.get(..take).filter(|b| !b.is_empty()) else {
            break;
        };
        let nonzero = |b: &u8| *b != 0;
        if first_nonzero.is_none() {
            first_nonzero = bytes.iter().position(nonzero).map(|i| position + i as u64);
        }
        if let Some(i) = bytes.iter().rposition(nonzero) {
            last_nonzero = Some(position + i as u64);
        }
        if let Some(next) = next {
            let split = usize::try_from(next.saturating_sub(position))
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            let (before, after) = bytes.split_at(split);
            if let Some(i) = before.iter().rposition(nonzero) {
                last_nonzero_before_next = Some(position + i as u64);
            }
            if first_nonzero_from_next.is_none()
                && let Some(i) = after.iter().position(nonzero)
            {
                first_nonzero_from_next = Some(position + (split + i) as u64);
            }
        }
        position += bytes.len() as u64;
    }
    Ok(ZeroLayout {
        first_nonzero: first_nonzero.unwrap_or(file_len),
        trailing_zeros_from: last_nonzero.map_or(from, |p| p + 1),
        around_next: next.map(|_| {
            (
                last_nonzero_before_next.map_or(from, |p| p + 1),
                first_nonzero_from_next.unwrap_or(file_len),
            )
        }),
    })
}

/// The first byte at or after `from` that is not zero (`file_len` when
/// none is), reading no further than it.
fn first_nonzero(reader: &mut ChunkedReader<'_>, from: u64, file_len: u64) -> Result<u64, IoError> {
    let mut position = from;
    while position < file_len {
        let window = reader.window(position, 1)?;
        let take = usize::try_from(file_len - position)
            .unwrap_or(usize::MAX)
            .min(window.len());
        let Some(bytes) = window.get(..take).filter(|b| !b.is_empty()) else {
            break;
        };
        if let Some(i) = bytes.iter().position(|&b| b != 0) {
            return Ok(position + i as u64);
        }
        position += bytes.len() as u64;
    }
    Ok(file_len)
}
