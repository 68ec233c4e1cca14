//! [`ChunkedReader`]: the one way records are read from a file — front to
//! back, in large `pread`s, never past a given end.
//!
//! Every walk over a segment's records reads through it: a read by offset,
//! recovery's scan and its searches, the index check, `felix-store dump`. A
//! walk costs a system call per chunk rather than one per record, and the
//! reader never looks past its end (the file's length, or the last byte a
//! writer has completed), so no caller can see a record still being written.
//!
//! Bytes before the position last asked for are dropped at the next refill,
//! so a walk holds about a chunk in memory, unless the caller keeps the
//! bytes from some position on ([`ChunkedReader::keep_from`]): a read that
//! hands out payloads as slices of the buffer keeps the records it returns.

use std::path::Path;

use bytes::{Bytes, BytesMut};
use felix_io::{IoError, VfsFile};

use crate::fs::read_exact_at;

/// Bytes a refill reads at least, unless the caller chooses otherwise: a
/// scan of a 1 GiB segment costs a thousand system calls.
pub const CHUNK_BYTES: u64 = 1024 * 1024;

/// A read-only window over a file, refilled in chunks as a walk moves on.
///
/// ```
/// use felix_io::FileSystem;
/// use felix_segment::{ChunkedReader, Record, SegmentConfig, SegmentWriter};
///
/// let dir = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// let mut writer = SegmentWriter::create(&fs, dir.path(), 0, 0, SegmentConfig::default(), "doc".into())?;
/// writer.append(&[Record::new(1, "abc")])?;
/// let segment = writer.segment();
/// let mut reader = ChunkedReader::new(segment.file(), segment.path(), writer.len());
/// assert_eq!(reader.get(32 + 28, 3)?, Some(&b"abc"[..]));
/// assert_eq!(reader.get(32 + 28, 4)?, None); // past the end
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ChunkedReader<'a> {
    file: &'a dyn VfsFile,
    path: &'a Path,
    end: u64,
    /// Memory the reader owns, all of it initialised; only `..valid` holds
    /// the file's bytes. Keeping the rest initialised is what lets a refill,
    /// or a buffer handed back from an earlier read, be read into again
    /// without zeroing it first.
    buf: BytesMut,
    /// Bytes of the file held at the front of `buf`.
    valid: usize,
    /// File position of `buf[0]`.
    start: u64,
    chunk_bytes: u64,
    /// Bytes from this position on survive refills.
    keep_from: Option<u64>,
    /// Refills read no further than this (beyond what is asked for) until
    /// it is passed, then a little at a time: a read with a byte budget
    /// knows about where it will stop.
    ahead_end: Option<u64>,
}

/// What a refill past [`ChunkedReader::with_read_ahead_end`] reads at
/// least: a record or two of the common sizes, for one system call.
const PAST_AHEAD_BYTES: u64 = 8 * 1024;

impl<'a> ChunkedReader<'a> {
    /// A reader of `file` (at `path`, which errors name) that never reads at
    /// or past `end`, refilling [`CHUNK_BYTES`] at a time.
    pub fn new(file: &'a dyn VfsFile, path: &'a Path, end: u64) -> Self {
        Self {
            file,
            path,
            end,
            buf: BytesMut::new(),
            valid: 0,
            start: 0,
            chunk_bytes: CHUNK_BYTES,
            keep_from: None,
            ahead_end: None,
        }
    }

    /// Refills read at least `bytes` (at least 1): a read of one record
    /// sizes its first `pread` to about that record.
    pub fn with_chunk_bytes(mut self, bytes: u64) -> Self {
        self.chunk_bytes = bytes.max(1);
        self
    }

    /// Refills read ahead no further than `end` (they still read whatever
    /// is asked for), and past it a few KiB at a time: a read that expects
    /// to stop about there reads neither a chunk too many nor, when it was
    /// wrong by a record, a whole chunk more.
    pub fn with_read_ahead_end(mut self, end: u64) -> Self {
        self.ahead_end = Some(end);
        self
    }

    /// Reads into `buf` (its initialised bytes, whatever they hold) before
    /// allocating: a sequential reader that hands a finished read's buffer
    /// back ([`ReadBuffers`](crate::ReadBuffers)) then neither allocates nor
    /// zeroes memory per read.
    pub fn with_buffer(mut self, buf: BytesMut) -> Self {
        self.buf = buf;
        self.valid = 0;
        self
    }

    /// The end the reader never reads past.
    #[inline]
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The bytes buffered from `position` on; empty when `position` is not
    /// buffered.
    #[inline]
    pub fn buffered(&self, position: u64) -> &[u8] {
        position
            .checked_sub(self.start)
            .and_then(|from| usize::try_from(from).ok())
            .and_then(|from| self.buf.get(from..self.valid))
            .unwrap_or_default()
    }

