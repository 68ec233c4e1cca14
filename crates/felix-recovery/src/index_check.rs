//! Checking an index against the records of its segment.
//!
//! An index entry is only a hint: the records decide where each offset
//! lives. Reading the record header an entry names is not enough to vouch
//! for it, because a payload may hold bytes that decode as a valid record
//! header with the right offset (a payload that is itself an encoded record,
//! say). An entry is vouched for only when a walk of record headers from the
//! segment's first record — the one position no index is needed to find —
//! reaches a record at the entry's position carrying the entry's offset.

use felix_format::{IndexEntry, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN, decode_record_header};
use felix_io::IoError;
use felix_segment::SegmentFile;

use crate::chunked::ChunkedReader;
use crate::error::RecoveryError;
use crate::inspect::{Inspection, load_index};
use crate::report::{IndexProblem, Note};

/// How much of a sealed segment's index an inspection checks against the
/// segment's records. (The newest segment is always scanned in full and its
/// index checked entry by entry.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IndexCheck {
    /// The index file is validated and the segment's tail is scanned from
    /// its last entry to the end of the file: what an open does, reading
    /// only the tail of each sealed segment. A wrong earlier entry is not
    /// looked for; a read that meets one rebuilds the index.
    #[default]
    LastEntry,
    /// Every entry is checked by walking record headers from the first
    /// record (payloads are skipped, not checksummed), and an index with an
    /// entry the walk does not vouch for is rebuilt. Costs a read of each
    /// sealed segment up to its last entry; what an operator's check and
    /// repair use, so that a wrong entry anywhere is reported and repaired.
    EveryEntry,
}

/// The first of `entries` that the records of `segment` do not vouch for,
/// with its number in the index: walking record headers from the first
/// record (header CRC, length bound, offset sequence, staying within
/// `valid_len`) never reaches a record at its position with its offset.
/// `None` when every entry is vouched for.
///
/// The walk stops at the last entry, so its cost is the bytes up to it; the
/// records after it are the tail a scan from that entry covers.
///
/// ```
/// use felix_format::IndexEntry;
/// use felix_recovery::first_stale_entry;
/// use felix_segment::{Record, SegmentConfig, SegmentWriter};
///
/// let dir = tempfile::tempdir()?;
/// let mut writer = SegmentWriter::create(&felix_io::FileSystem::os(), dir.path(), 0, 0, SegmentConfig::default(), "doc".into())?;
/// writer.append(&[Record::new(1, "a"), Record::new(2, "b")])?;
/// let (segment, len) = (writer.segment().clone(), writer.len());
/// let real = IndexEntry { offset: 1, position: 32 + 28 + 1 };
/// assert_eq!(first_stale_entry(&segment, len, &[real])?, None);
/// let wrong = IndexEntry { offset: 1, position: 32 + 28 };
/// assert_eq!(first_stale_entry(&segment, len, &[wrong])?, Some((0, wrong)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn first_stale_entry(
    segment: &SegmentFile,
    valid_len: u64,
    entries: &[IndexEntry],
) -> Result<Option<(u64, IndexEntry)>, IoError> {
    let mut reader = ChunkedReader::new(segment.file(), segment.path(), valid_len);
    let mut position = SEGMENT_HEADER_LEN as u64;
    let mut offset = segment.base_offset();
    for (number, &entry) in (0u64..).zip(entries) {
        // Step record by record until the walk reaches or passes the entry.
        while position < entry.position {
            let header = reader
                .get(position, RECORD_HEADER_LEN as u64)?
                .and_then(|bytes| decode_record_header(bytes).ok())
                .filter(|header| header.check_offset(offset).is_ok());
            let next = header.map(|h| position.saturating_add(h.encoded_len()));
            match next {
                Some(next) if next <= valid_len => {
                    position = next;
                    offset += 1;
                }
                // Damage before the entry: nothing vouches for it. Whether
                // the damage is real is for a scan to say.
                _ => return Ok(Some((number, entry))),
            }
        }
        if position != entry.position || offset != entry.offset {
            return Ok(Some((number, entry)));
        }
    }
    Ok(None)
}

/// Whether a segment's index loads and the records vouch for every entry
/// (see [`first_stale_entry`]), noting why not. An index may lag its
/// segment, but never lead it or disagree with it.
pub(crate) fn check_index(
    inspection: &mut Inspection,
    segment: &SegmentFile,
    valid_len: u64,
) -> Result<bool, RecoveryError> {
    let Ok(index) = load_index(inspection, segment, valid_len) else {
        return Ok(false);
    };
    match first_stale_entry(segment, valid_len, index.entries())? {
        None => Ok(true),
        Some((number, entry)) => {
            inspection
                .notes
                .push(stale_entry_note(segment.id(), number, entry));
            Ok(false)
        }
    }
}

/// The note for entry `number` of segment `segment`'s index, which the
/// records do not vouch for.
pub(crate) fn stale_entry_note(segment: u64, number: u64, entry: IndexEntry) -> Note {
    Note::IndexUnusable {
        segment,
        reason: IndexProblem::StaleEntry {
            number,
            offset: entry.offset,
            position: entry.position,
        },
    }
}
