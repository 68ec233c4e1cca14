//! An open segment file and validated reads from it.
//!
//! Reads use `pread` on one shared descriptor, so any number of readers and
//! the writer use the same file without a lock. A read returns only records
//! that passed both checksums and whose offsets follow on from the index
//! entry it started at.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use felix_format::{
    CorruptionKind, CorruptionSite, FileKind, IndexEntry, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN,
    SegmentHeader, check_record, decode_record_header, file_name,
};

use crate::error::{Result, SegmentError};
use felix_io::{FileSystem, OpenMode, VfsFile};

use crate::fs::{file_len, open, read_exact_at};

/// The first read of a scan covers at least this many bytes, so that a read
/// starting at an index entry needs one `pread`: twice a 4 KiB index
/// spacing reaches the wanted record from its entry. Larger would
/// make every small read (one record by offset) copy and zero bytes it
/// never looks at; the window grows geometrically when more is needed.
const MIN_READ_BYTES: u64 = 8 * 1024;
/// While skipping towards the first wanted record, bytes already passed are
/// dropped once this many have accumulated, so a sparse index never makes a
/// read hold more than this much memory for records it will not return.
const SKIP_WINDOW_BYTES: usize = 64 * 1024;

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
        let file = open(fs, &path, mode)?;
        let len = file_len(&*file, &path)?;
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
        self.read_checked(start, next_position, from, limit, max_bytes, false)
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
        self.read_checked(start, next_position, from, limit, max_bytes, true)
    }

    fn read_checked(
        &self,
        start: IndexEntry,
        next_position: Option<u64>,
        from: u64,
        limit: ReadLimit,
        max_bytes: u64,
        check_past_entry: bool,
    ) -> Result<Vec<ReadRecord>> {
        if from < self.base_offset() || from >= limit.next_offset {
            return Err(SegmentError::OffsetOutOfRange {
                segment: self.id,
                offset: from,
                base_offset: self.base_offset(),
                next_offset: limit.next_offset,
            });
        }
        let sane_start = start.offset <= from
            && start.offset >= self.base_offset()
            && start.position >= SEGMENT_HEADER_LEN as u64
            && start.position < limit.end_position;
        if !sane_start {
            return Err(SegmentError::StaleIndex {
                entry: start,
                site: self.site(start.position),
                kind: CorruptionKind::IndexEntryOutOfOrder {
                    entry: 0,
                    offset: start.offset,
                    position: start.position,
                },
            });
        }
        let span = next_position
            .filter(|&next| next > start.position)
            .map(|next| next - start.position);
        let mut window = Window::new(self, start.position, limit.end_position, max_bytes, span);
        let (skip, average) = self.estimate_skip(start, from, limit);
        window.expect_skip(skip, average);
        // One record for a lookup by offset; a large read grows it.
        let mut spans: Vec<(u64, u64, usize, usize)> = Vec::with_capacity(1);
        let mut collected: u64 = 0;
        let mut expected = start.offset;
        while expected < limit.next_offset {
            let at = window.cursor_position();
            let fail = |failure: ReadFailure| match failure {
                ReadFailure::Kind(kind) => self.classify(start, expected, at, kind),
                ReadFailure::Io(err) => err.into(),
            };
            let header = window
                .ensure(RECORD_HEADER_LEN as u64)
                .and_then(|bytes| Ok(decode_record_header(bytes)?))
                .and_then(|header| Ok(header.check_offset(expected).map(|()| header)?))
                .map_err(fail)?;
            let total = header.encoded_len();
            if expected >= from && !spans.is_empty() && collected + total > max_bytes {
                break;
            }
            let payload_start = window.cursor + RECORD_HEADER_LEN;
            let bytes = window.ensure(total).map_err(fail)?;
            if expected >= from {
                // The header verified above: only the rest is checked.
                let record = check_record(header, bytes, Some(expected))
                    .map_err(|kind| fail(kind.into()))?;
                let payload_end = payload_start + record.payload.len();
                spans.push((
                    expected,
                    record.header.timestamp_micros,
                    payload_start,
                    payload_end,
                ));
                collected += total;
            }
            window.advance(total, spans.is_empty());
            expected += 1;
            if collected >= max_bytes && !spans.is_empty() {
                break;
            }
        }
        let real_first_record =
            start.offset == self.base_offset() && start.position == SEGMENT_HEADER_LEN as u64;
        if check_past_entry
            && !real_first_record
            && expected == start.offset + 1
            && expected < limit.next_offset
        {
            // Only the entry's own record was read: the next header is what
            // shows it was the segment's and not one embedded in a payload.
            let at = window.cursor_position();
            window
                .ensure(RECORD_HEADER_LEN as u64)
                .and_then(|bytes| Ok(decode_record_header(bytes)?))
                .and_then(|header| Ok(header.check_offset(expected)?))
                .map_err(|failure| match failure {
                    ReadFailure::Kind(kind) => SegmentError::StaleIndex {
                        entry: start,
                        site: self.site(at),
                        kind,
                    },
                    ReadFailure::Io(err) => err.into(),
                })?;
        }
        let base_position = window.base_position;
        let buffer = window.buf.freeze();
        Ok(spans
            .into_iter()
            .map(|(offset, timestamp_micros, start, end)| ReadRecord {
                offset,
                timestamp_micros,
                position: base_position + (start - RECORD_HEADER_LEN) as u64,
                payload: buffer.slice(start..end),
            })
            .collect())
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
    fn classify(
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

/// A growing window of the file read with `pread`, consumed front to back.
struct Window<'a> {
    segment: &'a SegmentFile,
    /// File position of `buf[0]`.
    base_position: u64,
    buf: BytesMut,
    /// Read cursor within `buf`.
    cursor: usize,
    end_position: u64,
    first_read: u64,
    /// What the caller's byte budget alone asks the first read to cover.
    first_read_floor: u64,
}

impl<'a> Window<'a> {
    /// `span`, when known, is how many bytes from `position` the wanted
    /// record is known (if the index is right) to end within.
    fn new(
        segment: &'a SegmentFile,
        position: u64,
        end_position: u64,
        max_bytes: u64,
        span: Option<u64>,
    ) -> Self {
        Self {
            segment,
            base_position: position,
            buf: BytesMut::new(),
            cursor: 0,
            end_position,
            first_read: max_bytes
                .saturating_add(RECORD_HEADER_LEN as u64)
                .max(span.unwrap_or(MIN_READ_BYTES)),
            first_read_floor: max_bytes.saturating_add(RECORD_HEADER_LEN as u64),
        }
    }

    /// Shrinks a small read's first `pread`, when the wanted record is
    /// expected about `skip` bytes in, to end a little past it instead of at
    /// the next index entry: a random read of one record then copies half a
    /// span less from the page cache on average (p50 2.4 → 2.0–2.2 µs on
    /// the benchmark's 128-byte records; docs/performance.md).
    fn expect_skip(&mut self, skip: u64, average: u64) {
        // The wanted record at the average size, with slack of a sixteenth
        // of the skip and a quarter record, keeps a second `pread` rare when
        // sizes vary a little; when they vary a lot the window grows as
        // before.
        let guess = skip
            .saturating_add(skip / 16)
            .saturating_add(average)
            .saturating_add(average / 4)
            .max(MIN_FIRST_READ);
        if guess < self.first_read {
            self.first_read = guess.max(self.first_read_floor);
        }
    }

    fn cursor_position(&self) -> u64 {
        self.base_position + self.cursor as u64
    }

    /// Makes `n` bytes from the cursor available, reading more of the file
    /// if needed. Running into the end of the readable range is `Truncated`
    /// with the counts relative to the cursor.
    fn ensure(&mut self, n: u64) -> std::result::Result<&[u8], ReadFailure> {
        let have = (self.buf.len() - self.cursor) as u64;
        if have < n {
            let available_in_file = self.end_position.saturating_sub(self.cursor_position());
            if available_in_file < n {
                return Err(CorruptionKind::Truncated {
                    needed: n,
                    available: available_in_file,
                }
                .into());
            }
            let buffered_end = self.base_position + self.buf.len() as u64;
            // Grow geometrically so a long run costs few reads, but never
            // read less than the first read's size.
            let want = (n - have).max(self.first_read).max(self.buf.len() as u64);
            let read_len = want.min(self.end_position - buffered_end);
            let old_len = self.buf.len();
            let new_len = old_len + usize::try_from(read_len).unwrap_or(usize::MAX);
            self.buf.resize(new_len, 0);
            let target = self.buf.get_mut(old_len..).unwrap_or_default();
            read_exact_at(
                &*self.segment.file,
                &self.segment.path,
                target,
                buffered_end,
            )
            .map_err(ReadFailure::Io)?;
        }
        let end = self.cursor + usize::try_from(n).unwrap_or(usize::MAX);
        Ok(self.buf.get(self.cursor..end).unwrap_or_default())
    }

    /// Moves past a record. While nothing has been collected, drops what was
    /// passed once it grows large, so skipping is bounded in memory.
    fn advance(&mut self, n: u64, skipping: bool) {
        self.cursor += usize::try_from(n).unwrap_or(usize::MAX);
        if skipping && self.cursor >= SKIP_WINDOW_BYTES {
            let _passed = self.buf.split_to(self.cursor);
            self.base_position += self.cursor as u64;
            self.cursor = 0;
        }
    }
}

/// Why a window could not supply bytes: damage, or the read itself failed.
enum ReadFailure {
    Kind(CorruptionKind),
    Io(felix_io::IoError),
}

impl From<CorruptionKind> for ReadFailure {
    fn from(kind: CorruptionKind) -> Self {
        Self::Kind(kind)
    }
}
