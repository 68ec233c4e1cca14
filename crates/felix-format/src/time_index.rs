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

use crate::bytes_be::{u32_at, u64_at};
use crate::side_file::{
    SideFileBody, SideFileChecksum, SideFileDefect, SideFileError, SideFileKind, SideFileLayout,
    SideFileVersion,
};
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

/// The time index's frame: a 40-byte header with flags (none defined),
/// the extent at bytes 8..32, `count` at 32 (bounded by the extent's
/// records, which [`decode_time_index`] checks before the body), the CRC at
/// 36 over bytes 0..36 and the entries.
pub const TIME_INDEX_LAYOUT: SideFileLayout = SideFileLayout {
    kind: SideFileKind::TimeIndex,
    name: "TimeIndex",
    file: "time index",
    field: "time index",
    entries: "entries",
    magic: TIME_INDEX_MAGIC,
    versions: &[SideFileVersion {
        version: TIME_INDEX_VERSION,
        header_len: TIME_INDEX_HEADER_LEN,
        known_flags: 0,
    }],
    has_flags: true,
    body: SideFileBody::Entries {
        count_at: 32,
        count_width: 4,
        entry_len: TIME_INDEX_ENTRY_LEN,
        min: 0,
        max: u32::MAX,
    },
    checksum: SideFileChecksum::HeaderAndBody,
};

const fn error(defect: SideFileDefect) -> SideFileError {
    SideFileError::new(SideFileKind::TimeIndex, defect)
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
/// # Ok::<(), felix_format::side_file::SideFileError>(())
/// ```
pub fn encode_time_index(
    header: &TimeIndexHeader,
    entries: &[TimeIndexEntry],
    out: &mut Vec<u8>,
) -> Result<(), SideFileError> {
    check_extent(header)?;
    let count = u32::try_from(entries.len()).unwrap_or(u32::MAX);
    check_count(header, count)?;
    check_entries(header, entries.iter().copied())?;
    let start = TIME_INDEX_LAYOUT.begin(TIME_INDEX_VERSION, 0, out);
    for (at, field) in [
        (8, header.base_offset),
        (16, header.next_offset),
        (24, header.segment_len),
    ] {
        if let Some(slot) = out.get_mut(start + at..start + at + 8) {
            slot.copy_from_slice(&field.to_be_bytes());
        }
    }
    for entry in entries {
        out.extend_from_slice(&entry.timestamp_micros.to_be_bytes());
        out.extend_from_slice(&entry.offset.to_be_bytes());
    }
    TIME_INDEX_LAYOUT.seal(out.get_mut(start..).unwrap_or_default());
    Ok(())
}

/// Decodes a time index file, checking in this order: the header's length,
/// magic, version, flags, the extent, the count against the extent's
/// records, the body's length, the CRC, and the entries.
///
/// ```
/// use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
/// use felix_format::time_index::decode_time_index;
///
/// let short = SideFileDefect::Short { len: 4, header_len: 40 };
/// assert_eq!(decode_time_index(b"FLTI"), Err(SideFileError::new(SideFileKind::TimeIndex, short)));
/// ```
pub fn decode_time_index(bytes: &[u8]) -> Result<TimeIndexView<'_>, SideFileError> {
    let opened = TIME_INDEX_LAYOUT.open(bytes)?;
    let raw = opened.header;
    let header = TimeIndexHeader {
        base_offset: u64_at(raw, 8),
        next_offset: u64_at(raw, 16),
        segment_len: u64_at(raw, 24),
    };
    check_extent(&header)?;
    check_count(&header, u32_at(raw, 32))?;
    let frame = opened.verify()?;
    let view = TimeIndexView {
        header,
        entries: frame.body,
    };
    check_entries(&header, view.iter())?;
    Ok(view)
}

fn check_extent(header: &TimeIndexHeader) -> Result<(), SideFileError> {
    // Every record takes at least a record header, after the segment's.
    let smallest = (header.records())
        .checked_mul(RECORD_HEADER_LEN as u64)
        .and_then(|n| n.checked_add(SEGMENT_HEADER_LEN as u64));
    let plausible = header.next_offset >= header.base_offset
        && smallest.is_some_and(|n| header.segment_len >= n);
    if plausible {
        Ok(())
    } else {
        Err(error(SideFileDefect::Extent {
            base_offset: header.base_offset,
            next_offset: header.next_offset,
            segment_len: header.segment_len,
        }))
    }
}

/// A segment with records has at least one entry (its first record's) and
/// at most one per record; one without has none.
fn check_count(header: &TimeIndexHeader, count: u32) -> Result<(), SideFileError> {
    let records = header.records();
    let ok = (records == 0 && count == 0) || (count >= 1 && u64::from(count) <= records);
    if ok {
        Ok(())
    } else {
        Err(error(SideFileDefect::EntriesForRecords { count, records }))
    }
}

fn check_entries(
    header: &TimeIndexHeader,
    entries: impl Iterator<Item = TimeIndexEntry>,
) -> Result<(), SideFileError> {
    let mut previous: Option<TimeIndexEntry> = None;
    for (i, entry) in (0u64..).zip(entries) {
        let in_order = match previous {
            None => entry.offset == header.base_offset,
            Some(p) => entry.offset > p.offset && entry.timestamp_micros > p.timestamp_micros,
        };
        if !in_order || entry.offset >= header.next_offset {
            return Err(error(SideFileDefect::TimeEntry {
                entry: i,
                timestamp_micros: entry.timestamp_micros,
                offset: entry.offset,
            }));
        }
        previous = Some(entry);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
