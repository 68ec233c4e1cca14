//! The time index: in memory, on disk, and how it is built.
//!
//! A time index lists, at some records, the running maximum of the
//! segment's timestamps (felix-format's [`time_index`] module has the
//! bytes). It is built in the one record walk every scan makes, beside the
//! offset index and by the same rule for which records get an entry
//! ([`crate::IndexBuilder`]'s spacing), so a rebuild is what the writer
//! would have made: the writer observes its own appends the same way.
//!
//! Like the offset index it is never the only source of anything: a file is
//! used only for the exact segment extent it names, after its checksum, and
//! every walk over the segment's records rebuilds it and compares. Only
//! sealed segments have a file; the active segment's time index lives in
//! memory, shared by the writer and its readers ([`ActiveTimeIndex`]).
//!
//! [`time_index`]: felix_format::time_index

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use felix_format::SegmentExtent;
use felix_format::side_file::{SideFileError, SideFileKind};
use felix_format::time_index::{
    TIME_INDEX_ENTRY_LEN, TIME_INDEX_HEADER_LEN, TimeIndexEntry, TimeIndexHeader,
    decode_time_index, encode_time_index,
};
use felix_io::side_file::{ReadSideFileError, read_side_file_within};
use felix_io::{FileSystem, IoError, OpenMode};

use crate::error::{Result, SegmentError};
use crate::fs::open;

/// One segment's time index: entries where the running maximum grew, and
/// the maximum so far.
///
/// ```
/// use felix_segment::TimeIndexBuilder;
///
/// // Timestamps 30, 10, 50, 40 at offsets 7..11, every record an entry point.
/// let mut builder = TimeIndexBuilder::default();
/// for (offset, ts) in [(7, 30), (8, 10), (9, 50), (10, 40)] {
///     builder.observe(true, offset, ts);
/// }
/// let index = builder.finish();
/// assert_eq!(index.max_timestamp_micros(), Some(50));
/// let found = index.bounds(35);
/// // Entries (30, 7) and (50, 9): nothing at or before offset 7 reaches 35,
/// // something at or before offset 9 does.
/// assert_eq!(found.below.map(|e| e.offset), Some(7));
/// assert_eq!(found.reaching.map(|e| e.offset), Some(9));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimeIndex {
    entries: Vec<TimeIndexEntry>,
    max_timestamp_micros: Option<u64>,
    last_offset: Option<u64>,
}

/// Where a record with a timestamp of at least some `t` can lie, by the
/// entries: after `below` (the last entry whose maximum is below `t`), and
/// at or before `reaching` (the first whose maximum reaches `t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeBounds {
    /// Every record at or before this entry's offset is older than `t`.
    pub below: Option<TimeIndexEntry>,
    /// Some record at or before this entry's offset reaches `t`.
    pub reaching: Option<TimeIndexEntry>,
}

/// [`TimeBounds`] over `entries` (ascending) for `t`.
pub fn time_bounds(entries: &[TimeIndexEntry], t: u64) -> TimeBounds {
    let i = entries.partition_point(|e| e.timestamp_micros < t);
    TimeBounds {
        below: i.checked_sub(1).and_then(|i| entries.get(i).copied()),
        reaching: entries.get(i).copied(),
    }
}

impl TimeIndex {
    /// A time index from its parts: `entries` (ascending in both fields),
    /// the largest timestamp observed and the last record's offset.
    pub fn from_parts(
        entries: Vec<TimeIndexEntry>,
        max_timestamp_micros: Option<u64>,
        last_offset: Option<u64>,
    ) -> Self {
        debug_assert!(
            entries.windows(2).all(|w| matches!(w, [a, b]
                if a.offset < b.offset && a.timestamp_micros < b.timestamp_micros)),
            "time index entries ascend: {entries:?}"
        );
        Self {
            entries,
            max_timestamp_micros,
            last_offset,
        }
    }

    /// The entries, ascending in both timestamp and offset.
    pub fn entries(&self) -> &[TimeIndexEntry] {
        &self.entries
    }

    /// The largest timestamp of the records observed, if any.
    pub fn max_timestamp_micros(&self) -> Option<u64> {
        self.max_timestamp_micros
    }

    /// The offset of the last record observed, if any.
    pub fn last_offset(&self) -> Option<u64> {
        self.last_offset
    }

    /// [`time_bounds`] over the entries.
    pub fn bounds(&self, t: u64) -> TimeBounds {
        time_bounds(&self.entries, t)
    }

