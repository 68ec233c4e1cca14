//! The sparse offset index: in memory, on disk, and how it is built.
//!
//! An index maps some offsets to the byte positions of their records so a
//! read can start near its target instead of at the segment's first record.
//! It is never trusted: every entry is only a starting point for a scan that
//! re-validates the records it passes, and any index that fails to load is
//! rebuilt from its segment (by `felix-recovery`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use felix_io::{FileSystem, IoError, OpenMode, VfsFile};

use felix_format::{
    CorruptionKind, INDEX_ENTRY_LEN, INDEX_HEADER_LEN, IndexEntry, IndexHeader, RECORD_HEADER_LEN,
    SEGMENT_HEADER_LEN, encode_index_entry, parse_index,
};

use crate::error::{Result, SegmentError};
use crate::fs::{file_len, open, read_exact_at, sync_data};
use crate::segment::SegmentFile;

/// The entries of one segment's index, ascending by offset and position.
///
/// Memory is 16 bytes per entry; an index is held only for the active
/// segment and for sealed segments that are read.
///
/// ```
/// use felix_format::IndexEntry;
/// use felix_segment::SparseIndex;
///
/// let index = SparseIndex::from_entries(100, vec![
///     IndexEntry { offset: 100, position: 32 },
///     IndexEntry { offset: 150, position: 4200 },
/// ]);
/// assert_eq!(index.seek(149), IndexEntry { offset: 100, position: 32 });
/// assert_eq!(index.seek(150), IndexEntry { offset: 150, position: 4200 });
/// assert_eq!(index.seek(10_000), IndexEntry { offset: 150, position: 4200 });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SparseIndex {
    base_offset: u64,
    entries: Vec<IndexEntry>,
}

impl SparseIndex {
    /// An index with no entries; every seek starts at the first record.
    pub fn empty(base_offset: u64) -> Self {
        Self {
            base_offset,
            entries: Vec::new(),
        }
    }

    /// An index from entries the caller built by scanning the segment
    /// (strictly ascending by offset and by position).
    pub fn from_entries(base_offset: u64, entries: Vec<IndexEntry>) -> Self {
        debug_assert!(
            ascending(&entries),
            "index entries ascend strictly: {entries:?}"
        );
        Self {
            base_offset,
            entries,
        }
    }

    /// The base offset of the segment this index belongs to.
    pub fn base_offset(&self) -> u64 {
        self.base_offset
    }

    /// The entries, ascending.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// The greatest entry at or below `offset`, or the segment's first record
    /// when there is none: where a scan for `offset` should begin.
    pub fn seek(&self, offset: u64) -> IndexEntry {
        seek_entries(&self.entries, self.base_offset, offset)
    }

    /// [`Self::seek`] and the position of the next entry (see
    /// [`seek_span`]).
    pub fn seek_span(&self, offset: u64) -> (IndexEntry, Option<u64>) {
        seek_span(&self.entries, self.base_offset, offset)
    }

