//! The log: its writer (appends, rolls, cuts, the log start, retention,
//! replacements), the view readers share, and the reads and scrubs made
//! through it.
//!
//! [`Log`] owns the log's state, all of it private to this module: the
//! writer under the writer lock, the queue of on-commit batches waiting for
//! a combining leader (`combine.rs`), the [`View`] readers copy from, the
//! directory's lock with the clean-shutdown record the open kept
//! (`clean.rs`), and the lock that runs replacements one at a time
//! (`replace.rs`). What readers need of the writer (the segments, the
//! active segment's readable limit and index) is published into the view
//! after each change, so a reader never takes the writer lock and never
//! passes the writer's limit.
//!
//! The writer lock is taken only here: [`Log::lock_writer`] (a
//! `WriterGuard`, `combine.rs`) is the one way to hold it, and a combining
//! leader's rounds the other. Work that needs nothing but the log takes it
//! inside a `Log` method (`sync`, `close`, `replace_sealed_segment`,
//! appends); the shard's operations that must change the log and the
//! generation history under one hold take the guard and call the `Log`
//! methods that do the locked work (`append_locked`, `truncate_locked`,
//! `reset_locked`, `move_start`, `delete_segments`). A panic while it is
//! held leaves a write half done (bytes in the file the view does not know,
//! a queue whose offsets were assigned): the lock is then poisoned, and so
//! is the shard (`StorageError::WriteInterrupted`), so no write follows one
//! that was cut short.
//!
//! Calls go one way: the shard's operations (`Core`, `core.rs`) use the
//! log; the log uses group commit (`commit/`), publishing what it wrote and
//! poisoning it on a failure, and the shared settings and counters
//! (`shared.rs`); it never names the shard or its generations. Group
//! commit asks the log for nothing but to write its queue before a sync,
//! through the `QueuedWrites` trait the shard implements by calling
//! [`Log::write_queued`]. `cargo xtask layering` checks this (`shard::log`
//! in `STORAGE_UNITS`).

mod append;
mod clean;
mod close;
mod combine;
#[cfg(test)]
mod combine_tests;
mod cut;
mod read;
mod replace;
mod retention;
mod scrub;
mod start;
mod time;

pub(crate) use append::Synced;
pub(crate) use clean::CleanShutdown;
pub(crate) use combine::{Queue, Spare};
pub use read::ReadRecord;
pub use replace::SegmentCopy;
pub use retention::RetentionOutcome;
pub use scrub::ScrubReport;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use felix_format::SegmentExtent;

use felix_segment::{
    ActiveIndex, ActiveTimeIndex, ReadLimit, SegmentConfig, SegmentFile, SegmentWriter,
    SparseIndex, TimeIndex,
};

use crate::config::{Preallocation, StoreConfig};
use crate::error::{Result, StorageError};
use crate::loom::sync::{MutexGuard, TryMutex, TryMutexGuard};
use crate::metrics::Layout;
use crate::shard::bounds::{Offsets, ReadBound, readable_end};
use crate::shard::commit::Commit;
use crate::shard::shared::Shared;
use combine::MAX_LEAD_ROUNDS;

/// The log's state, each piece under its own lock (see `core.rs` for the
/// order they are taken in), and the parts it reports to: the shard's
/// shared settings and counters, and group commit.
#[derive(Debug)]
pub(crate) struct Log {
    shared: Arc<Shared>,
    /// Group commit, which the log tells what it wrote.
    commit: Arc<Commit>,
    /// The directory's lock and the clean-shutdown record the open kept
    /// (`clean.rs`).
    clean: CleanShutdown,
    /// The writer lock: held by appends, rolls, truncation and retention,
    /// across the `write` system call. Loom's under `--cfg loom`, as the
    /// queue (see `crate::loom`).
    writer: TryMutex<WriterState>,
    /// On-commit batches assigned offsets, waiting for a leader.
    queue: crate::loom::sync::Mutex<Queue>,
    /// Rounds a write-combining leader makes before handing over (a
    /// constant, but a unit test lowers it to make handovers frequent).
    max_lead_rounds: AtomicUsize,
    /// What readers see.
    view: RwLock<View>,
    /// Held by `replace_sealed_segment` from writing its copy to the
    /// rename: replacements run one at a time, so two never share the one
    /// temporary name a copy of a segment has.
    replacing: Mutex<()>,
}

