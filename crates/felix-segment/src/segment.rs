//! An open segment file and validated reads from it.
//!
//! Reads use `pread` on one shared descriptor, so any number of readers and
//! the writer use the same file without a lock. A read returns only records
//! that passed both checksums and whose offsets follow on from the index
//! entry it started at.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use felix_format::{
    CorruptionKind, CorruptionSite, CursorStep, FileKind, IndexEntry, RECORD_HEADER_LEN,
    RecordCursor, RecordHeader, SEGMENT_HEADER_LEN, ScanDepth, SegmentHeader, file_name,
};

use crate::error::{Result, SegmentError};
use felix_io::{FileSystem, OpenMode, VfsFile};

use crate::fs::{open_with_len, read_exact_at};
use crate::reader::ChunkedReader;
use crate::run::{POOLED_READ_BYTES, ReadBuffers, RecordRun};

/// The first read of a scan covers at least this many bytes, so that a read
/// starting at an index entry needs one `pread`: twice a 4 KiB index
/// spacing reaches the wanted record from its entry. Larger would
/// make every small read (one record by offset) copy and zero bytes it
/// never looks at; the window grows geometrically when more is needed.
const MIN_READ_BYTES: u64 = 8 * 1024;
/// The smallest first `pread` of a read whose skip is guessed: a few
/// hundred bytes cost the same system call as one header.
const MIN_FIRST_READ: u64 = 512;

/// One segment file: its identity, header and descriptor.
#[derive(Debug)]
pub struct SegmentFile {
    id: u64,
    header: SegmentHeader,
    path: PathBuf,
    file: Arc<dyn VfsFile>,
    fs: FileSystem,
    shard: Arc<str>,
}

/// Where a read begins: an index entry at or below the offset wanted, where
/// the next entry lies (to size the first `pread`; never trusted), and
/// whether the records vouch for the entry.
///
/// An entry nothing has vouched for (one loaded from an index file) may
/// point at a record header embedded in a payload, which verifies like any
/// other: a read from it that would end at the entry's own record checks
/// the header after it too, and a failure is [`SegmentError::StaleIndex`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadStart {
    /// The entry the walk starts at.
    pub entry: IndexEntry,
    /// The position of the entry after it, if any.
    pub next_position: Option<u64>,
    /// Whether the entry is a record boundary the records vouched for (the
    /// writer's own index, or one rebuilt from the records).
    pub vouched: bool,
}

impl ReadStart {
    /// A start at an entry the records vouched for.
    pub fn vouched(entry: IndexEntry, next_position: Option<u64>) -> Self {
        Self {
            entry,
            next_position,
            vouched: true,
        }
    }

    /// A start at an entry nothing has vouched for.
    pub fn hint(entry: IndexEntry, next_position: Option<u64>) -> Self {
        Self {
            entry,
            next_position,
            vouched: false,
        }
    }

    /// The segment's first record: the one start no index is needed for.
    pub fn first_record(segment: &SegmentFile) -> Self {
        Self::vouched(
            IndexEntry {
                offset: segment.base_offset(),
                position: SEGMENT_HEADER_LEN as u64,
            },
            None,
        )
    }
}

/// A record read from a segment, payload sliced from the read's one buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRecord {
    /// The record's logical offset.
    pub offset: u64,
    /// Its publish time.
    pub timestamp_micros: u64,
    /// Byte position of the record in the segment file.
    pub position: u64,
    /// The verified payload.
    pub payload: Bytes,
}

/// How far a read may go: the end of what the writer has completed.
///
/// Readers must not look past what has been fully written, or they could
/// observe a record whose bytes are still arriving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimit {
    /// One past the last byte of the last complete record.
    pub end_position: u64,
    /// One past the last complete record's offset.
    pub next_offset: u64,
}

