//! Bytes of a `*.timeindex` file: where a sealed segment's running maximum
//! timestamp grows, so that a lookup by time reads a few records instead of
//! the whole segment.
//!
//! This file is an addition of felix storage to format v2 (see
//! `docs/storage-format.md`); the v2 index format is frozen, so the time
//! index is a companion file with its own magic and version. The reference
//! implementation writes none, and a shard without one answers lookups by
//! time all the same (its time index is built from the records).
//!
//! Layout (big-endian): magic `FLTI` (4), version (2), flags (2, zero), the
//! extent the file describes — `base_offset` (8), `next_offset` (8),
//! `segment_len` (8) — then `count` (4) and `crc` (4), the CRC-32 of bytes
//! 0..36 followed by the entries; then `count` × `{ timestamp_micros u64,
//! offset u64 }`.
//!
//! An entry `(T, O)` claims that the largest timestamp among the segment's
//! records at offsets up to and including `O` is `T`: the running maximum
//! at `O`. Entries ascend strictly in both fields; the first is the
//! segment's first record, and the last entry's timestamp is the largest
//! in the segment. So a record with a timestamp of at least `t` lies after
//! the last entry whose timestamp is below `t` and at or before the first
//! entry whose timestamp reaches `t`.
//!
//! Decoding checks everything the bytes alone can prove: length, magic,
//! version, flags, the extent's plausibility, the count against the
//! records the extent holds (before anything is sized from it), the body's
//! length, the CRC, and the entries' order and range. Whether the claims
//! hold is a question for the records (`felix-segment` walks them); whether
//! the file describes its segment as it is now, for the reader comparing
//! the extent.

use alloc::vec::Vec;

use crate::bytes_be::{u16_at, u32_at, u64_at};
use crate::checksum::{crc32, crc32_continue};
use crate::{RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};

/// Magic of a time index file (`*.timeindex`): ASCII `FLTI`, "Felix Time
/// Index".
pub const TIME_INDEX_MAGIC: u32 = u32::from_be_bytes(*b"FLTI");
/// Version of the time index layout; independent of the segment
/// [`crate::FORMAT_VERSION`], which it does not change.
pub const TIME_INDEX_VERSION: u16 = 1;
/// Length of the time index header.
pub const TIME_INDEX_HEADER_LEN: usize = 40;
/// Length of one time index entry.
pub const TIME_INDEX_ENTRY_LEN: usize = 16;

/// The segment a time index describes: its first offset, the offset after
/// its last record, and the bytes of header and records. A reader uses the
/// file only for a segment with exactly this extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimeIndexHeader {
    /// The segment's base offset.
    pub base_offset: u64,
    /// One past its last record's offset.
    pub next_offset: u64,
    /// Bytes of its header and records.
    pub segment_len: u64,
}

impl TimeIndexHeader {
    /// Records the extent holds.
    pub const fn records(&self) -> u64 {
        self.next_offset.saturating_sub(self.base_offset)
    }
}

/// One entry: the running maximum timestamp at `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimeIndexEntry {
    /// The largest timestamp among the records at offsets up to `offset`.
    pub timestamp_micros: u64,
    /// The offset that maximum is taken at.
    pub offset: u64,
}

/// Why bytes are not a valid time index file (or entries cannot be written
/// as one).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimeIndexDecodeError {
    /// Fewer bytes than the 40-byte header.
    #[error("time index is {len} bytes, shorter than its 40-byte header")]
    Short {
        /// Bytes present.
        len: usize,
    },
    /// The file does not start with `FLTI`.
    #[error("time index magic is {found:#010x}, expected 0x464c5449 (FLTI)")]
    Magic {
        /// The four bytes found, big-endian.
        found: u32,
    },
    /// A version this build does not read.
    #[error("time index version {found} is not supported (this build reads version 1)")]
    Version {
        /// The version found.
        found: u16,
    },
    /// Flags this build does not know.
    #[error("time index flags are {found:#06x}, expected 0")]
    Flags {
        /// The flags found.
        found: u16,
    },
    /// The extent cannot be a segment's: its next offset is below its base,
    /// or it is shorter than a segment header plus a record header per
    /// record.
    #[error(
        "time index describes offsets {base_offset}..{next_offset} in {segment_len} bytes, which no segment holds"
    )]
    Extent {
        /// The base offset in the header.
        base_offset: u64,
        /// The next offset in the header.
        next_offset: u64,
        /// The segment length in the header.
        segment_len: u64,
    },
    /// More entries than the extent has records, or none for records.
    #[error("time index claims {count} entries for a segment of {records} records")]
    Count {
        /// The count in the header.
        count: u32,
        /// Records the extent holds.
        records: u64,
    },
    /// The body's length is not `count` whole entries.
    #[error(
        "time index claims {count} entries ({expected} bytes) but holds {found} bytes of entries"
    )]
    CountMismatch {
        /// The count in the header.
        count: u32,
        /// Body bytes `count` implies.
        expected: usize,
        /// Body bytes present.
        found: usize,
    },
    /// The CRC does not match.
    #[error("time index checksum mismatch: stored {expected:#010x}, computed {found:#010x}")]
    Checksum {
        /// The CRC stored in the header.
        expected: u32,
        /// The CRC computed.
        found: u32,
    },
    /// An entry is out of order or outside the extent: the first is not the
    /// segment's first record, or one does not ascend from the one before
    /// it in both timestamp and offset, or lies at or past the next offset.
    #[error(
        "time index entry {entry} (timestamp {timestamp_micros}, offset {offset}) is out of order or outside the segment"
    )]
    Entry {
        /// Its position in the file, from 0.
        entry: u64,
        /// Its timestamp.
        timestamp_micros: u64,
        /// Its offset.
        offset: u64,
    },
}