/// The writer lock as taken: `Interrupted` when a panic unwound through an
/// earlier holder, so the state it guards may be half changed.
pub(crate) enum Held<'a> {
    /// The previous holder let it go normally.
    Whole(TryMutexGuard<'a, WriterState>),
    /// A panic interrupted the previous holder.
    Interrupted(TryMutexGuard<'a, WriterState>),
}

impl Log {
    /// The log as an open found it: `writer` at its end, `view` showing it,
    /// the directory's lock held and its clean-shutdown record as `clean`.
    pub(crate) fn new(
        shared: Arc<Shared>,
        commit: Arc<Commit>,
        writer: WriterState,
        view: View,
        clean: CleanShutdown,
    ) -> Self {
        let next = writer.writer.next_offset();
        Self {
            shared,
            commit,
            clean,
            writer: TryMutex::new(writer),
            queue: crate::loom::sync::Mutex::new(Queue::new(next)),
            max_lead_rounds: AtomicUsize::new(MAX_LEAD_ROUNDS),
            view: RwLock::new(view),
            replacing: Mutex::new(()),
        }
    }

    /// What readers see, shared.
    pub(crate) fn view(&self) -> RwLockReadGuard<'_, View> {
        // A panic while holding the lock cannot leave the view half-updated
        // in a way readers could misuse (each update is a few assignments),
        // so a poisoned lock is recovered rather than propagated.
        self.view.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// What readers see, to publish a change (held for a few assignments).
    pub(crate) fn view_mut(&self) -> RwLockWriteGuard<'_, View> {
        self.view.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the writer lock, waiting for it.
    fn lock_state(&self) -> Held<'_> {
        match self.writer.lock() {
            Ok(state) => Held::Whole(state),
            Err(poisoned) => Held::Interrupted(poisoned.into_inner()),
        }
    }

    /// Takes the writer lock if it is free now; `None` while it is held.
    fn try_lock_state(&self) -> Option<Held<'_>> {
        match self.writer.try_lock() {
            Ok(state) => Some(Held::Whole(state)),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => {
                Some(Held::Interrupted(poisoned.into_inner()))
            }
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// The queue of on-commit batches (see `combine.rs`).
    fn queue(&self) -> MutexGuard<'_, Queue> {
        crate::loom::lock(&self.queue)
    }

    /// Rounds a combining leader makes before it hands over.
    fn max_lead_rounds(&self) -> usize {
        self.max_lead_rounds.load(Relaxed).max(1)
    }

    fn check_open(&self) -> Result<()> {
        self.commit.check_open()
    }

    fn check_poison(&self) -> Result<()> {
        self.commit.check_poison()
    }

    /// Stops writes for good, keeping the first failure as the reason.
    fn poison_with(&self, err: StorageError) -> StorageError {
        self.commit.poison_with(err)
    }

    /// Where a read under `bound` ends now, for a reader holding `view`.
    pub(crate) fn end_for(&self, view: &View, bound: ReadBound) -> u64 {
        readable_end(
            bound,
            view.active_limit.next_offset,
            self.commit.durable(),
            self.commit.on_commit(),
            self.commit.poisoned().is_some(),
        )
    }

    /// The log's offsets, as one snapshot: taken under the readers' view,
    /// which every change of the log end holds while it publishes (a cut
    /// lowers the durable offset with it held, too).
    pub(crate) fn offsets(&self) -> Offsets {
        let view = self.view();
        let offsets = Offsets {
            base: view.base_offset(),
            readable: self.end_for(&view, ReadBound::Committed),
            written: view.active_limit.next_offset,
            durable: self.commit.durable().min(view.active_limit.next_offset),
        };
        debug_assert!(
            offsets.base <= offsets.written
                && offsets.readable <= offsets.written
                && offsets.durable <= offsets.written,
            "{offsets:?}"
        );
        offsets
    }

    /// Reports the segments' layout to the metrics: after an open, a roll,
    /// retention, a cut and a replacement.
    pub(crate) fn report_layout(&self) {
        let view = self.view();
        let sealed_bytes = view.sealed.iter().map(|s| s.extent.len).sum();
        self.shared.metrics.layout(Layout {
            base: view.base_offset(),
            sealed_bytes,
            active_len: view.active_limit.end_position,
            segments: view.sealed.len() + 1,
            written: self.commit.written(),
        });
    }

    /// The segments' extents in offset order, the active one last.
    pub(crate) fn extents(&self) -> Vec<SegmentExtent> {
        let view = self.view();
        let mut out: Vec<SegmentExtent> = view.sealed.iter().map(|s| s.extent).collect();
        out.push(view.active_extent());
        out
    }

    /// Makes combining leaders hand over after `rounds` rounds (tests).
    #[cfg(test)]
    pub(crate) fn set_max_lead_rounds(&self, rounds: usize) {
        self.max_lead_rounds.store(rounds, Relaxed);
    }
}

