//! [`RecordRun`]: records read together, as one [`Bytes`] holding their
//! bytes exactly as they lie in the segment, and [`ReadBuffers`], the
//! buffers such reads fill, reused once the runs read into them are gone.
//!
//! A broker sends what it reads to a socket; the segment's bytes already
//! are the framed records, so a run hands them out whole, verified, with
//! the record boundaries a walk over the run's headers recovers without
//! copying (and without checking again: every record of a run passed its
//! header CRC, its offset and its record CRC when it was read).

use std::ops::Range;
use std::sync::{Mutex, PoisonError};

use bytes::{Bytes, BytesMut};
use felix_format::{
    RECORD_HEADER_LEN, RecordCursor, ScanDepth, SliceRecords, record_header_fields,
};

/// Records that lie back to back in one segment, read and verified
/// together: one [`Bytes`] of their encoded form (28-byte headers and
/// payloads, exactly as on disk), their first offset and their count.
///
/// Every record in a run passed the checks a read makes (header CRC, the
/// offset sequence, record CRC); a run is only ever made by a read.
///
/// ```
/// # use felix_segment::{ReadBuffers, ReadStart, Record, SegmentConfig, SegmentWriter};
/// # let dir = tempfile::tempdir()?;
/// # let fs = felix_io::FileSystem::os();
/// # let mut writer = SegmentWriter::create(&fs, dir.path(), 0, 10, SegmentConfig::default(), "doc".into())?;
/// # writer.append(&[Record::new(1, "a"), Record::new(2, "bc")])?;
/// # let start = ReadStart::first_record(writer.segment());
/// // A run read from offset 10 of a segment holding "a" and "bc":
/// # let run = writer.segment().read_run(start, 10, writer.read_limit(), 1 << 20, None)?;
/// assert_eq!((run.first_offset(), run.next_offset(), run.len()), (10, 12, 2));
/// // The bytes are the records as framed on disk: ready to send.
/// assert_eq!(run.bytes().len(), 28 + 1 + 28 + 2);
/// let payloads: Vec<&[u8]> = run.iter().map(|r| r.payload).collect();
/// assert_eq!(payloads, [&b"a"[..], &b"bc"[..]]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordRun {
    bytes: Bytes,
    first_offset: u64,
    count: usize,
    position: u64,
}

/// Why [`RecordRun::verify`] refused bytes: the first record that failed
/// a read's checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunDamage {
    /// The offset the record should carry.
    pub offset: u64,
    /// Where it begins in its segment file (the run's position plus its
    /// place in the bytes).
    pub position: u64,
    /// What is wrong.
    pub kind: felix_format::CorruptionKind,
}

/// One record of a [`RecordRun`], borrowed from the run's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunRecord<'a> {
    /// The record's offset.
    pub offset: u64,
    /// Its publish time.
    pub timestamp_micros: u64,
    /// Byte position of the record in its segment file.
    pub position: u64,
    /// The verified payload.
    pub payload: &'a [u8],
    /// Where the record begins in the run's bytes.
    at: usize,
}

impl RunRecord<'_> {
    /// Where the record (its header) begins in the run's
    /// [`bytes`](RecordRun::bytes), and where it ends.
    pub fn range(&self) -> Range<usize> {
        self.at..self.at + RECORD_HEADER_LEN + self.payload.len()
    }
}

impl RecordRun {
    /// A run of `count` records from `first_offset`, whose bytes were read
    /// from `position` and verified record by record.
    pub(crate) fn verified(bytes: Bytes, first_offset: u64, count: usize, position: u64) -> Self {
        debug_assert_eq!(
            SliceWalk::new(&bytes, first_offset, position).count(),
            count,
            "a run's count is the records its bytes hold"
        );
        Self {
            bytes,
            first_offset,
            count,
            position,
        }
    }

