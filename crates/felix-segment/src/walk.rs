//! [`RecordWalk`]: felix-format's [`RecordCursor`] over a segment file,
//! through a [`ChunkedReader`] — the walk recovery's scan, the index check
//! and `felix-store dump` share — and the one answer to "does this index
//! entry begin a record?" ([`first_stale_entry`]).

use felix_format::{
    CursorRecord, CursorStep, Damage, IndexEntry, RecordCursor, SEGMENT_HEADER_LEN, ScanDepth,
};
use felix_io::IoError;

use crate::reader::ChunkedReader;
use crate::segment::SegmentFile;

/// What one step of a [`RecordWalk`] met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkStep<'a> {
    /// A verified record (its bytes at [`ScanDepth::Full`]).
    Record(CursorRecord<'a>),
    /// The records end exactly at the walk's end.
    End,
    /// The record at the walk's position is damaged; the walk stays there.
    Damage(Damage),
}

/// A walk over a segment file's records from a record boundary to an end.
///
/// ```
/// use felix_format::ScanDepth;
/// use felix_io::FileSystem;
/// use felix_segment::{Record, RecordWalk, SegmentConfig, SegmentWriter, WalkStep};
///
/// let dir = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// let mut writer = SegmentWriter::create(&fs, dir.path(), 0, 5, SegmentConfig::default(), "doc".into())?;
/// writer.append(&[Record::new(1, "a"), Record::new(2, "b")])?;
/// let mut walk = RecordWalk::from_first_record(writer.segment(), writer.len(), ScanDepth::Full);
/// let mut payloads = Vec::new();
/// while let WalkStep::Record(record) = walk.step()? {
///     payloads.push(record.payload().unwrap_or_default().to_vec());
/// }
/// assert_eq!(payloads, [b"a", b"b"]);
/// assert_eq!(walk.cursor().next_offset(), 7);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RecordWalk<'a> {
    reader: ChunkedReader<'a>,
    cursor: RecordCursor,
}

impl<'a> RecordWalk<'a> {
    /// A walk of `segment` with `cursor`, reading no further than the
    /// cursor's end.
    pub fn new(segment: &'a SegmentFile, cursor: RecordCursor) -> Self {
        Self {
            reader: ChunkedReader::new(segment.file(), segment.path(), cursor.end()),
            cursor,
        }
    }

    /// A walk of `segment`'s records from its first one (the one record no
    /// index is needed to find) to `end` at `depth`.
    pub fn from_first_record(segment: &'a SegmentFile, end: u64, depth: ScanDepth) -> Self {
        let cursor =
            RecordCursor::new(SEGMENT_HEADER_LEN as u64, segment.base_offset(), end, depth);
        Self::new(segment, cursor)
    }

    /// The cursor: where the walk is and which offset comes next.
    #[inline]
    pub fn cursor(&self) -> &RecordCursor {
        &self.cursor
    }

    /// Verifies the following records at `depth`.
    #[inline]
    pub fn set_depth(&mut self, depth: ScanDepth) {
        self.cursor.set_depth(depth);
    }

    /// The reader, for searches over the same bytes once the walk has
    /// stopped.
    pub fn reader(&mut self) -> &mut ChunkedReader<'a> {
        &mut self.reader
    }

    /// The next record, the end, or damage; reads as much as the cursor
    /// needs.
    #[inline]
    pub fn step(&mut self) -> Result<WalkStep<'_>, IoError> {
        let (header, position, len) = loop {
            let at = self.cursor.position();
            match self.cursor.step(self.reader.buffered(at)) {
                CursorStep::NeedBytes { needed } => {
                    // The cursor checked its end before asking, and the
                    // reader's end is the cursor's: the bytes exist.
                    if self.reader.get(at, needed)?.is_none() {
                        return Err(self.reader.past_end(at));
                    }
                }
                CursorStep::Record(record) => {
                    break (
                        record.header,
                        record.position,
                        record.bytes.map(<[u8]>::len),
                    );
                }
                // `step` takes every record.
                CursorStep::End | CursorStep::Declined { .. } => return Ok(WalkStep::End),
                CursorStep::Damage(damage) => return Ok(WalkStep::Damage(damage)),
            }
        };
        let bytes = len.map(|n| self.reader.buffered(position).get(..n).unwrap_or_default());
        Ok(WalkStep::Record(CursorRecord {
            header,
            position,
            bytes,
        }))
    }
}

impl RecordWalk<'_> {
    /// After [`WalkStep::Damage`] confined to a record's payload (a record
    /// checksum mismatch: the header verified), steps over that record by
    /// its verified header (see
    /// [`RecordCursor::skip_damaged_payload`]), so a scrub goes on to the
    /// records after it. `None` when the header itself is damaged: the
    /// walk stays where it is.
    pub fn skip_damaged_payload(&mut self) -> Result<Option<felix_format::RecordHeader>, IoError> {
        let at = self.cursor.position();
        let len = (felix_format::RECORD_HEADER_LEN as u64).min(self.cursor.end() - at);
        let Some(bytes) = self.reader.get(at, len)? else {
            return Ok(None);
        };
        Ok(self.cursor.skip_damaged_payload(bytes))
    }
}

/// The first of `entries` that the records of `segment` do not vouch for,
/// with its number in the index: walking record headers from the first
/// record (header CRC, length bound, offset sequence, staying within
/// `valid_len`) never reaches a record at its position with its offset.
/// `None` when every entry is vouched for.
///
/// This is the one answer to "does this index entry begin a record?".
/// Reading the header an entry names is not enough, because a payload may
/// hold bytes that decode as a valid record header with the right offset (a
/// payload that is itself an encoded record, say); only the walk from the
/// first record — the one position no index is needed to find — can tell.
/// The walk stops at the last entry, so its cost is the bytes up to it.
///
/// ```
/// use felix_format::IndexEntry;
/// use felix_segment::{Record, SegmentConfig, SegmentWriter, first_stale_entry};
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
    let mut walk = RecordWalk::from_first_record(segment, valid_len, ScanDepth::Headers);
    for (number, &entry) in (0u64..).zip(entries) {
        // Step record by record until the walk reaches or passes the entry.
        while walk.cursor().position() < entry.position {
            match walk.step()? {
                WalkStep::Record(_) => {}
                // Damage (or the end) before the entry: nothing vouches for
                // it. Whether the damage is real is for a scan to say.
                WalkStep::End | WalkStep::Damage(_) => return Ok(Some((number, entry))),
            }
        }
        let cursor = walk.cursor();
        if cursor.position() != entry.position || cursor.next_offset() != entry.offset {
            return Ok(Some((number, entry)));
        }
    }
    Ok(None)
}