/// A sealed segment as readers and retention see it. Its file, index and
/// time index are opened on first need, so an idle shard of many segments
/// costs neither descriptors nor index memory.
#[derive(Debug)]
pub(crate) struct Sealed {
    pub(crate) extent: SegmentExtent,
    /// The largest record timestamp, once known: set for segments sealed by
    /// this process, taken from the time index otherwise. `Some(None)` for
    /// a segment without records.
    pub(crate) max_timestamp_micros: Mutex<Option<Option<u64>>>,
    /// Whether a time index file that decodes and names this extent may be
    /// used as it is: this process wrote it when it sealed the segment, or a
    /// trusted clean-shutdown record covers the segment (see
    /// docs/storage-format.md). Otherwise the records vouch for it first.
    pub(crate) time_file_trusted: bool,
    /// The time index, sealed, once loaded or built.
    pub(crate) time_index: Mutex<Option<Arc<TimeIndex>>>,
    pub(crate) opened: Mutex<Option<Arc<OpenedSegment>>>,
    /// Set (before the rename) when a replacement swaps this segment's file
    /// for a verified copy (`replace.rs`); the view then lists a new entry.
    pub(crate) replaced: AtomicBool,
}

impl Sealed {
    /// A sealed segment with nothing known beyond its extent.
    pub(crate) fn new(extent: SegmentExtent, time_file_trusted: bool) -> Self {
        Self {
            extent,
            max_timestamp_micros: Mutex::new(None),
            time_file_trusted,
            time_index: Mutex::new(None),
            opened: Mutex::new(None),
            replaced: AtomicBool::new(false),
        }
    }
}

/// A sealed segment's descriptor and index, once loaded.
#[derive(Debug)]
pub(crate) struct OpenedSegment {
    pub(crate) file: Arc<SegmentFile>,
    pub(crate) index: SparseIndex,
    /// Whether the index was built from the segment's records (so every
    /// entry is a record boundary), not loaded from its file.
    pub(crate) vouched: bool,
}

/// What readers see; replaced piecewise under the `view` lock.
#[derive(Debug)]
pub(crate) struct View {
    pub(crate) sealed: Vec<Arc<Sealed>>,
    pub(crate) active: Arc<SegmentFile>,
    /// What the writer has fully written: readers never go past it.
    pub(crate) active_limit: ReadLimit,
    /// The active segment's index, shared with its writer.
    pub(crate) active_index: ActiveIndex,
    /// The active segment's time index, shared with its writer.
    pub(crate) active_time_index: ActiveTimeIndex,
    /// The largest timestamp the writer has written to the active segment.
    pub(crate) active_max_timestamp: Option<u64>,
    /// Where the log begins as recorded (by a deletion of records or a
    /// reset); the log begins there or at its first segment, whichever is
    /// later.
    pub(crate) log_start: u64,
}

impl View {
    /// The oldest offset a read may ask for: the log start, or the first
    /// segment's base offset once retention has removed more.
    pub(crate) fn base_offset(&self) -> u64 {
        let first = self
            .sealed
            .first()
            .map_or(self.active.base_offset(), |s| s.extent.base_offset);
        first.max(self.log_start)
    }