    /// Loads and validates the index file at `path` on the file system `fs`
    /// for a segment with `base_offset` whose valid records end at
    /// `segment_len`.
    ///
    /// A torn final entry is dropped. Every other problem is returned so the
    /// caller can rebuild the index; none of them is damage to data.
    pub fn load(
        fs: &FileSystem,
        path: &Path,
        base_offset: u64,
        segment_len: u64,
    ) -> std::result::Result<Self, IndexLoadError> {
        let (file, len) = match fs.open_with_len(path, OpenMode::Read) {
            Ok(opened) => opened,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(IndexLoadError::Missing {
                    path: path.to_path_buf(),
                });
            }
            Err(e) => return Err(IndexLoadError::Io(IoError::new("open", path, e))),
        };
        Self::load_file(&*file, len, path, base_offset, segment_len).map(|(index, _)| index)
    }

    /// [`Self::load`] from `file`, the index file at `path` already open
    /// (by recovery, read-write, so that the writer continuing the segment
    /// keeps the descriptor instead of opening the file again); `len` its
    /// length when the open said it ([`felix_io::Vfs::open_with_len`]).
    /// Returns the bytes read beside the index, for [`OpenedIndex`].
    pub fn load_file(
        file: &dyn VfsFile,
        len: Option<u64>,
        path: &Path,
        base_offset: u64,
        segment_len: u64,
    ) -> std::result::Result<(Self, Vec<u8>), IndexLoadError> {
        let index_len = match len {
            Some(len) => len,
            None => file_len(file, path).map_err(IndexLoadError::Io)?,
        };
        // Positions ascend strictly and records are at least 28 bytes, so a
        // valid index cannot hold more entries than this; a longer file is
        // garbage and is not read into memory.
        let max_entries =
            segment_len.saturating_sub(SEGMENT_HEADER_LEN as u64) / RECORD_HEADER_LEN as u64 + 1;
        let max_len = INDEX_HEADER_LEN as u64 + (max_entries + 1) * INDEX_ENTRY_LEN as u64;
        if index_len > max_len {
            return Err(IndexLoadError::Invalid {
                path: path.to_path_buf(),
                kind: CorruptionKind::IndexEntryOutOfOrder {
                    entry: max_entries,
                    offset: 0,
                    position: segment_len,
                },
            });
        }
        let mut bytes = vec![0u8; usize::try_from(index_len).unwrap_or(0)];
        read_exact_at(file, path, &mut bytes, 0).map_err(IndexLoadError::Io)?;
        let view = parse_index(&bytes, base_offset, segment_len).map_err(|kind| {
            IndexLoadError::Invalid {
                path: path.to_path_buf(),
                kind,
            }
        })?;
        let index = Self {
            base_offset,
            entries: view.iter().collect(),
        };
        Ok((index, bytes))
    }

    /// Writes the whole index to `path` on `fs` (replacing any file there)
    /// and syncs it. Used after a rebuild; a crash midway leaves an index that fails to
    /// load and is rebuilt again, which is harmless.
    pub fn write_file(&self, fs: &FileSystem, path: &Path) -> Result<()> {
        let file = open(fs, path, OpenMode::CreateTruncate)?;
        file.write_all_at(&self.encoded(), 0)
            .map_err(|e| SegmentError::io("write", path, e))?;
        Ok(sync_data(&*file, path)?)
    }

    /// The index file's bytes: its header, then every entry.
    fn encoded(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(INDEX_HEADER_LEN + self.entries.len() * INDEX_ENTRY_LEN);
        bytes.extend_from_slice(
            &IndexHeader {
                base_offset: self.base_offset,
            }
            .encode(),
        );
        for entry in &self.entries {
            bytes.extend_from_slice(&encode_index_entry(*entry));
        }
        bytes
    }
}

/// Whether `entries` ascend strictly by offset and by position, as every
/// index must (a seek's search assumes it).
fn ascending(entries: &[IndexEntry]) -> bool {
    entries
        .windows(2)
        .all(|pair| matches!(pair, [a, b] if a.offset < b.offset && a.position < b.position))
}

/// The greatest of `entries` at or below `offset`, or the first record of a
/// segment beginning at `base_offset`: where a scan for `offset` begins.
///
/// ```
/// use felix_format::IndexEntry;
/// let entries = [IndexEntry { offset: 5, position: 900 }];
/// assert_eq!(felix_segment::seek_entries(&entries, 0, 4), IndexEntry { offset: 0, position: 32 });
/// assert_eq!(felix_segment::seek_entries(&entries, 0, 6), entries[0]);
/// ```
pub fn seek_entries(entries: &[IndexEntry], base_offset: u64, offset: u64) -> IndexEntry {
    let first = IndexEntry {
        offset: base_offset,
        position: SEGMENT_HEADER_LEN as u64,
    };
    let after = entries_at_or_below(entries, offset);
    after
        .checked_sub(1)
        .and_then(|i| entries.get(i).copied())
        .unwrap_or(first)
}

