//! Sequential reads in large chunks, so a scan costs a system call per
//! mebibyte rather than one per record.

use felix_io::{IoError, VfsFile};
use std::path::Path;

use felix_segment::fs::read_exact_at;

/// Bytes read per refill.
pub(crate) const CHUNK_BYTES: usize = 1024 * 1024;

/// A read-only window over a file that refills itself in large chunks.
pub(crate) struct ChunkedReader<'a> {
    file: &'a dyn VfsFile,
    path: &'a Path,
    file_len: u64,
    buf: Vec<u8>,
    /// File position of `buf[0]`.
    buf_start: u64,
}

impl<'a> ChunkedReader<'a> {
    pub(crate) fn new(file: &'a dyn VfsFile, path: &'a Path, file_len: u64) -> Self {
        Self {
            file,
            path,
            file_len,
            buf: Vec::new(),
            buf_start: 0,
        }
    }

    /// The bytes `[position, position + len)`, or `None` when the file ends
    /// before them. Reads ahead by a chunk so the following calls are
    /// usually served from memory.
    pub(crate) fn get(&mut self, position: u64, len: u64) -> Result<Option<&[u8]>, IoError> {
        let Some(end) = position.checked_add(len) else {
            return Ok(None);
        };
        if end > self.file_len {
            return Ok(None);
        }
        let buf_end = self.buf_start + self.buf.len() as u64;
        if position < self.buf_start || end > buf_end {
            let want = len.max(CHUNK_BYTES as u64).min(self.file_len - position);
            // `len` is bounded by the caller (a verified record length), so
            // this allocation is bounded by MAX_PAYLOAD_BYTES plus a chunk.
            let want = usize::try_from(want).unwrap_or(usize::MAX);
            self.buf.clear();
            self.buf.resize(want, 0);
            self.buf_start = position;
            read_exact_at(self.file, self.path, &mut self.buf, position)?;
        }
        let from = usize::try_from(position - self.buf_start).unwrap_or(usize::MAX);
        let to = from + usize::try_from(len).unwrap_or(usize::MAX);
        Ok(self.buf.get(from..to))
    }

    /// The bytes from `position` to the end of the current chunk (at least
    /// `min_len` of them when the file has them), for byte-by-byte searches.
    pub(crate) fn window(&mut self, position: u64, min_len: u64) -> Result<&[u8], IoError> {
        let len = min_len.min(self.file_len.saturating_sub(position));
        self.get(position, len)?;
        let from = usize::try_from(position.saturating_sub(self.buf_start)).unwrap_or(usize::MAX);
        Ok(self.buf.get(from..).unwrap_or_default())
    }
}