    /// Points readers at `writer`'s segment, its index, time index and
    /// limit.
    pub(crate) fn follow(&mut self, writer: &SegmentWriter) {
        self.active = Arc::clone(writer.segment());
        self.active_limit = writer.read_limit();
        self.active_index = writer.active_index();
        self.active_time_index = writer.active_time_index();
        self.active_max_timestamp = writer.max_timestamp_micros();
    }

    /// The active segment as far as readers see it.
    pub(crate) fn active_extent(&self) -> SegmentExtent {
        SegmentExtent {
            id: self.active.id(),
            base_offset: self.active.base_offset(),
            next_offset: self.active_limit.next_offset,
            len: self.active_limit.end_position,
        }
    }
}

/// The writer's side, under the writer lock.
#[derive(Debug)]
pub(crate) struct WriterState {
    pub(crate) writer: SegmentWriter,
    /// The id the next segment gets; `None` once the active segment's id is
    /// `u64::MAX`, the last there is (a roll is then refused).
    pub(crate) next_segment_id: Option<u64>,
    /// Buffers for writing queued batches, kept between uses.
    pub(crate) spare: Spare,
    /// Bytes appended without a sync of their own since the last
    /// background writeback was requested.
    pub(crate) unsynced_bytes: u64,
}

/// One segment of a shard, as [`crate::Shard::segments`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Its id, offsets and length (the active segment's as far as it is
    /// written).
    pub extent: SegmentExtent,
    /// Whether it is the segment appends go to.
    pub active: bool,
    /// The largest timestamp among its records (the active segment's as far
    /// as it is written), from its time index: what
    /// [`Retention::max_age`](crate::Retention::max_age) measures. `None`
    /// for a segment without records, or one whose records could not be
    /// read (the error is logged; a read there reports it).
    pub max_timestamp_micros: Option<u64>,
}

/// How the segment layer writes a shard's segments.
pub(crate) fn segment_config(config: &StoreConfig) -> SegmentConfig {
    SegmentConfig {
        index_spacing_bytes: config.index_spacing_bytes,
        preallocate_bytes: (config.preallocate == Preallocation::WholeSegment)
            .then_some(config.segment_size_bytes),
    }
}

/// The first step of a [`Preallocation::Stepped`] reservation.
pub(crate) const FIRST_RESERVATION_BYTES: u64 = 32 << 10;
/// The largest step of a [`Preallocation::Stepped`] reservation.
pub(crate) const MAX_RESERVATION_STEP_BYTES: u64 = 64 << 20;

/// Where a [`Preallocation::Stepped`] reservation should end for a segment
/// about to hold `end` bytes, or `None` when `reserved` already covers it.
///
/// The step is as large as what the segment holds, between 32 KiB and
/// 64 MiB, so a small shard reserves little and a large one reserves (and
/// calls `fallocate`) rarely; it never goes past the segment size, except
/// by what a batch larger than that needs itself.
pub(crate) fn next_reservation(end: u64, reserved: u64, segment_size_bytes: u64) -> Option<u64> {
    if end <= reserved {
        return None;
    }
    let step = end.clamp(FIRST_RESERVATION_BYTES, MAX_RESERVATION_STEP_BYTES);
    Some(end.saturating_add(step).min(segment_size_bytes.max(end)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_reservation_grows_in_bounded_steps_up_to_the_segment_size() {
        const GIB: u64 = 1 << 30;
        // The first record of a segment reserves 32 KiB past it.
        assert_eq!(next_reservation(160, 0, GIB), Some(160 + (32 << 10)));
        // Nothing while the reservation covers the write.
        assert_eq!(next_reservation(1000, 70_000, GIB), None);
        // Then as much again as the segment holds...
        assert_eq!(next_reservation(1 << 20, 1000, GIB), Some(2 << 20));
        // ...at most 64 MiB at a time...
        assert_eq!(next_reservation(512 << 20, 0, GIB), Some(576 << 20));
        // ...and never past the segment size, unless the batch itself is.
        assert_eq!(next_reservation(GIB - 10, 0, GIB), Some(GIB));
        assert_eq!(next_reservation(2 * GIB, 0, GIB), Some(2 * GIB));
        // A small segment is reserved whole at once.
        assert_eq!(next_reservation(100, 0, 600), Some(600));
    }
}