/// How many of `entries` (ascending by offset) have an offset at or below
/// `offset`: `entries.partition_point(|e| e.offset <= offset)`.
///
/// A 1 GiB segment's index has a quarter of a million entries, and a binary
/// search over them misses the cache at almost every step. Offsets grow
/// about evenly with position, so the search starts where interpolation
/// puts `offset` and gallops from there: a read by offset touches a few
/// cache lines of the index, not eighteen.
fn entries_at_or_below(entries: &[IndexEntry], offset: u64) -> usize {
    let below = |i: usize| entries.get(i).is_some_and(|e| e.offset <= offset);
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
        return 0;
    };
    if entries.len() < 64 || offset < first.offset || offset >= last.offset {
        return entries.partition_point(|e| e.offset <= offset);
    }
    let span = u128::from(last.offset - first.offset).max(1);
    let guess = u128::from(offset - first.offset) * (entries.len() as u128 - 1) / span;
    let guess = usize::try_from(guess).unwrap_or(0).min(entries.len() - 1);
    // Find `lo < hi` with below(lo) true and below(hi) false around `guess`;
    // entry 0 is below (`offset >= first.offset`) and the last is not.
    let (mut lo, mut hi) = if below(guess) {
        let mut step = 1;
        let mut lo = guess;
        loop {
            let probe = guess.saturating_add(step).min(entries.len() - 1);
            if !below(probe) {
                break (lo, probe);
            }
            lo = probe;
            step *= 2;
        }
    } else {
        let mut step = 1;
        let mut hi = guess;
        loop {
            let probe = guess.saturating_sub(step);
            if below(probe) {
                break (probe, hi);
            }
            hi = probe;
            step *= 2;
        }
    };
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// [`seek_entries`], plus the position of the entry after the one chosen,
/// if any: a record below that entry's offset ends at or before it, so a
/// read of one record needs no bytes past it. Only a size hint: an index is
/// never trusted, and a wrong hint costs a second `pread`, nothing more.
///
/// ```
/// use felix_format::IndexEntry;
/// let entries = [IndexEntry { offset: 0, position: 32 }, IndexEntry { offset: 5, position: 4200 }];
/// assert_eq!(felix_segment::seek_span(&entries, 0, 4), (entries[0], Some(4200)));
/// assert_eq!(felix_segment::seek_span(&entries, 0, 6), (entries[1], None));
/// ```
pub fn seek_span(
    entries: &[IndexEntry],
    base_offset: u64,
    offset: u64,
) -> (IndexEntry, Option<u64>) {
    let after = entries_at_or_below(entries, offset);
    let start = after
        .checked_sub(1)
        .and_then(|i| entries.get(i).copied())
        .unwrap_or(IndexEntry {
            offset: base_offset,
            position: SEGMENT_HEADER_LEN as u64,
        });
    (start, entries.get(after).map(|e| e.position))
}

/// Why an index could not be used. Every variant means "rebuild it".
#[non_exhaustive]
#[derive(Debug, Clone, thiserror::Error)]
pub enum IndexLoadError {
    /// No index file exists.
    #[error("index {} is missing", path.display())]
    Missing {
        /// The expected index path.
        path: PathBuf,
    },
    /// The file exists but fails validation.
    #[error("index {} is invalid: {kind}", path.display())]
    Invalid {
        /// The index path.
        path: PathBuf,
        /// What is wrong with it.
        kind: CorruptionKind,
    },
    /// The file could not be read.
    #[error(transparent)]
    Io(IoError),
}

/// Decides which records get an index entry: the segment's first record and
/// then the first record at least `spacing_bytes` after the last entry.
#[derive(Debug, Clone)]
pub struct IndexBuilder {
    spacing_bytes: u64,
    entries: Vec<IndexEntry>,
}

impl IndexBuilder {
    /// A builder emitting an entry every `spacing_bytes` of segment data
    /// (a spacing of 0 is treated as 1: every record).
    pub fn new(spacing_bytes: u64) -> Self {
        Self {
            spacing_bytes: spacing_bytes.max(1),
            entries: Vec::new(),
        }
    }

    /// Notes a record at `position`; returns whether it got an entry.
    pub fn observe(&mut self, offset: u64, position: u64) -> bool {
        let due = entry_due(
            self.entries.last().map(|e| e.position),
            position,
            self.spacing_bytes,
        );
        if due {
            let entry = IndexEntry { offset, position };
            debug_assert!(
                self.entries
                    .last()
                    .is_none_or(|last| ascending(&[*last, entry])),
                "records are observed in order: {entry:?} after {:?}",
                self.entries.last()
            );
            self.entries.push(entry);
        }
        due
    }

    /// The entries so far.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// The entries, without a copy.
    pub fn into_entries(self) -> Vec<IndexEntry> {
        self.entries
    }
}

/// Whether a record at `position` gets an index entry, given the position
/// of the last entry: the first record always does, then the first record
/// at least `spacing_bytes` past the last entry. The one rule for writers
/// and for rebuilds, so a rebuilt index equals the one the writer made.
pub(crate) fn entry_due(last_entry: Option<u64>, position: u64, spacing_bytes: u64) -> bool {
    last_entry.is_none_or(|last| position >= last.saturating_add(spacing_bytes.max(1)))
}

