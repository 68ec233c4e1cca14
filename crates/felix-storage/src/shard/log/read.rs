//! Reads by offset, across segments, concurrent with appends.

use std::sync::Arc;

use bytes::Bytes;
use felix_io::OpenMode;
use felix_recovery::{IndexProblem, Note, ScanDepth, ScanStart, scan_segment};
use felix_segment::{ReadLimit, ReadStart, RecordRun, SegmentError, SegmentFile, SparseIndex};

use super::{Log, OpenedSegment, Sealed};
use crate::error::{Result, StorageError};
use crate::shard::bounds::ReadBound;

/// A record read from a shard.
///
/// A leader forwards it to a follower with
/// [`ReadRecord::into_replicated`], or reads replicated records directly
/// with [`Shard::read_replicated`](crate::Shard::read_replicated), which
/// also says which generation wrote each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRecord {
    /// Its offset.
    pub offset: u64,
    /// Its publish time.
    pub timestamp_micros: u64,
    /// Its payload, sliced from the read's buffer.
    pub payload: Bytes,
}

/// Where a read of one segment goes.
enum Target {
    Active {
        file: Arc<SegmentFile>,
        limit: ReadLimit,
        start: felix_format::IndexEntry,
        next_position: Option<u64>,
    },
    /// A sealed segment, and where the read ends.
    Sealed(Arc<Sealed>, u64),
}

impl Target {
    /// The offset a read of this segment stops before: its end, or the
    /// read's end if that comes first.
    fn next_offset(&self) -> u64 {
        match self {
            Target::Active { limit, .. } => limit.next_offset,
            Target::Sealed(sealed, end) => sealed.extent.next_offset.min(*end),
        }
    }
}

/// `limit`, ending at offset `end` if that comes first. The segment read
/// stops at the limit's offset, whatever its position says, so the
/// position may stay the end of what is written.
fn bounded(limit: ReadLimit, end: u64) -> ReadLimit {
    ReadLimit {
        end_position: limit.end_position,
        next_offset: limit.next_offset.min(end),
    }
}

impl Log {
    /// Reads whole records from `from` onwards, up to where `bound` ends
    /// when the read begins (see `Shard::read`): the run read,
    /// record by record, each payload a slice of its run's bytes.
    pub(crate) fn read(
        &self,
        from: u64,
        max_bytes: u64,
        bound: ReadBound,
    ) -> Result<Vec<ReadRecord>> {
        let runs = self.read_runs(from, max_bytes, bound)?;
        let mut out = Vec::with_capacity(runs.iter().map(RecordRun::len).sum());
        for run in &runs {
            out.extend(run.iter().map(|record| ReadRecord {
                offset: record.offset,
                timestamp_micros: record.timestamp_micros,
                payload: run.payload_bytes(&record),
            }));
        }
        Ok(out)
    }

    /// Reads whole records from `from` onwards as runs, one per segment
    /// crossed (see `Shard::read_runs`), until about `max_bytes` of encoded
    /// records: at least one record when one is readable at `from`, and
    /// past the first record never more than the budget.
    pub(crate) fn read_runs(
        &self,
        from: u64,
        max_bytes: u64,
        bound: ReadBound,
    ) -> Result<Vec<RecordRun>> {
        let end = {
            let view = self.view();
            self.end_for(&view, bound)
        };
        let mut out: Vec<RecordRun> = Vec::new();
        let mut offset = from;
        let mut budget = max_bytes;
        while let Some(target) = self.target(offset, end)? {
            let segment_end = target.next_offset();
            let run = self.read_target(target, offset, budget)?;
            let size = run.bytes().len() as u64;
            // A segment's read returns at least one record; past the first
            // segment, one that alone passes what is left is not taken.
            if !out.is_empty() && size > budget {
                break;
            }
            debug_assert!(
                run.first_offset() == offset && run.next_offset() <= end && !run.is_empty(),
                "a run begins where asked and ends before {end}"
            );
            offset = run.next_offset();
            budget = budget.saturating_sub(size);
            out.push(run);
            // A run that ends before its segment's readable end stopped at
            // the budget: the next read would begin with the record its
            // walk declined, which alone passes what is left. Not read
            // again only to be dropped.
            if budget == 0 || offset < segment_end {
                break;
            }
        }
        Ok(out)
    }

