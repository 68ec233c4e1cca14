//! Lookups by time: the first offset whose record's timestamp reaches a
//! bound, and each segment's largest timestamp.
//!
//! Timestamps are the producers' and need not ascend, so the answer follows
//! Kafka's ListOffsets: the earliest offset whose own timestamp is at least
//! `t`. The segments are passed oldest first by their largest timestamp, the
//! first one that reaches `t` is searched with its time index (where the
//! running maximum grows) and a walk of record headers from there, and the
//! records decide: an answer is never after a record whose timestamp
//! reaches `t`.
//!
//! A sealed segment's time index is loaded on first need. Its file is used
//! as it is only when it decodes, names the segment's exact extent, and was
//! written by this process or is covered by a trusted clean-shutdown record;
//! otherwise (after a crash, or for a shard written by another
//! implementation) the segment's record headers are walked once, building
//! its offset and time indexes, and a missing or wrong file is written
//! again.

use std::sync::{Arc, PoisonError};

use felix_format::time_index::TimeIndexEntry;
use felix_format::{FileKind, SegmentExtent, file_name};
use felix_recovery::{
    Note, ScanDepth, ScanStart, SideFileProblem, TimeIndexProblem, scan_segment_checking,
};
use felix_segment::{
    ReadLimit, SegmentError, SparseIndex, TimeIndex, TimeIndexLoadError, TimestampHit,
};

use super::{Log, OpenedSegment, Sealed};
use crate::error::{Result, StorageError};
use crate::shard::bounds::ReadBound;
use crate::stats::Counters;

impl Log {
    /// The first record at or after `from` and the log start, below where
    /// `bound` ends, whose timestamp is at least `t` (see
    /// `Shard::offset_for_timestamp_from`).
    pub(crate) fn offset_for_timestamp(
        &self,
        t: u64,
        from: u64,
        bound: ReadBound,
    ) -> Result<Option<TimestampHit>> {
        let (end, start, sealed, active) = {
            let view = self.view();
            let end = self.end_for(&view, bound);
            let active = (
                Arc::clone(&view.active),
                view.active_limit,
                view.active_time_index.clone(),
                view.active_max_timestamp,
                view.active_index.clone(),
            );
            (
                end,
                view.base_offset().max(from),
                view.sealed.clone(),
                active,
            )
        };
        if start >= end {
            return Ok(None);
        }
        for segment in &sealed {
            let extent = segment.extent;
            if extent.next_offset <= start || extent.next_offset == extent.base_offset {
                continue;
            }
            if extent.base_offset >= end {
                return Ok(None);
            }
            // Only a segment whose largest timestamp reaches `t` can hold
            // the answer; the first such is searched, from the log start.
            if self
                .sealed_max_timestamp(segment)?
                .is_none_or(|max| max < t)
            {
                continue;
            }
            if let Some(hit) =
                self.find_in_sealed(segment, t, start.max(extent.base_offset), end)?
            {
                return Ok(Some(hit));
            }
        }
        let (file, limit, time_index, max, index) = active;
        if max.is_none_or(|max| max < t) || limit.next_offset.min(end) <= file.base_offset() {
            return Ok(None);
        }
        let lo = start.max(file.base_offset());
        let from = time_index
            .bounds(t)
            .below
            .map_or(lo, |e| lo.max(e.offset + 1));
        let limit = ReadLimit {
            end_position: limit.end_position,
            next_offset: limit.next_offset.min(end),
        };
        let (entry, next_position) = index.seek_span(file.base_offset(), from);
        // The active segment's index is the writer's own: every entry is a
        // record boundary.
        file.find_timestamp(entry, next_position, from, limit, t, false)
            .map_err(|e| self.shared.segment_error(e))
    }

    /// The first record of `sealed` at or after `lo` and below `end` whose
    /// timestamp is at least `t`.
    fn find_in_sealed(
        &self,
        sealed: &Sealed,
        t: u64,
        lo: u64,
        end: u64,
    ) -> Result<Option<TimestampHit>> {
        let time_index = self.sealed_time_index(sealed)?;
        let from = time_index
            .bounds(t)
            .below
            .map_or(lo, |e| lo.max(e.offset + 1));
        let limit = ReadLimit {
            end_position: sealed.extent.len,
            next_offset: sealed.extent.next_offset.min(end),
        };
        if from >= limit.next_offset {
            return Ok(None);
        }
        let opened = self.open_sealed(sealed, from)?;
        let (entry, next_position) = opened.index.seek_span(from);
        let found =
            opened
                .file
                .find_timestamp(entry, next_position, from, limit, t, !opened.vouched);
        match found {
            // An entry of an index file is only a hint; one the records do
            // not vouch for is retried from an index they give.
            Err(SegmentError::StaleIndex { .. } | SegmentError::Corrupt { .. })
                if !opened.vouched =>
            {
                let opened = self.open_sealed_vouched(sealed, from)?;
                let (entry, next_position) = opened.index.seek_span(from);
                opened
                    .file
                    .find_timestamp(entry, next_position, from, limit, t, false)
                    .map_err(|e| self.shared.segment_error(e))
            }
            other => other.map_err(|e| self.shared.segment_error(e)),
        }
    }

