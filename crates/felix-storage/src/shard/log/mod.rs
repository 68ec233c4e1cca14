//! The log: its writer (appends, rolls, cuts) and the view readers share.
//!
//! [`Log`] owns the log's state: the writer under the writer lock, the
//! queue of on-commit batches waiting for a combining leader
//! (`combine.rs`), and the [`View`] readers copy from. What readers need of
//! the writer (the segments, the active segment's readable limit and
//! index) is published into the view after each change, so a reader never
//! takes the writer lock and never passes the writer's limit.
//!
//! The writer lock is taken only here: [`WriterGuard`] (`combine.rs`) is the
//! one way to hold it, and a combining leader's rounds the other. A panic
//! while it is held leaves a write half done (bytes in the file the view
//! does not know, a queue whose offsets were assigned): the lock is then
//! poisoned, and so is the shard (`StorageError::WriteInterrupted`), so no
//! write follows one that was cut short.
//!
//! Calls go one way: the shard's operations (`Core`) use the log, and the
//! log publishes what it wrote to group commit (`commit/`); group commit
//! asks the log for nothing but to write its queue before a sync, through
//! the `QueuedWrites` trait the shard implements.

mod append;
mod combine;
mod cut;
mod read;
mod start;
mod time;

pub(crate) use append::Synced;
pub(crate) use combine::{Queue, Spare, WriterGuard};
pub use read::ReadRecord;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use felix_format::SegmentExtent;

use felix_segment::{
    ActiveIndex, ActiveTimeIndex, ReadLimit, SegmentConfig, SegmentFile, SegmentWriter,
    SparseIndex, TimeIndex,
};

use crate::config::{Preallocation, StoreConfig};
use crate::loom::sync::{MutexGuard, TryMutex, TryMutexGuard};
use combine::MAX_LEAD_ROUNDS;

/// The log's state, each piece under its own lock (see `core.rs` for the
/// order they are taken in).
#[derive(Debug)]
pub(crate) struct Log {
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
    /// The log as an open found it: `writer` at its end, `view` showing it.
    pub(crate) fn new(writer: WriterState, view: View) -> Self {
        let next = writer.writer.next_offset();
        Self {
            writer: TryMutex::new(writer),
            queue: crate::loom::sync::Mutex::new(Queue::new(next)),
            max_lead_rounds: AtomicUsize::new(MAX_LEAD_ROUNDS),
            view: RwLock::new(view),
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
    fn lock_writer(&self) -> Held<'_> {
        match self.writer.lock() {
            Ok(state) => Held::Whole(state),
            Err(poisoned) => Held::Interrupted(poisoned.into_inner()),
        }
    }

    /// Takes the writer lock if it is free now; `None` while it is held.
    fn try_lock_writer(&self) -> Option<Held<'_>> {
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