    /// Finds the segment holding `offset`, or `None` at or past `end` (or
    /// the log's end, if a cut has lowered it below).
    fn target(&self, offset: u64, end: u64) -> Result<Option<Target>> {
        let view = self.view();
        let oldest = view.base_offset();
        if offset < oldest {
            return Err(StorageError::Trimmed {
                shard: Arc::clone(&self.shared.label),
                requested: offset,
                oldest,
            });
        }
        if offset >= view.active_limit.next_offset || offset >= end {
            return Ok(None);
        }
        if offset >= view.active.base_offset() {
            let (start, next_position) = view
                .active_index
                .seek_span(view.active.base_offset(), offset);
            return Ok(Some(Target::Active {
                file: Arc::clone(&view.active),
                limit: bounded(view.active_limit, end),
                start,
                next_position,
            }));
        }
        let i = view
            .sealed
            .partition_point(|s| s.extent.base_offset <= offset);
        let segment = i.checked_sub(1).and_then(|i| view.sealed.get(i));
        match segment {
            Some(s) if offset < s.extent.next_offset => {
                Ok(Some(Target::Sealed(Arc::clone(s), end)))
            }
            // Empty sealed segments leave no gap in offsets, so this is only
            // reached for an offset inside an empty segment's range: none.
            _ => Ok(None),
        }
    }

    fn read_target(&self, target: Target, from: u64, budget: u64) -> Result<RecordRun> {
        let buffers = Some(&*self.shared.read_buffers);
        match target {
            Target::Active {
                file,
                limit,
                start,
                next_position,
            } => file
                .read_run(
                    ReadStart::vouched(start, next_position),
                    from,
                    limit,
                    budget,
                    buffers,
                )
                .map_err(|e| self.shared.segment_error(e)),
            Target::Sealed(sealed, end) => {
                let opened = self.open_sealed(&sealed, from)?;
                let limit = bounded(
                    ReadLimit {
                        end_position: sealed.extent.len,
                        next_offset: sealed.extent.next_offset,
                    },
                    end,
                );
                let (entry, next_position) = opened.index.seek_span(from);
                let start = ReadStart {
                    entry,
                    next_position,
                    vouched: opened.vouched,
                };
                match opened.file.read_run(start, from, limit, budget, buffers) {
                    // An index entry is only a hint. One that is not where
                    // the records put its offset leads a read to bytes that
                    // are no record, or to a record header embedded in a
                    // payload (`StaleIndex`), or through such a header into
                    // "damage" (`Corrupt`). Only a read that started from an
                    // entry the records have not vouched for can be misled
                    // so; it is retried from an index rebuilt from them.
                    Err(SegmentError::StaleIndex { .. } | SegmentError::Corrupt { .. })
                        if !opened.vouched && entry != first_record(&opened.file) =>
                    {
                        self.read_from_records(&sealed, &opened, entry, from, limit, budget)
                    }
                    other => other.map_err(|e| self.shared.segment_error(e)),
                }
            }
        }
    }