    /// A run of records received as bytes (a replica's answer over a
    /// network, say): every record is checked as a read checks it — its
    /// header CRC, its offset (from `first_offset`, ascending by one), its
    /// length against the bytes there, its record CRC — before the run is
    /// made, so what it hands out is as trusted as what a local read
    /// returns. `position` is where the sender read the first record in
    /// its segment file; a damage's position is counted from there.
    ///
    /// ```
    /// use felix_format::{CorruptionKind, encode_record_header};
    /// use felix_segment::RecordRun;
    ///
    /// let mut bytes = Vec::new();
    /// for (offset, payload) in [(7, &b"a"[..]), (8, &b"bc"[..])] {
    ///     bytes.extend_from_slice(&encode_record_header(offset, 0, payload)?);
    ///     bytes.extend_from_slice(payload);
    /// }
    /// let run = RecordRun::verify(bytes.clone().into(), 7, 4096).unwrap();
    /// assert_eq!((run.first_offset(), run.len()), (7, 2));
    /// let last = bytes.len() - 1;
    /// bytes[last] ^= 1;
    /// let damage = RecordRun::verify(bytes.into(), 7, 4096).unwrap_err();
    /// assert!(matches!(damage.kind, CorruptionKind::RecordChecksum { .. }));
    /// assert_eq!((damage.offset, damage.position), (8, 4096 + 28 + 1));
    /// # Ok::<(), CorruptionKind>(())
    /// ```
    pub fn verify(bytes: Bytes, first_offset: u64, position: u64) -> Result<Self, RunDamage> {
        let cursor = RecordCursor::new(0, first_offset, bytes.len() as u64, ScanDepth::Full);
        let mut walk = SliceRecords::new(&bytes, cursor);
        let mut count = 0usize;
        while let Some(record) = walk.next() {
            if let Err(damage) = record {
                return Err(RunDamage {
                    offset: walk.cursor().next_offset(),
                    position: position.saturating_add(damage.position),
                    kind: damage.kind,
                });
            }
            count += 1;
        }
        // The walk ends at damage or at the bytes' end, and reports damage
        // (a record passing the end is `Truncated`): it ended at the end.
        debug_assert_eq!(walk.cursor().position(), bytes.len() as u64);
        Ok(Self::verified(bytes, first_offset, count, position))
    }

    /// The records' bytes, headers included, exactly as in the segment.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The records' bytes, without a copy.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// The first record's offset.
    pub fn first_offset(&self) -> u64 {
        self.first_offset
    }

    /// One past the last record's offset.
    pub fn next_offset(&self) -> u64 {
        self.first_offset + self.count as u64
    }

    /// Records in the run.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when the run holds no record.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Byte position of the first record in its segment file.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The records, in offset order, borrowed from the run's bytes.
    pub fn iter(&self) -> RunIter<'_> {
        RunIter {
            walk: SliceWalk::new(&self.bytes, self.first_offset, self.position),
        }
    }

    /// `record`'s payload as a [`Bytes`] sharing the run's memory; empty
    /// for a record of another run.
    pub fn payload_bytes(&self, record: &RunRecord<'_>) -> Bytes {
        let range = record.range();
        let payload = range.start + RECORD_HEADER_LEN..range.end;
        if payload.end <= self.bytes.len() {
            self.bytes.slice(payload)
        } else {
            Bytes::new()
        }
    }

    /// Splits the run before the record at `offset`: `self` keeps the
    /// records below it and the records from it on are returned (all of
    /// them for an offset at or below the first, none at or past the end),
    /// as [`Vec::split_off`] does. Walks the headers up to `offset`.
    pub fn split_off(&mut self, offset: u64) -> RecordRun {
        let keep = usize::try_from(offset.saturating_sub(self.first_offset))
            .unwrap_or(usize::MAX)
            .min(self.count);
        let at = self
            .iter()
            .nth(keep)
            .map_or(self.bytes.len(), |record| record.at);
        let tail = RecordRun {
            bytes: self.bytes.split_off(at),
            first_offset: self.first_offset + keep as u64,
            count: self.count - keep,
            position: self.position + at as u64,
        };
        self.count = keep;
        tail
    }
}

impl<'a> IntoIterator for &'a RecordRun {
    type Item = RunRecord<'a>;
    type IntoIter = RunIter<'a>;

    fn into_iter(self) -> RunIter<'a> {
        self.iter()
    }
}

/// The records of a [`RecordRun`]; see [`RecordRun::iter`].
#[derive(Debug, Clone)]
pub struct RunIter<'a> {
    walk: SliceWalk<'a>,
}

impl<'a> Iterator for RunIter<'a> {
    type Item = RunRecord<'a>;

    #[inline]
    fn next(&mut self) -> Option<RunRecord<'a>> {
        self.walk.next()
    }
}