    /// The largest timestamp in a sealed segment: known for the segments
    /// this process sealed, from the time index otherwise.
    pub(crate) fn sealed_max_timestamp(&self, sealed: &Sealed) -> Result<Option<u64>> {
        if let Some(known) = *sealed
            .max_timestamp_micros
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            return Ok(known);
        }
        let max = self.sealed_time_index(sealed)?.max_timestamp_micros();
        *sealed
            .max_timestamp_micros
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(max);
        Ok(max)
    }

    /// A sealed segment's time index, loaded or built on first need (see the
    /// module's documentation for when its file is used as it is).
    pub(crate) fn sealed_time_index(&self, sealed: &Sealed) -> Result<Arc<TimeIndex>> {
        let mut cached = sealed
            .time_index
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(index) = &*cached {
            return Ok(Arc::clone(index));
        }
        let extent = sealed.extent;
        let path = self
            .shared
            .dir
            .join(file_name(extent.id, FileKind::TimeIndex).as_str());
        let loaded = TimeIndex::load(&self.shared.fs, &path, &extent);
        let index = match loaded {
            Ok(index) if sealed.time_file_trusted => index,
            loaded => {
                let claims = loaded.as_ref().map_or(&[][..], TimeIndex::entries);
                let (built, wrong) = self.walk_sealed(sealed, claims)?;
                let problem = match &loaded {
                    Ok(_) => wrong.map(|number| TimeIndexProblem::Wrong {
                        number: number as u64,
                    }),
                    Err(err) => TimeIndexProblem::of_load_error(err),
                };
                let missing = matches!(loaded, Err(TimeIndexLoadError::Missing { .. }));
                if let Some(reason) = problem {
                    let note = Note::TimeIndexUnusable {
                        segment: extent.id,
                        reason,
                    };
                    tracing::warn!(shard = %self.shared.label, note = %note, "time index rebuilt from the records");
                    self.shared.add_note(note);
                }
                let writable = !matches!(
                    problem,
                    Some(TimeIndexProblem::Unusable(SideFileProblem::NotAFile { .. }))
                );
                if (missing || problem.is_some()) && writable {
                    self.persist_time_index(&built, &extent);
                }
                built
            }
        };
        let index = Arc::new(index);
        *cached = Some(Arc::clone(&index));
        Ok(index)
    }

    /// Walks a sealed segment's record headers once: its time index, sealed,
    /// the first of `claims` (a time index file's entries) the records do
    /// not bear out, and — since the records give it on the way — an offset
    /// index they vouch for, which then serves its reads.
    fn walk_sealed(
        &self,
        sealed: &Sealed,
        claims: &[TimeIndexEntry],
    ) -> Result<(TimeIndex, Option<usize>)> {
        let opened = self.open_sealed(sealed, sealed.extent.base_offset)?;
        let checked = scan_segment_checking(
            &opened.file,
            sealed.extent.len,
            ScanStart::first_record(&opened.file),
            ScanDepth::Headers,
            self.shared.config.index_spacing_bytes,
            &[],
            claims,
        )
        .map_err(|e| self.shared.segment_error(e.into()))?;
        let scan = checked.scan;
        if let Some(damage) = scan.damage {
            // A read there fails the same way: the segment is damaged.
            return Err(self.shared.segment_error(SegmentError::Corrupt {
                site: opened.file.site(damage.position),
                kind: damage.kind,
            }));
        }
        if !opened.vouched {
            *sealed.opened.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(Arc::new(OpenedSegment {
                    file: Arc::clone(&opened.file),
                    index: SparseIndex::from_entries(sealed.extent.base_offset, scan.index),
                    vouched: true,
                }));
        }
        Ok((scan.time_index.sealed(), checked.wrong_time_entry))
    }

    /// Writes a time index built from the records back for the next open.
    /// Only an optimisation: failing to is counted and harmless.
    fn persist_time_index(&self, index: &TimeIndex, extent: &SegmentExtent) {
        let path = self
            .shared
            .dir
            .join(file_name(extent.id, FileKind::TimeIndex).as_str());
        if let Err(err) = index.write_file(&self.shared.fs, &path, extent) {
            tracing::warn!(shard = %self.shared.label, segment = extent.id, error = %err, "could not write a rebuilt time index");
            Counters::add(&self.shared.counters.index_write_failures, 1);
        }
    }

    /// The timestamp of the newest record a read under `bound` returns.
    pub(crate) fn newest_timestamp(&self, bound: ReadBound) -> Result<Option<TimestampHit>> {
        let (start, end) = {
            let view = self.view();
            (view.base_offset(), self.end_for(&view, bound))
        };
        if end <= start {
            return Ok(None);
        }
        let last = end - 1;
        Ok(self
            .read(last, 0, bound)?
            .first()
            .map(|record| TimestampHit {
                offset: record.offset,
                timestamp_micros: record.timestamp_micros,
            }))
    }

    /// A segment's largest timestamp for [`super::SegmentInfo`]: `None` when
    /// it has no records or they cannot be read (logged).
    pub(crate) fn max_timestamp_or_log(&self, sealed: &Sealed) -> Option<u64> {
        match self.sealed_max_timestamp(sealed) {
            Ok(max) => max,
            Err(StorageError::Trimmed { .. }) => None,
            Err(error) => {
                tracing::warn!(shard = %self.shared.label, segment = sealed.extent.id, %error, "largest timestamp unknown");
                None
            }
        }
    }
}
