//! Looking a record up by time within one segment: the walk of record
//! headers from an index entry to the first record whose timestamp reaches
//! a bound. The time index chooses where the walk starts and may end; the
//! records decide the answer.

use felix_format::{
    CorruptionKind, CursorStep, IndexEntry, RECORD_HEADER_LEN, RecordCursor, SEGMENT_HEADER_LEN,
    ScanDepth,
};

use crate::error::Result;
use crate::reader::ChunkedReader;
use crate::segment::{ReadLimit, SegmentFile};

/// The smallest first `pread` of a lookup: a few headers cost the same
/// system call as one.
const MIN_LOOKUP_READ: u64 = 512;

/// A record a lookup by time found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampHit {
    /// Its offset.
    pub offset: u64,
    /// Its timestamp (covered by its verified header checksum).
    pub timestamp_micros: u64,
}

impl SegmentFile {
    /// The first record at or after offset `from` and below
    /// `limit.next_offset` whose timestamp is at least `t`, walking record
    /// headers (header checksum, length bound, offset sequence) from
    /// `start`, an index entry at or below `from`. `None` when no such
    /// record lies before the limit.
    ///
    /// `next_position` (the next index entry's, as [`crate::seek_span`]
    /// gives it) only sizes the first `pread`. With `hint`, `start` is an
    /// entry nothing has vouched for (loaded from an index file): an answer
    /// that is the entry's own record is only taken once the header after
    /// it carries the next offset, as [`Self::read_from_hint`] checks, and
    /// a failure is [`SegmentError::StaleIndex`](crate::SegmentError::StaleIndex).
    ///
    /// ```
    /// use felix_format::IndexEntry;
    /// use felix_segment::{Record, SegmentConfig, SegmentWriter, TimestampHit};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let mut writer = SegmentWriter::create(&felix_io::FileSystem::os(), dir.path(), 0, 10, SegmentConfig::default(), "doc".into())?;
    /// writer.append(&[Record::new(50, "a"), Record::new(20, "b"), Record::new(60, "c")])?;
    /// let first = IndexEntry { offset: 10, position: 32 };
    /// let hit = writer.segment().find_timestamp(first, None, 10, writer.read_limit(), 55, false)?;
    /// assert_eq!(hit, Some(TimestampHit { offset: 12, timestamp_micros: 60 }));
    /// let none = writer.segment().find_timestamp(first, None, 10, writer.read_limit(), 61, false)?;
    /// assert_eq!(none, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn find_timestamp(
        &self,
        start: IndexEntry,
        next_position: Option<u64>,
        from: u64,
        limit: ReadLimit,
        t: u64,
        hint: bool,
    ) -> Result<Option<TimestampHit>> {
        if from >= limit.next_offset {
            return Ok(None);
        }
        self.check_start_entry(start, from, limit)?;
        let first_read = next_position
            .filter(|&next| next > start.position)
            .map_or(8 * 1024, |next| {
                next - start.position + RECORD_HEADER_LEN as u64
            })
            .max(MIN_LOOKUP_READ);
        let mut reader = ChunkedReader::new(self.file(), self.path(), limit.end_position)
            .with_chunk_bytes(first_read);
        let mut cursor = RecordCursor::new(
            start.position,
            start.offset,
            limit.end_position,
            ScanDepth::Headers,
        );
        let mut hit = None;
        while cursor.next_offset() < limit.next_offset {
            let at = cursor.position();
            let expected = cursor.next_offset();
            match cursor.step(reader.buffered(at)) {
                CursorStep::NeedBytes { needed } => {
                    if reader.get(at, needed)?.is_none() {
                        return Err(reader.past_end(at).into());
                    }
                }
                CursorStep::Record(record) => {
                    let header = record.header;
                    if header.offset >= from && header.timestamp_micros >= t {
                        hit = Some(TimestampHit {
                            offset: header.offset,
                            timestamp_micros: header.timestamp_micros,
                        });
                        break;
                    }
                }
                CursorStep::Damage(damage) => {
                    return Err(self.classify(start, expected, damage.position, damage.kind));
                }
                // The limit promises records up to its offset.
                CursorStep::End | CursorStep::Declined { .. } => {
                    let kind = CorruptionKind::Truncated {
                        needed: RECORD_HEADER_LEN as u64,
                        available: 0,
                    };
                    return Err(self.classify(start, expected, at, kind));
                }
            }
        }
        let real_first_record =
            start.offset == self.base_offset() && start.position == SEGMENT_HEADER_LEN as u64;
        let only_the_entry = cursor.next_offset() == start.offset + 1;
        if hint && !real_first_record && only_the_entry && cursor.next_offset() < limit.next_offset
        {
            // Only the entry's own record was read: the header after it is
            // what shows it is the segment's, not one inside a payload.
            crate::segment::check_next_header(self, &mut reader, cursor, start)?;
        }
        Ok(hit)
    }
}