    /// The entries of a segment that takes no more records: these, and one
    /// for its last record when the maximum grew after the last entry, so
    /// that the last entry's timestamp is the segment's largest.
    pub fn sealed_entries(&self) -> Vec<TimeIndexEntry> {
        let mut entries = self.entries.clone();
        if let (Some(max), Some(last)) = (self.max_timestamp_micros, self.last_offset)
            && entries.last().is_none_or(|e| max > e.timestamp_micros)
        {
            entries.push(TimeIndexEntry {
                timestamp_micros: max,
                offset: last,
            });
        }
        entries
    }

    /// This index as a sealed segment's: [`Self::sealed_entries`].
    pub fn sealed(mut self) -> Self {
        self.entries = self.sealed_entries();
        self
    }

    /// Loads the time index file at `path` on `fs` for the sealed segment
    /// `extent`. A file naming another extent (written before the segment
    /// changed) is [`TimeIndexLoadError::Stale`]; every error means "build
    /// it from the records", none is damage to data.
    pub fn load(
        fs: &FileSystem,
        path: &Path,
        extent: &SegmentExtent,
    ) -> std::result::Result<Self, TimeIndexLoadError> {
        let (header, index) = Self::load_any(fs, path, extent.records())?;
        if header != header_of(extent) {
            return Err(TimeIndexLoadError::Stale {
                path: path.to_path_buf(),
                found: header,
            });
        }
        Ok(index)
    }

    /// Loads the time index file at `path` for a segment of at most
    /// `max_records` records, whatever extent it names: the header says
    /// which, for the caller to compare once it knows the segment's.
    pub fn load_any(
        fs: &FileSystem,
        path: &Path,
        max_records: u64,
    ) -> std::result::Result<(TimeIndexHeader, Self), TimeIndexLoadError> {
        // At most one entry per record: a longer file is not read. The
        // bound is the segment's, not the layout's, so the one reader of
        // side files is given it.
        let max_len = (TIME_INDEX_HEADER_LEN as u64)
            .saturating_add(max_records.saturating_mul(TIME_INDEX_ENTRY_LEN as u64));
        let max_len = usize::try_from(max_len).unwrap_or(usize::MAX);
        let read = read_side_file_within(fs, path, SideFileKind::TimeIndex, max_len, |bytes| {
            let view = decode_time_index(bytes)?;
            let last_offset = view
                .header
                .next_offset
                .checked_sub(1)
                .filter(|_| !view.is_empty());
            Ok((
                view.header,
                Self {
                    entries: view.iter().collect(),
                    max_timestamp_micros: view.max_timestamp_micros(),
                    last_offset,
                },
            ))
        });
        match read {
            Ok(Some(loaded)) => Ok(loaded),
            Ok(None) => Err(TimeIndexLoadError::Missing {
                path: path.to_path_buf(),
            }),
            Err(ReadSideFileError::TooLarge { len, .. }) => Err(TimeIndexLoadError::TooLarge {
                path: path.to_path_buf(),
                len,
            }),
            Err(ReadSideFileError::Invalid { source, .. }) => Err(TimeIndexLoadError::Invalid {
                path: path.to_path_buf(),
                error: source,
            }),
            Err(ReadSideFileError::Io(e)) => Err(TimeIndexLoadError::Io(e)),
        }
    }

    /// Writes the file of the sealed segment `extent` to `path` on `fs`,
    /// replacing any file there. It is not synced: a lost or torn write
    /// fails its checksum, or names an older extent, and the index is built
    /// from the records again — which is all a missing one costs.
    pub fn write_file(&self, fs: &FileSystem, path: &Path, extent: &SegmentExtent) -> Result<()> {
        let mut bytes = Vec::with_capacity(
            TIME_INDEX_HEADER_LEN + (self.entries.len() + 1) * TIME_INDEX_ENTRY_LEN,
        );
        encode_time_index(&header_of(extent), &self.sealed_entries(), &mut bytes).map_err(
            |error| {
                // A walk's entries always encode: a refusal is a broken
                // invariant, reported rather than written.
                SegmentError::io("encode time index", path, io::Error::other(error))
            },
        )?;
        let file = open(fs, path, OpenMode::CreateTruncate)?;
        file.write_all_at(&bytes, 0)
            .map_err(|e| SegmentError::io("write", path, e))
    }
}

/// The header a time index of `extent` carries.
pub fn header_of(extent: &SegmentExtent) -> TimeIndexHeader {
    TimeIndexHeader {
        base_offset: extent.base_offset,
        next_offset: extent.next_offset,
        segment_len: extent.len,
    }
}