    /// Reads again from an index rebuilt from the records (see
    /// `read_target`). When that read succeeds, `start` was stale: the
    /// rebuilt index replaces the loaded one and a note records it. When it
    /// fails too, the damage is real; the loaded index is kept, since its
    /// entries past the damage may still serve reads the rebuilt one, which
    /// ends at the damage, cannot.
    fn read_from_records(
        &self,
        sealed: &Sealed,
        opened: &OpenedSegment,
        start: felix_format::IndexEntry,
        from: u64,
        limit: ReadLimit,
        budget: u64,
    ) -> Result<RecordRun> {
        let rebuilt = self.scan_records(sealed, &opened.file)?;
        let (entry, next_position) = rebuilt.seek_span(from);
        let run = opened
            .file
            .read_run(
                ReadStart::vouched(entry, next_position),
                from,
                limit,
                budget,
                Some(&*self.shared.read_buffers),
            )
            .map_err(|e| self.shared.segment_error(e))?;
        let number = opened.index.entries().iter().position(|e| *e == start);
        let reason = match number {
            Some(number) => IndexProblem::StaleEntry {
                number: number as u64,
                offset: start.offset,
                position: start.position,
            },
            None => IndexProblem::Stale,
        };
        let note = Note::IndexUnusable {
            segment: sealed.extent.id,
            reason,
        };
        tracing::warn!(shard = %self.shared.label, note = %note, "stale index entry; index rebuilt from the records");
        self.persist_index(sealed, &opened.file, &rebuilt);
        self.shared.add_note(note);
        *sealed
            .opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(OpenedSegment {
            file: Arc::clone(&opened.file),
            index: rebuilt,
            vouched: true,
        }));
        Ok(run)
    }

    /// Opens a sealed segment and loads its index on first use, rebuilding
    /// an index that fails to load.
    pub(crate) fn open_sealed(
        &self,
        sealed: &Sealed,
        requested: u64,
    ) -> Result<Arc<OpenedSegment>> {
        let mut opened = sealed
            .opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(existing) = &*opened {
            return Ok(Arc::clone(existing));
        }
        let (file, _) = match SegmentFile::open(
            &self.shared.fs,
            &self.shared.dir,
            sealed.extent.id,
            Arc::clone(&self.shared.label),
            OpenMode::Read,
        ) {
            Ok(opened) => opened,
            Err(SegmentError::Io(err)) if err.kind() == std::io::ErrorKind::NotFound => {
                // Retention removed it after this read chose it.
                return Err(StorageError::Trimmed {
                    shard: Arc::clone(&self.shared.label),
                    requested,
                    oldest: self.view().base_offset(),
                });
            }
            Err(e) => return Err(self.shared.segment_error(e)),
        };
        let file = Arc::new(file);
        let (index, vouched) = match SparseIndex::load(
            &self.shared.fs,
            &file.index_path(),
            sealed.extent.base_offset,
            sealed.extent.len,
        ) {
            Ok(index) => (index, false),
            Err(reason) => {
                tracing::warn!(shard = %self.shared.label, segment = sealed.extent.id, %reason, "index unusable; rebuilding");
                let index = self.scan_records(sealed, &file)?;
                self.persist_index(sealed, &file, &index);
                (index, true)
            }
        };
        let entry = Arc::new(OpenedSegment {
            file,
            index,
            vouched,
        });
        *opened = Some(Arc::clone(&entry));
        Ok(entry)
    }

    /// [`Self::open_sealed`], with an index the records vouch for: one
    /// loaded from its file is replaced by one rebuilt from the records. For
    /// operations that act on the positions an index gives (cutting the log),
    /// where a wrong entry would not merely fail a read.
    pub(crate) fn open_sealed_vouched(
        &self,
        sealed: &Sealed,
        requested: u64,
    ) -> Result<Arc<OpenedSegment>> {
        let opened = self.open_sealed(sealed, requested)?;
        if opened.vouched {
            return Ok(opened);
        }
        let entry = Arc::new(OpenedSegment {
            file: Arc::clone(&opened.file),
            index: self.scan_records(sealed, &opened.file)?,
            vouched: true,
        });
        *sealed
            .opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&entry));
        Ok(entry)
    }

    /// An index for `sealed` rebuilt from its records (headers only), in
    /// memory.
    fn scan_records(&self, sealed: &Sealed, file: &SegmentFile) -> Result<SparseIndex> {
        let scan = scan_segment(
            file,
            sealed.extent.len,
            ScanStart::first_record(file),
            ScanDepth::Headers,
            self.shared.config.index_spacing_bytes,
        )
        .map_err(|e| self.shared.segment_error(e.into()))?;
        Ok(SparseIndex::from_entries(
            sealed.extent.base_offset,
            scan.index,
        ))
    }

    /// Writes a rebuilt index back for the next open. Only an optimisation:
    /// failing to is harmless, since indexes are never trusted.
    fn persist_index(&self, sealed: &Sealed, file: &SegmentFile, index: &SparseIndex) {
        if let Err(err) = index.write_file(&self.shared.fs, &file.index_path()) {
            tracing::warn!(shard = %self.shared.label, segment = sealed.extent.id, error = %err, "could not write rebuilt index");
            crate::stats::Counters::add(&self.shared.counters.index_write_failures, 1);
        }
    }
}

/// The first record of `file`: the one position no index is needed to find.
fn first_record(file: &SegmentFile) -> felix_format::IndexEntry {
    felix_format::IndexEntry {
        offset: file.base_offset(),
        position: felix_format::SEGMENT_HEADER_LEN as u64,
    }
}