/// A walk over bytes a verified read returned: each header's fields read
/// as they are (they were checked when read), nothing checked again. Stops
/// at the end, or at bytes too short for the record a header announces
/// (which a verified run never holds).
#[derive(Debug, Clone)]
struct SliceWalk<'a> {
    bytes: &'a [u8],
    at: usize,
    offset: u64,
    position: u64,
}

impl<'a> SliceWalk<'a> {
    fn new(bytes: &'a [u8], first_offset: u64, position: u64) -> Self {
        Self {
            bytes,
            at: 0,
            offset: first_offset,
            position,
        }
    }
}

impl<'a> Iterator for SliceWalk<'a> {
    type Item = RunRecord<'a>;

    #[inline]
    fn next(&mut self) -> Option<RunRecord<'a>> {
        let rest = self.bytes.get(self.at..)?;
        let header = record_header_fields(rest.first_chunk::<RECORD_HEADER_LEN>()?);
        let len = usize::try_from(header.payload_len).ok()?;
        let payload = rest.get(RECORD_HEADER_LEN..RECORD_HEADER_LEN.checked_add(len)?)?;
        debug_assert_eq!(header.offset, self.offset, "a run's offsets ascend by one");
        let record = RunRecord {
            offset: self.offset,
            timestamp_micros: header.timestamp_micros,
            position: self.position + self.at as u64,
            payload,
            at: self.at,
        };
        self.at += RECORD_HEADER_LEN + len;
        self.offset += 1;
        Some(record)
    }
}

/// Reads of at least this many bytes fill a buffer from [`ReadBuffers`];
/// smaller ones allocate their own, which costs little and pins no large
/// buffer under a small record the caller keeps.
pub(crate) const POOLED_READ_BYTES: u64 = 64 * 1024;

/// Buffers kept for reuse.
const KEPT_BUFFERS: usize = 8;

/// Buffers that large reads ([`SegmentFile::read_run`](crate::SegmentFile::read_run))
/// fill, each reused once every run read into it has been dropped: a
/// sequential reader that lets go of one read's runs before the next then
/// allocates nothing and zeroes nothing per read, since a reused buffer is
/// read into over the bytes it already holds.
///
/// At most eight buffers are kept, each as large as the largest read it
/// served; a buffer a caller still holds runs of is not reused (and is
/// replaced in the pool once newer ones need the room), so a kept run never
/// sees its bytes change.
///
/// ```
/// use felix_segment::{ReadBuffers, ReadStart, Record, SegmentConfig, SegmentWriter};
///
/// let dir = tempfile::tempdir()?;
/// let fs = felix_io::FileSystem::os();
/// let mut writer = SegmentWriter::create(&fs, dir.path(), 0, 0, SegmentConfig::default(), "doc".into())?;
/// writer.append(&vec![Record::new(1, vec![7u8; 1000]); 100])?;
/// let buffers = ReadBuffers::new();
/// let segment = writer.segment();
/// let read = || segment.read_run(ReadStart::first_record(segment), 0, writer.read_limit(), 1 << 20, Some(&buffers));
/// let first = read()?;
/// let memory = first.bytes().as_ptr();
/// drop(first);
/// // Every run of the first read is gone: the second reads into its buffer.
/// let second = read()?;
/// assert_eq!(second.bytes().as_ptr(), memory);
/// // A run still held keeps its buffer: the next read takes another.
/// assert_ne!(read()?.bytes().as_ptr(), memory);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default)]
pub struct ReadBuffers {
    kept: Mutex<Vec<Bytes>>,
}

impl ReadBuffers {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// A buffer no run refers to any more, all of its bytes initialised.
    pub(crate) fn take(&self) -> Option<BytesMut> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let free = kept.iter().position(Bytes::is_unique)?;
        // Unique, and the pool's lock held: nobody can clone it in between.
        kept.swap_remove(free).try_into_mut().ok()
    }

    /// Keeps `whole` (the entire buffer of a read, runs of it possibly
    /// still held) for a later read, dropping the oldest kept buffer when
    /// the pool is full.
    pub(crate) fn give(&self, whole: Bytes) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= KEPT_BUFFERS {
            kept.remove(0);
        }
        kept.push(whole);
    }

    /// Drops every kept buffer (an idle shard's memory).
    pub fn clear(&self) {
        self.kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}