    /// The bytes `[position, position + len)`, or `None` when they pass the
    /// end. Reads ahead by a chunk, so the following calls are usually
    /// served from memory.
    ///
    /// `len` is bounded by the caller (a verified record's length at most),
    /// so the buffer is bounded by that plus a chunk, plus whatever
    /// [`Self::keep_from`] keeps.
    #[inline]
    pub fn get(&mut self, position: u64, len: u64) -> Result<Option<&[u8]>, IoError> {
        let Some(want_end) = position.checked_add(len).filter(|&e| e <= self.end) else {
            return Ok(None);
        };
        let buf_end = self.start + self.valid as u64;
        if position < self.start || want_end > buf_end {
            self.refill(position, want_end)?;
        }
        debug_assert!(self.start + self.valid as u64 <= self.end);
        let from = usize::try_from(position - self.start).unwrap_or(usize::MAX);
        let to = from.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
        Ok(self.buf.get(from..to))
    }

    /// The bytes from `position` to the end of what is buffered — at least
    /// `min_len` of them when the file has them — for byte-by-byte searches.
    pub fn window(&mut self, position: u64, min_len: u64) -> Result<&[u8], IoError> {
        let len = min_len.min(self.end.saturating_sub(position));
        self.get(position, len)?;
        Ok(self.buffered(position))
    }

    /// Keeps the bytes from `position` (which must be buffered) on across
    /// refills, until [`Self::into_bytes`]: a read hands out the payloads it
    /// returns as slices of one buffer.
    pub fn keep_from(&mut self, position: u64) {
        debug_assert!(position >= self.start, "kept bytes must be buffered");
        self.keep_from = Some(position);
    }

    /// The error for bytes a walk was promised that lie past the end: a
    /// caller whose end disagrees with the reader's.
    pub(crate) fn past_end(&self, position: u64) -> IoError {
        IoError::new(
            "pread",
            self.path,
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("bytes at {position} lie past the readable end {}", self.end),
            ),
        )
    }

    /// The buffer and the file position of its first byte.
    pub fn into_bytes(mut self) -> (u64, Bytes) {
        self.buf.truncate(self.valid);
        (self.start, self.buf.freeze())
    }

    /// The whole buffer, the file position of its first byte and how many
    /// of its bytes are the file's: for a read that hands out slices of the
    /// file's bytes and gives the whole buffer, initialised bytes past them
    /// included, back to be reused.
    pub(crate) fn into_parts(self) -> (u64, Bytes, usize) {
        (self.start, self.buf.freeze(), self.valid)
    }

    /// Makes `[position, want_end)` buffered: moves what is buffered from
    /// the kept position (or from `position`) on to the front, drops what
    /// lies before it, and reads on from the buffer's end — at least a
    /// chunk, and at least as much as is kept, so a growing read costs few
    /// system calls. The memory is reused; only a buffer too small grows
    /// (and only its new part is zeroed).
    fn refill(&mut self, position: u64, want_end: u64) -> Result<(), IoError> {
        let keep = self
            .keep_from
            .filter(|&k| k <= position)
            .unwrap_or(position);
        let buf_end = self.start + self.valid as u64;
        if keep >= self.start && keep <= buf_end {
            let shift = usize::try_from(keep - self.start).unwrap_or(usize::MAX);
            if shift > 0 {
                self.buf.copy_within(shift..self.valid, 0);
                self.valid -= shift;
            }
        } else {
            self.valid = 0;
        }
        self.start = keep;
        let have_end = self.start + self.valid as u64;
        let wanted = want_end - have_end;
        let mut read_len = wanted.max(self.chunk_bytes).max(self.valid as u64);
        if let Some(ahead) = self.ahead_end {
            let cap = ahead.checked_sub(have_end).filter(|&n| n > 0);
            read_len = read_len.min(cap.unwrap_or(PAST_AHEAD_BYTES).max(wanted));
        }
        let read_len = read_len.min(self.end - have_end);
        let read_len = usize::try_from(read_len).unwrap_or(usize::MAX);
        let needed = self.valid.saturating_add(read_len);
        if self.buf.len() < needed {
            // What lies past `valid` is stale: drop it rather than copy it
            // when the buffer moves.
            self.buf.truncate(self.valid);
            self.buf.resize(needed, 0);
        }
        let target = self.buf.get_mut(self.valid..needed).unwrap_or_default();
        // Never serve the stale bytes of a read that failed as the file's:
        // `valid` moves only once the read succeeded.
        read_exact_at(self.file, self.path, target, have_end)?;
        self.valid = needed;
        Ok(())
    }
}