impl SegmentFile {
    /// Opens segment `id` in `dir` on the file system `fs` and validates
    /// its header. `mode` is [`OpenMode::Read`] (for tools that must not
    /// modify anything) or [`OpenMode::ReadWrite`] (for the writer).
    ///
    /// Returns the file and its current length. Header damage is a
    /// [`SegmentError::Corrupt`] at position 0.
    pub fn open(
        fs: &FileSystem,
        dir: &Path,
        id: u64,
        shard: Arc<str>,
        mode: OpenMode,
    ) -> Result<(Self, u64)> {
        let path = dir.join(file_name(id, FileKind::Segment).as_str());
        Self::open_path(fs, path, id, shard, mode)
    }

    /// [`Self::open`] of the file at `path`, taken as segment `id`: a copy
    /// of a segment under another name (a replacement before its rename).
    pub fn open_path(
        fs: &FileSystem,
        path: PathBuf,
        id: u64,
        shard: Arc<str>,
        mode: OpenMode,
    ) -> Result<(Self, u64)> {
        let (file, len) = open_with_len(fs, &path, mode)?;
        let mut raw = [0u8; SEGMENT_HEADER_LEN];
        let available = usize::try_from(len)
            .unwrap_or(usize::MAX)
            .min(SEGMENT_HEADER_LEN);
        read_exact_at(
            &*file,
            &path,
            raw.get_mut(..available).unwrap_or_default(),
            0,
        )?;
        let header =
            SegmentHeader::decode(raw.get(..available).unwrap_or_default()).map_err(|kind| {
                SegmentError::Corrupt {
                    site: CorruptionSite::new(&*shard, id, 0),
                    kind,
                }
            })?;
        Ok((
            Self {
                id,
                header,
                path,
                file,
                fs: fs.clone(),
                shard,
            },
            len,
        ))
    }

    pub(crate) fn from_parts(
        fs: &FileSystem,
        id: u64,
        header: SegmentHeader,
        path: PathBuf,
        file: Arc<dyn VfsFile>,
        shard: Arc<str>,
    ) -> Self {
        Self {
            id,
            header,
            path,
            file,
            fs: fs.clone(),
            shard,
        }
    }

    /// The segment id (the number in its file name).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The offset of the segment's first record, from its header.
    pub fn base_offset(&self) -> u64 {
        self.header.base_offset
    }

    /// The decoded header.
    pub fn header(&self) -> &SegmentHeader {
        &self.header
    }

    /// The segment file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of this segment's index file.
    pub fn index_path(&self) -> PathBuf {
        self.path
            .with_file_name(file_name(self.id, FileKind::Index).as_str())
    }

    /// The path of this segment's time index file.
    pub fn time_index_path(&self) -> PathBuf {
        self.path
            .with_file_name(file_name(self.id, FileKind::TimeIndex).as_str())
    }

    /// The shard label errors carry.
    pub fn shard(&self) -> &Arc<str> {
        &self.shard
    }

    /// The descriptor, for syncing and for writers.
    pub fn file(&self) -> &dyn VfsFile {
        &*self.file
    }

    /// The file system the segment lives on.
    pub fn fs(&self) -> &FileSystem {
        &self.fs
    }

    /// A [`CorruptionSite`] at `position` of this segment.
    pub fn site(&self, position: u64) -> CorruptionSite {
        CorruptionSite::new(&*self.shard, self.id, position)
    }

    /// Reads records from offset `from`, starting the scan at `start` (an
    /// index entry at or below `from`), until `max_bytes` of encoded records
    /// have been collected — but always at least one record.
    ///
    /// Every record passed on the way is checked (header CRC and offset
    /// sequence), and every record returned also passed its record checksum.
    /// An entry that does not lead to valid records is
    /// [`SegmentError::StaleIndex`]; damage after the first valid record is
    /// [`SegmentError::Corrupt`].
    pub fn read(
        &self,
        start: IndexEntry,
        from: u64,
        limit: ReadLimit,
        max_bytes: u64,
    ) -> Result<Vec<ReadRecord>> {
        self.read_within(start, None, from, limit, max_bytes)
    }