impl TimeIndexDecodeError {
    /// A stable name for the kind of damage, for reports and scripts.
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Short { .. } => "TimeIndexShort",
            Self::Magic { .. } => "TimeIndexMagic",
            Self::Version { .. } => "TimeIndexVersion",
            Self::Flags { .. } => "TimeIndexFlags",
            Self::Extent { .. } => "TimeIndexExtent",
            Self::Count { .. } => "TimeIndexCount",
            Self::CountMismatch { .. } => "TimeIndexCountMismatch",
            Self::Checksum { .. } => "TimeIndexChecksum",
            Self::Entry { .. } => "TimeIndexEntry",
        }
    }
}

/// A decoded time index, borrowing the file's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeIndexView<'a> {
    /// The extent it describes.
    pub header: TimeIndexHeader,
    entries: &'a [u8],
}

impl<'a> TimeIndexView<'a> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len() / TIME_INDEX_ENTRY_LEN
    }

    /// True when there are no entries (a segment without records).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `i`-th entry, if any.
    pub fn get(&self, i: usize) -> Option<TimeIndexEntry> {
        let start = i.checked_mul(TIME_INDEX_ENTRY_LEN)?;
        self.entries
            .get(start..)?
            .first_chunk::<TIME_INDEX_ENTRY_LEN>()
            .map(decode_entry)
    }

    /// The entries in file order.
    pub fn iter(&self) -> impl Iterator<Item = TimeIndexEntry> + 'a {
        self.entries
            .chunks_exact(TIME_INDEX_ENTRY_LEN)
            .filter_map(|c| c.first_chunk::<TIME_INDEX_ENTRY_LEN>().map(decode_entry))
    }

    /// The largest timestamp in the segment (the last entry's), if it holds
    /// a record.
    pub fn max_timestamp_micros(&self) -> Option<u64> {
        self.len()
            .checked_sub(1)
            .and_then(|i| self.get(i))
            .map(|e| e.timestamp_micros)
    }
}

fn decode_entry(raw: &[u8; TIME_INDEX_ENTRY_LEN]) -> TimeIndexEntry {
    TimeIndexEntry {
        timestamp_micros: u64_at(raw, 0),
        offset: u64_at(raw, 8),
    }
}