/// The active segment's index, shared between its writer and any number of
/// readers: one copy in memory, however many hold it.
///
/// The writer adds an entry every `index_spacing_bytes` under a brief write
/// lock; readers take a brief read lock to pick where a scan starts. No lock
/// is held across a system call.
///
/// ```
/// use felix_format::IndexEntry;
/// use felix_segment::ActiveIndex;
///
/// let index = ActiveIndex::new(vec![IndexEntry { offset: 0, position: 32 }]);
/// let reader = index.clone();
/// index.push(IndexEntry { offset: 9, position: 5000 });
/// assert_eq!(reader.seek_span(0, 10), (IndexEntry { offset: 9, position: 5000 }, None));
/// assert_eq!(reader.entries_below(9), [IndexEntry { offset: 0, position: 32 }]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ActiveIndex {
    entries: Arc<std::sync::RwLock<Vec<IndexEntry>>>,
}

impl ActiveIndex {
    /// An index holding `entries` (ascending).
    pub fn new(entries: Vec<IndexEntry>) -> Self {
        debug_assert!(
            ascending(&entries),
            "index entries ascend strictly: {entries:?}"
        );
        Self {
            entries: Arc::new(std::sync::RwLock::new(entries)),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<IndexEntry>> {
        // Pushes cannot leave the vector half-updated, so a poisoned lock
        // is recovered rather than propagated.
        self.entries
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends an entry (the writer's call), after every entry already
    /// there.
    pub fn push(&self, entry: IndexEntry) {
        let mut entries = self
            .entries
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        debug_assert!(
            entries.last().is_none_or(|last| ascending(&[*last, entry])),
            "index entries ascend: {entry:?} after {:?}",
            entries.last()
        );
        entries.push(entry);
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// [`seek_span`] over the entries, for a segment beginning at
    /// `base_offset`.
    pub fn seek_span(&self, base_offset: u64, offset: u64) -> (IndexEntry, Option<u64>) {
        seek_span(&self.read(), base_offset, offset)
    }

    /// A copy of the entries whose offset is below `offset`.
    pub fn entries_below(&self, offset: u64) -> Vec<IndexEntry> {
        let entries = self.read();
        let end = entries.partition_point(|e| e.offset < offset);
        entries.get(..end).unwrap_or_default().to_vec()
    }

    /// Runs `f` over the entries under the read lock.
    pub fn with_entries<R>(&self, f: impl FnOnce(&[IndexEntry]) -> R) -> R {
        f(&self.read())
    }

    /// The entries, without a copy when this is the last handle.
    pub fn into_entries(self) -> Vec<IndexEntry> {
        match Arc::try_unwrap(self.entries) {
            Ok(lock) => lock
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            Err(shared) => shared
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        }
    }
}

/// Index entries encoded per `write` when the active index file is
/// extended (64 KiB).
const PENDING_CHUNK_ENTRIES: usize = 4096;

/// An index file recovery opened read-write under the shard's lock, for
/// the writer continuing its segment to keep (see
/// [`SegmentWriter::resume_with_index_file`](crate::SegmentWriter::resume_with_index_file)).
#[derive(Debug)]
pub struct OpenedIndex {
    /// The descriptor, read-write.
    pub file: Arc<dyn VfsFile>,
    /// What recovery read from it, when it loaded ([`SparseIndex::load_file`])
    /// and nothing was written to it since: the file's whole content.
    pub bytes: Option<Vec<u8>>,
}

/// The active segment's index file, extended as entries accumulate.
#[derive(Debug)]
pub(crate) struct IndexFile {
    file: Arc<dyn VfsFile>,
    path: PathBuf,
    written: usize,
}

impl IndexFile {
    /// Creates (or replaces) the index file with a header and `entries`.
    pub(crate) fn create(
        fs: &FileSystem,
        path: PathBuf,
        base_offset: u64,
        entries: &[IndexEntry],
    ) -> Result<Self> {
        let index = SparseIndex::from_entries(base_offset, entries.to_vec());
        index.write_file(fs, &path)?;
        let file = open(fs, &path, OpenMode::ReadWrite)?;
        Ok(Self {
            file,
            path,
            written: entries.len(),
        })
    }

    /// [`IndexFile::create`] for `segment`'s index, synced, logging a
    /// failure instead of returning it: the index is then held in memory
    /// only, since an index is an accelerator, never a reason to stop
    /// writing.
    ///
    /// `open`, when given, is the index file already open read-write (by
    /// recovery, which read it under the shard's lock): it is checked (from
    /// the bytes recovery read, when it kept them) and kept instead of the
    /// file being opened and read again.
    pub(crate) fn try_create(
        segment: &SegmentFile,
        entries: &[IndexEntry],
        open: Option<OpenedIndex>,
    ) -> Option<Self> {
        if let Some(file) = Self::reuse(segment, entries, open) {
            return Some(file);
        }
        match Self::create(
            segment.fs(),
            segment.index_path(),
            segment.base_offset(),
            entries,
        ) {
            Ok(file) => Some(file),
            Err(error) => {
                tracing::warn!(shard = %segment.shard(), segment = segment.id(), %error, "index not written; it is held in memory and written again later");
                None
            }
        }
    }

    /// The index file already in place when it holds exactly `entries`
    /// (as a clean close leaves it): opening a shard then writes and syncs
    /// nothing. Whether it was ever synced does not matter, since an index
    /// is never trusted without checking.
    fn reuse(
        segment: &SegmentFile,
        entries: &[IndexEntry],
        opened: Option<OpenedIndex>,
    ) -> Option<Self> {
        let path = segment.index_path();
        let (file, read) = match opened {
            Some(opened) => (opened.file, opened.bytes),
            None => (open(segment.fs(), &path, OpenMode::ReadWrite).ok()?, None),
        };
        let expected = SparseIndex::from_entries(segment.base_offset(), entries.to_vec()).encoded();
        let found = match read {
            Some(read) => read,
            None => {
                if file.file_len().ok()? != expected.len() as u64 {
                    return None;
                }
                let mut found = vec![0u8; expected.len()];
                file.read_exact_at(&mut found, 0).ok()?;
                found
            }
        };
        (found == expected).then_some(Self {
            file,
            path,
            written: entries.len(),
        })
    }

    /// Appends the entries not yet written. The index may lag the segment;
    /// it is never trusted, so this is not synced except at seal.
    pub(crate) fn append_pending(&mut self, entries: &[IndexEntry]) -> Result<()> {
        let Some(pending) = entries.get(self.written..) else {
            return Ok(());
        };
        if pending.is_empty() {
            return Ok(());
        }
        // In chunks: at seal a whole segment's entries may be pending (8 MiB
        // for 1 GiB at the default spacing), and encoding them into one
        // buffer would double the index's memory for a moment.
        let mut bytes =
            Vec::with_capacity(PENDING_CHUNK_ENTRIES.min(pending.len()) * INDEX_ENTRY_LEN);
        for chunk in pending.chunks(PENDING_CHUNK_ENTRIES) {
            bytes.clear();
            for entry in chunk {
                bytes.extend_from_slice(&encode_index_entry(*entry));
            }
            let at = (INDEX_HEADER_LEN + self.written * INDEX_ENTRY_LEN) as u64;
            self.file
                .write_all_at(&bytes, at)
                .map_err(|e| SegmentError::io("write", &self.path, e))?;
            self.written += chunk.len();
        }
        Ok(())
    }

    /// Syncs the index file's data.
    pub(crate) fn sync(&self) -> Result<()> {
        Ok(sync_data(&*self.file, &self.path)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_at_or_below_matches_partition_point_everywhere() {
        // Uneven spacing, including runs of one offset apart and big jumps.
        let mut entries = Vec::new();
        let mut offset = 10u64;
        for i in 0..500u64 {
            entries.push(IndexEntry {
                offset,
                position: 32 + i * 100,
            });
            offset += 1 + (i * 7919) % 40 + if i % 97 == 0 { 5_000 } else { 0 };
        }
        for n in [0, 1, 2, 63, 64, 65, 200, 500] {
            let slice = &entries[..n];
            let end = slice.last().map_or(20, |e| e.offset + 3);
            for probe in 0..=end {
                assert_eq!(
                    entries_at_or_below(slice, probe),
                    slice.partition_point(|e| e.offset <= probe),
                    "n {n}, offset {probe}"
                );
            }
        }
    }
}