    /// [`Self::read`], told where the index entry after `start` lies
    /// (`next_position`, from [`crate::seek_span`]), so that a small read
    /// `pread`s only the bytes up to it rather than a fixed minimum. The
    /// position only sizes the first `pread`; it is not trusted.
    pub fn read_within(
        &self,
        start: IndexEntry,
        next_position: Option<u64>,
        from: u64,
        limit: ReadLimit,
        max_bytes: u64,
    ) -> Result<Vec<ReadRecord>> {
        let start = ReadStart::vouched(start, next_position);
        let run = self.read_run(start, from, limit, max_bytes, None)?;
        Ok(records_of(&run))
    }

    /// [`Self::read_within`] from an entry nothing has vouched for (one
    /// loaded from an index file). A record header embedded in a payload can
    /// verify, so an entry pointing at one leads to a record that is not
    /// the segment's: when the read would end at the entry's own record,
    /// the header after it is checked too (it must carry the next offset,
    /// or the record must end the readable range), and a failure is
    /// [`SegmentError::StaleIndex`]. A read that passes a record beyond the
    /// entry has already made that check. Costs one header's check, within
    /// bytes the read has usually fetched already.
    pub fn read_from_hint(
        &self,
        start: IndexEntry,
        next_position: Option<u64>,
        from: u64,
        limit: ReadLimit,
        max_bytes: u64,
    ) -> Result<Vec<ReadRecord>> {
        let start = ReadStart::hint(start, next_position);
        let run = self.read_run(start, from, limit, max_bytes, None)?;
        Ok(records_of(&run))
    }

    /// Whether the index entry a walk starts from can begin it: at or
    /// before `from`, inside this segment's offsets and its records' bytes.
    /// Nothing is trusted from an index, so anything else is
    /// [`SegmentError::StaleIndex`] (every walk from an entry checks this
    /// one way: reads and lookups by time).
    pub(crate) fn check_start_entry(
        &self,
        start: IndexEntry,
        from: u64,
        limit: ReadLimit,
    ) -> Result<()> {
        let sane_start = start.offset <= from
            && start.offset >= self.base_offset()
            && from >= self.base_offset()
            && start.position >= SEGMENT_HEADER_LEN as u64
            && start.position < limit.end_position;
        if sane_start {
            return Ok(());
        }
        Err(SegmentError::StaleIndex {
            entry: start,
            site: self.site(start.position),
            kind: CorruptionKind::IndexEntryOutOfOrder {
                entry: 0,
                offset: start.offset,
                position: start.position,
            },
        })
    }