/// Why a time index file could not be used. Every variant means "build it
/// from the records".
#[non_exhaustive]
#[derive(Debug, Clone, thiserror::Error)]
pub enum TimeIndexLoadError {
    /// No file exists (the reference implementation writes none, and the
    /// active segment has none).
    #[error("time index {} is missing", path.display())]
    Missing {
        /// The expected path.
        path: PathBuf,
    },
    /// The file does not decode.
    #[error("time index {} is invalid: {error}", path.display())]
    Invalid {
        /// The path.
        path: PathBuf,
        /// Why it does not decode.
        error: SideFileError,
    },
    /// The file is longer than any time index of its segment.
    #[error("time index {} is {len} bytes, longer than any of its segment", path.display())]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// Its length.
        len: u64,
    },
    /// The file describes another extent than the segment's: it was written
    /// before the segment changed.
    #[error(
        "time index {} describes offsets {}..{} in {} bytes, not the segment as it is",
        path.display(), found.base_offset, found.next_offset, found.segment_len
    )]
    Stale {
        /// The path.
        path: PathBuf,
        /// The extent it describes.
        found: TimeIndexHeader,
    },
    /// The file could not be read.
    #[error(transparent)]
    Io(IoError),
}

/// Builds a time index while records are walked (or appended): the one rule
/// for writers and rebuilds, so a rebuilt index equals the writer's.
///
/// A record gets an entry when it gets an offset index entry (`due`, from
/// [`crate::IndexBuilder::observe`]) and the running maximum has grown since
/// the last entry.
#[derive(Debug, Clone, Default)]
pub struct TimeIndexBuilder {
    index: TimeIndex,
}

impl TimeIndexBuilder {
    /// A builder continuing `index` (the newest segment's, as the open's
    /// scan left it).
    pub fn resume(index: TimeIndex) -> Self {
        Self { index }
    }

    /// Notes the record at `offset` with `timestamp_micros`; returns the
    /// entry it got, if any.
    #[inline]
    pub fn observe(
        &mut self,
        due: bool,
        offset: u64,
        timestamp_micros: u64,
    ) -> Option<TimeIndexEntry> {
        let index = &mut self.index;
        debug_assert!(
            index.last_offset.is_none_or(|last| offset > last),
            "records are observed in order: {offset} after {:?}",
            index.last_offset
        );
        let max = index
            .max_timestamp_micros
            .map_or(timestamp_micros, |m| m.max(timestamp_micros));
        index.max_timestamp_micros = Some(max);
        index.last_offset = Some(offset);
        if due
            && index
                .entries
                .last()
                .is_none_or(|e| max > e.timestamp_micros)
        {
            let entry = TimeIndexEntry {
                timestamp_micros: max,
                offset,
            };
            index.entries.push(entry);
            return Some(entry);
        }
        None
    }

    /// The index so far.
    pub fn index(&self) -> &TimeIndex {
        &self.index
    }

    /// The index built.
    pub fn finish(self) -> TimeIndex {
        self.index
    }
}

/// Checks, while a segment's records are walked from the first, the claims
/// a time index's entries make: each entry's timestamp is the running
/// maximum at its offset, and the last entry's is the segment's largest.
/// Entries need not be at the records a rebuild would pick (an index
/// written with another spacing is still right).
///
/// ```
/// use felix_format::time_index::TimeIndexEntry;
/// use felix_segment::TimeIndexCheck;
///
/// let entries = [
///     TimeIndexEntry { timestamp_micros: 5, offset: 0 },
///     TimeIndexEntry { timestamp_micros: 9, offset: 2 },
/// ];
/// let mut check = TimeIndexCheck::new(&entries);
/// for (offset, ts) in [(0, 5), (1, 3), (2, 9)] {
///     check.observe(offset, ts);
/// }
/// assert_eq!(check.finish(), None);
/// let mut check = TimeIndexCheck::new(&entries);
/// for (offset, ts) in [(0, 5), (1, 7), (2, 9), (3, 10)] {
///     check.observe(offset, ts);
/// }
/// assert_eq!(check.finish(), Some(1)); // 10 is the maximum, not 9
/// ```
#[derive(Debug, Clone)]
pub struct TimeIndexCheck<'a> {
    entries: &'a [TimeIndexEntry],
    next: usize,
    max: Option<u64>,
    wrong: Option<usize>,
}

impl<'a> TimeIndexCheck<'a> {
    /// A check of `entries` (ascending, as a decoded file's are).
    pub fn new(entries: &'a [TimeIndexEntry]) -> Self {
        Self {
            entries,
            next: 0,
            max: None,
            wrong: None,
        }
    }

    /// Notes the next record of the walk.
    #[inline]
    pub fn observe(&mut self, offset: u64, timestamp_micros: u64) {
        let max = self
            .max
            .map_or(timestamp_micros, |m| m.max(timestamp_micros));
        self.max = Some(max);
        if self.wrong.is_some() {
            return;
        }
        if let Some(entry) = self.entries.get(self.next)
            && entry.offset <= offset
        {
            if entry.offset == offset && entry.timestamp_micros == max {
                self.next += 1;
            } else {
                self.wrong = Some(self.next);
            }
        }
    }