/// Appends the time index file describing `header` with `entries` to
/// `out`.
///
/// Fails, writing nothing, when the file would not decode: no reader should
/// ever be handed a file that [`decode_time_index`] rejects.
///
/// ```
/// use felix_format::time_index::{
///     TimeIndexEntry, TimeIndexHeader, decode_time_index, encode_time_index,
/// };
///
/// let header = TimeIndexHeader { base_offset: 10, next_offset: 13, segment_len: 32 + 3 * 30 };
/// // Timestamps 50, 40, 70: the running maximum is 50, 50, 70.
/// let entries = [
///     TimeIndexEntry { timestamp_micros: 50, offset: 10 },
///     TimeIndexEntry { timestamp_micros: 70, offset: 12 },
/// ];
/// let mut bytes = Vec::new();
/// encode_time_index(&header, &entries, &mut bytes)?;
/// assert_eq!(bytes.len(), 40 + 2 * 16);
/// let view = decode_time_index(&bytes)?;
/// assert_eq!(view.header, header);
/// assert_eq!(view.iter().collect::<Vec<_>>(), entries);
/// assert_eq!(view.max_timestamp_micros(), Some(70));
/// # Ok::<(), felix_format::time_index::TimeIndexDecodeError>(())
/// ```
pub fn encode_time_index(
    header: &TimeIndexHeader,
    entries: &[TimeIndexEntry],
    out: &mut Vec<u8>,
) -> Result<(), TimeIndexDecodeError> {
    check_extent(header)?;
    let count = u32::try_from(entries.len()).unwrap_or(u32::MAX);
    check_count(header, count)?;
    check_entries(header, entries.iter().copied())?;
    let start = out.len();
    out.extend_from_slice(&TIME_INDEX_MAGIC.to_be_bytes());
    out.extend_from_slice(&TIME_INDEX_VERSION.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    for field in [header.base_offset, header.next_offset, header.segment_len] {
        out.extend_from_slice(&field.to_be_bytes());
    }
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    for entry in entries {
        out.extend_from_slice(&entry.timestamp_micros.to_be_bytes());
        out.extend_from_slice(&entry.offset.to_be_bytes());
    }
    let crc = checksum(out.get(start..).unwrap_or_default());
    if let Some(slot) = out.get_mut(start + 36..start + 40) {
        slot.copy_from_slice(&crc.to_be_bytes());
    }
    Ok(())
}

/// Decodes a time index file, checking in this order: the header's length,
/// magic, version, flags, the extent, the count against the extent's
/// records, the body's length, the CRC, and the entries.
///
/// ```
/// use felix_format::time_index::{TimeIndexDecodeError, decode_time_index};
///
/// assert_eq!(decode_time_index(b"FLTI"), Err(TimeIndexDecodeError::Short { len: 4 }));
/// ```
pub fn decode_time_index(bytes: &[u8]) -> Result<TimeIndexView<'_>, TimeIndexDecodeError> {
    let Some((raw, body)) = bytes.split_first_chunk::<TIME_INDEX_HEADER_LEN>() else {
        return Err(TimeIndexDecodeError::Short { len: bytes.len() });
    };
    let magic = u32_at(raw, 0);
    if magic != TIME_INDEX_MAGIC {
        return Err(TimeIndexDecodeError::Magic { found: magic });
    }
    let version = u16_at(raw, 4);
    if version != TIME_INDEX_VERSION {
        return Err(TimeIndexDecodeError::Version { found: version });
    }
    let flags = u16_at(raw, 6);
    if flags != 0 {
        return Err(TimeIndexDecodeError::Flags { found: flags });
    }
    let header = TimeIndexHeader {
        base_offset: u64_at(raw, 8),
        next_offset: u64_at(raw, 16),
        segment_len: u64_at(raw, 24),
    };
    check_extent(&header)?;
    let count = u32_at(raw, 32);
    check_count(&header, count)?;
    let expected_len = usize::try_from(count)
        .unwrap_or(usize::MAX)
        .saturating_mul(TIME_INDEX_ENTRY_LEN);
    if body.len() != expected_len {
        return Err(TimeIndexDecodeError::CountMismatch {
            count,
            expected: expected_len,
            found: body.len(),
        });
    }
    let expected = u32_at(raw, 36);
    let found = checksum(bytes);
    if expected != found {
        return Err(TimeIndexDecodeError::Checksum { expected, found });
    }
    let view = TimeIndexView {
        header,
        entries: body,
    };
    check_entries(&header, view.iter())?;
    Ok(view)
}

/// The CRC of a whole file: bytes 0..36, then the entries (the stored CRC
/// itself is skipped).
fn checksum(file: &[u8]) -> u32 {
    crc32_continue(
        crc32(file.get(..36).unwrap_or_default()),
        &[file.get(TIME_INDEX_HEADER_LEN..).unwrap_or_default()],
    )
}

fn check_extent(header: &TimeIndexHeader) -> Result<(), TimeIndexDecodeError> {
    // Every record takes at least a record header, after the segment's.
    let smallest = (header.records())
        .checked_mul(RECORD_HEADER_LEN as u64)
        .and_then(|n| n.checked_add(SEGMENT_HEADER_LEN as u64));
    let plausible = header.next_offset >= header.base_offset
        && smallest.is_some_and(|n| header.segment_len >= n);
    if plausible {
        Ok(())
    } else {
        Err(TimeIndexDecodeError::Extent {
            base_offset: header.base_offset,
            next_offset: header.next_offset,
            segment_len: header.segment_len,
        })
    }
}

/// A segment with records has at least one entry (its first record's) and
/// at most one per record; one without has none.
fn check_count(header: &TimeIndexHeader, count: u32) -> Result<(), TimeIndexDecodeError> {
    let records = header.records();
    let ok = (records == 0 && count == 0) || (count >= 1 && u64::from(count) <= records);
    if ok {
        Ok(())
    } else {
        Err(TimeIndexDecodeError::Count { count, records })
    }
}

fn check_entries(
    header: &TimeIndexHeader,
    entries: impl Iterator<Item = TimeIndexEntry>,
) -> Result<(), TimeIndexDecodeError> {
    let mut previous: Option<TimeIndexEntry> = None;
    for (i, entry) in (0u64..).zip(entries) {
        let in_order = match previous {
            None => entry.offset == header.base_offset,
            Some(p) => entry.offset > p.offset && entry.timestamp_micros > p.timestamp_micros,
        };
        if !in_order || entry.offset >= header.next_offset {
            return Err(TimeIndexDecodeError::Entry {
                entry: i,
                timestamp_micros: entry.timestamp_micros,
                offset: entry.offset,
            });
        }
        previous = Some(entry);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