    /// The run read: the records from offset `from` as one [`RecordRun`],
    /// their bytes exactly as in the file, walking from `start` (see
    /// [`ReadStart`]) and stopping once `max_bytes` of encoded records are
    /// collected — always at least one record, never a record that would
    /// pass the budget after the first, never past `limit`.
    ///
    /// Every record is checked exactly as [`Self::read`] checks it (the
    /// two are one walk): header CRC and offset sequence for every record
    /// passed, the record CRC for every record returned; the same errors
    /// for the same damage. A read of at least 64 KiB fills a buffer from
    /// `buffers` when one is free, and leaves its buffer there for the
    /// next (see [`ReadBuffers`]).
    pub fn read_run(
        &self,
        start: ReadStart,
        from: u64,
        limit: ReadLimit,
        max_bytes: u64,
        buffers: Option<&ReadBuffers>,
    ) -> Result<RecordRun> {
        let ReadStart {
            entry: start,
            next_position,
            vouched,
        } = start;
        if from < self.base_offset() || from >= limit.next_offset {
            return Err(SegmentError::OffsetOutOfRange {
                segment: self.id,
                offset: from,
                base_offset: self.base_offset(),
                next_offset: limit.next_offset,
            });
        }
        self.check_start_entry(start, from, limit)?;
        let span = next_position
            .filter(|&next| next > start.position)
            .map(|next| next - start.position);
        let (skip, average) = self.estimate_skip(start, from, limit);
        let first_read = first_read_bytes(max_bytes, span, skip, average);
        let pool = buffers.filter(|_| first_read >= POOLED_READ_BYTES);
        let mut reader = ChunkedReader::new(&*self.file, &self.path, limit.end_position)
            .with_chunk_bytes(first_read)
            // About where the budget runs out: no chunk read past it.
            .with_read_ahead_end(start.position.saturating_add(first_read));
        if let Some(buf) = pool.and_then(ReadBuffers::take) {
            reader = reader.with_buffer(buf);
        }
        let mut cursor = RecordCursor::new(
            start.position,
            start.offset,
            limit.end_position,
            ScanDepth::Headers,
        );
        // The run so far: where it begins and ends, and how many records.
        let mut run: Option<(u64, u64)> = None;
        let mut count = 0usize;
        let mut collected: u64 = 0;
        while cursor.next_offset() < limit.next_offset {
            let at = cursor.position();
            let expected = cursor.next_offset();
            let wanted = expected >= from;
            cursor.set_depth(if wanted {
                ScanDepth::Full
            } else {
                ScanDepth::Headers
            });
            // Always at least one record; then none that would pass the
            // budget, declined before its payload is looked at.
            let take = |h: &RecordHeader| {
                !wanted || run.is_none() || collected + h.encoded_len() <= max_bytes
            };
            match cursor.step_if(reader.buffered(at), take) {
                CursorStep::NeedBytes { needed } => {
                    if reader.get(at, needed)?.is_none() {
                        return Err(reader.past_end(at).into());
                    }
                }
                CursorStep::Record(record) => {
                    let (full, ends, len) =
                        (record.bytes.is_some(), record.end(), record.encoded_len());
                    // Only a wanted record was read in full.
                    if full {
                        let begins = match run {
                            Some((begins, _)) => begins,
                            None => {
                                // The run's bytes are the buffer's.
                                reader.keep_from(at);
                                at
                            }
                        };
                        run = Some((begins, ends));
                        count += 1;
                        collected += len;
                        if collected >= max_bytes {
                            break;
                        }
                    }
                }
                CursorStep::Declined { .. } => break,
                CursorStep::Damage(damage) => {
                    return Err(self.classify(start, expected, damage.position, damage.kind));
                }
                // The limit promises records up to `next_offset`: the bytes
                // ending first is a record missing where one must begin.
                CursorStep::End => {
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
        let expected = cursor.next_offset();
        if !vouched
            && !real_first_record
            && expected == start.offset + 1
            && expected < limit.next_offset
        {
            // Only the entry's own record was read: the next header is what
            // shows it was the segment's and not one embedded in a payload.
            check_next_header(self, &mut reader, cursor, start)?;
        }
        // The loop ran at least once (`from` is below the limit) and ended
        // with a record or an error.
        let (begins, ends) = run.unwrap_or((start.position, start.position));
        let (base, whole, valid) = reader.into_parts();
        let range = usize::try_from(begins - base).unwrap_or(usize::MAX)
            ..usize::try_from(ends - base).unwrap_or(usize::MAX);
        debug_assert!(range.end <= valid, "a run lies in the bytes read");
        let bytes = if range.end <= valid {
            whole.slice(range)
        } else {
            Bytes::new()
        };
        if let Some(pool) = pool {
            pool.give(whole);
        }
        Ok(RecordRun::verified(bytes, from, count, begins))
    }

    /// Roughly how many bytes lie between `start` and the record at `from`,
    /// from the average record size of the readable part of the segment.
    /// A guess only sizes the first `pread`: every header on the way is still
    /// read and verified, and a short guess costs one more `pread`.
    /// Returns the guess and the average record size it used.
    fn estimate_skip(&self, start: IndexEntry, from: u64, limit: ReadLimit) -> (u64, u64) {
        let records = limit.next_offset.saturating_sub(self.base_offset());
        let bytes = limit.end_position.saturating_sub(SEGMENT_HEADER_LEN as u64);
        let average = bytes.checked_div(records).unwrap_or(0);
        let skip = from.saturating_sub(start.offset).saturating_mul(average);
        (skip, average)
    }

    /// Damage met at the entry the scan started from means the entry is
    /// wrong — unless that entry is the segment's real first record, which
    /// needs no index to find, or the record there verified its header and
    /// offset and only its checksum failed. Damage met later is damage to
    /// the segment.
    pub(crate) fn classify(
        &self,
        start: IndexEntry,
        expected: u64,
        at: u64,
        kind: CorruptionKind,
    ) -> SegmentError {
        let from_entry = expected == start.offset && at == start.position;
        let real_first_record =
            start.offset == self.base_offset() && start.position == SEGMENT_HEADER_LEN as u64;
        let header_verified = matches!(kind, CorruptionKind::RecordChecksum { .. });
        if from_entry && !real_first_record && !header_verified {
            SegmentError::StaleIndex {
                entry: start,
                site: self.site(at),
                kind,
            }
        } else {
            SegmentError::Corrupt {
                site: self.site(at),
                kind,
            }
        }
    }
}

/// The records of `run`, each payload a slice of the run's bytes.
fn records_of(run: &RecordRun) -> Vec<ReadRecord> {
    run.iter()
        .map(|record| ReadRecord {
            offset: record.offset,
            timestamp_micros: record.timestamp_micros,
            position: record.position,
            payload: run.payload_bytes(&record),
        })
        .collect()
}

/// The size of a read's first `pread`: what the byte budget asks for (plus
/// the bytes expected before the wanted record, and the header after the
/// budget that tells the read to stop), or the span to the next index entry, or a fixed minimum —
/// shrunk, for a small read whose wanted record is expected about `skip`
/// bytes in (records of `average` bytes), to end a little past it: a random
/// read of one record then copies half a span less from the page cache on
/// average, which shortens a random read of one small record (measured in
/// docs/performance.md, "What was missed, and why": the random read).
/// Later refills grow geometrically.
fn first_read_bytes(max_bytes: u64, span: Option<u64>, skip: u64, average: u64) -> u64 {
    // The budget's records begin about `skip` bytes in, and the header
    // after them decides that the next record would pass the budget.
    let floor = max_bytes
        .saturating_add(skip)
        .saturating_add(RECORD_HEADER_LEN as u64);
    let first = floor.max(span.unwrap_or(MIN_READ_BYTES));
    // The wanted record at the average size, with slack of a sixteenth of
    // the skip and a quarter record, keeps a second `pread` rare when sizes
    // vary a little; when they vary a lot the buffer grows as before.
    let guess = skip
        .saturating_add(skip / 16)
        .saturating_add(average)
        .saturating_add(average / 4)
        .max(MIN_FIRST_READ);
    if guess < first {
        guess.max(floor)
    } else {
        first
    }
}

/// The header at `cursor` must verify and carry the offset the cursor
/// expects, or the walk's start was a stale entry. Only the header is
/// checked: whether the entry named a real record, not the next one's payload.
pub(crate) fn check_next_header(
    segment: &SegmentFile,
    reader: &mut ChunkedReader<'_>,
    mut cursor: RecordCursor,
    start: IndexEntry,
) -> Result<()> {
    cursor.set_depth(ScanDepth::Headers);
    loop {
        let at = cursor.position();
        match cursor.step(reader.buffered(at)) {
            CursorStep::NeedBytes { needed } => {
                if reader.get(at, needed)?.is_none() {
                    return Err(reader.past_end(at).into());
                }
            }
            CursorStep::Damage(damage) => {
                return Err(SegmentError::StaleIndex {
                    entry: start,
                    site: segment.site(damage.position),
                    kind: damage.kind,
                });
            }
            CursorStep::Record(_) | CursorStep::End | CursorStep::Declined { .. } => {
                return Ok(());
            }
        }
    }
}