    /// The number of the first entry the records do not bear out, if any:
    /// one the walk never reached, or a last entry short of the segment's
    /// largest timestamp.
    pub fn finish(self) -> Option<usize> {
        if self.wrong.is_some() {
            return self.wrong;
        }
        if self.next < self.entries.len() {
            return Some(self.next);
        }
        match (self.entries.last(), self.max) {
            (Some(last), Some(max)) if last.timestamp_micros != max => Some(self.entries.len() - 1),
            (None, Some(_)) => Some(0),
            _ => None,
        }
    }
}

/// The active segment's time index entries, shared between its writer and
/// any number of readers: one copy in memory. Entries are added only where
/// the running maximum grows, under a brief write lock.
///
/// ```
/// use felix_format::time_index::TimeIndexEntry;
/// use felix_segment::ActiveTimeIndex;
///
/// let index = ActiveTimeIndex::default();
/// index.push(TimeIndexEntry { timestamp_micros: 10, offset: 0 });
/// index.push(TimeIndexEntry { timestamp_micros: 20, offset: 5 });
/// assert_eq!(index.bounds(15).reaching.map(|e| e.offset), Some(5));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ActiveTimeIndex {
    entries: Arc<RwLock<Vec<TimeIndexEntry>>>,
}

impl ActiveTimeIndex {
    /// An index holding `entries` (ascending).
    pub fn new(entries: Vec<TimeIndexEntry>) -> Self {
        Self {
            entries: Arc::new(RwLock::new(entries)),
        }
    }

    /// Appends an entry (the writer's call), after every entry there.
    pub fn push(&self, entry: TimeIndexEntry) {
        // A push cannot leave the vector half-updated: a poisoned lock is
        // recovered.
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        debug_assert!(
            entries
                .last()
                .is_none_or(|last| last.offset < entry.offset
                    && last.timestamp_micros < entry.timestamp_micros),
            "time index entries ascend: {entry:?} after {:?}",
            entries.last()
        );
        entries.push(entry);
    }

    /// [`time_bounds`] over the entries.
    pub fn bounds(&self, t: u64) -> TimeBounds {
        time_bounds(
            &self.entries.read().unwrap_or_else(PoisonError::into_inner),
            t,
        )
    }

    /// A copy of the entries.
    pub fn entries(&self) -> Vec<TimeIndexEntry> {
        self.entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built(records: &[(u64, u64)], due_every: u64) -> TimeIndex {
        let mut builder = TimeIndexBuilder::default();
        for (i, &(offset, ts)) in (0u64..).zip(records) {
            builder.observe(i % due_every == 0, offset, ts);
        }
        builder.finish()
    }

    #[test]
    fn observe_records_the_running_maximum_where_it_grows_at_entry_points() {
        // Entry points at offsets 0, 2, 4, 6.
        let records = [
            (0, 50),
            (1, 70),
            (2, 60),
            (3, 20),
            (4, 65),
            (5, 90),
            (6, 80),
        ];
        let index = built(&records, 2);
        let pairs: Vec<(u64, u64)> = index
            .entries()
            .iter()
            .map(|e| (e.offset, e.timestamp_micros))
            .collect();
        // At 2 the maximum is 70 (grown), at 4 still 70 (no entry), at 6 it
        // is 90 (grown).
        assert_eq!(pairs, [(0, 50), (2, 70), (6, 90)]);
        assert_eq!(index.max_timestamp_micros(), Some(90));
        // Sealed, nothing to add: the last entry holds the maximum.
        assert_eq!(index.sealed_entries(), index.entries());
    }

    #[test]
    fn sealed_entries_end_with_the_segment_maximum() {
        let index = built(&[(0, 5), (1, 9), (2, 7)], 4);
        assert_eq!(
            index.sealed_entries(),
            [
                TimeIndexEntry {
                    timestamp_micros: 5,
                    offset: 0
                },
                TimeIndexEntry {
                    timestamp_micros: 9,
                    offset: 2
                }
            ]
        );
    }

    #[test]
    fn time_bounds_bracket_the_first_record_reaching_t() {
        let index = built(&[(10, 5), (11, 3), (12, 8), (13, 8), (14, 12)], 1).sealed();
        // Entries: (5,10) (8,12) (12,14).
        for (t, below, reaching) in [
            (0, None, Some(10)),
            (5, None, Some(10)),
            (6, Some(10), Some(12)),
            (8, Some(10), Some(12)),
            (9, Some(12), Some(14)),
            (12, Some(12), Some(14)),
            (13, Some(14), None),
        ] {
            let b = index.bounds(t);
            assert_eq!(
                (b.below.map(|e| e.offset), b.reaching.map(|e| e.offset)),
                (below, reaching),
                "t = {t}"
            );
        }
    }
}
