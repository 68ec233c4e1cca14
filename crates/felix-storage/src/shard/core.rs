//! The shard's parts, and the state its handle, background threads and
//! store share.
//!
//! Parts, each owning its state (calls go one way, down this list):
//!
//! - `Core` itself: the shard's operations (appends, reads, cuts,
//!   replication, retention, close, in the `impl Core` files beside this
//!   one) and what they share: the settings, counters, metrics, recovery's
//!   report and the directory lock;
//! - `log: Log` (`log/mod.rs`): the writer lock, the on-commit queue and
//!   the readers' view; it publishes what it wrote to group commit;
//! - `generations: Generations` (`generations.rs`): the generation history;
//! - `commit: Commit` (`commit/`): group commit, which keeps the durability
//!   policy and reaches the log only through `QueuedWrites`.
//!
//! Locking, in the order they may be taken:
//!
//! 1. the log's writer lock — held by appends, rolls, truncation and
//!    retention, across the `write` system call. Readers never take it.
//!    A panic while it is held poisons the shard (`log/combine.rs`).
//! 2. the log's queue — on-commit appends waiting to be written (see
//!    `log/combine.rs`). Appenders take it alone, briefly; holders of
//!    the writer lock take it after.
//! 3. the log's view — what readers see (segments, the active segment's
//!    limit and index). Held only to copy a few fields out or to publish an
//!    append; never across a system call, so a slow disk never blocks a
//!    reader.
//! 4. `commit` — group commit's state and the waiter list (see
//!    `commit/mod.rs`). Never held across `fdatasync`: the syncing thread
//!    (a sync pool worker, or a lone appender) releases it, so appenders
//!    keep writing while a sync is in flight, and the next sync covers
//!    everything they wrote. Under it, briefly: a completion's slot, and
//!    the pool's dispatch queue (callbacks are queued in offset order).
//! 5. `history` — the generation history (see `generations.rs`).
//!
//! Leaf locks taken with none of these held: the sync pool's queue (a
//! shard queues itself after releasing `commit`) and a shard's in-flight
//! room (appenders waiting for a place).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use felix_format::SegmentExtent;
use felix_io::FileSystem;
use felix_recovery::{Action, Note};
use felix_segment::{ReadBuffers, SegmentError};

use super::bounds::{Offsets, ReadBound, readable_end};
use super::commit::Commit;
use super::generations::Generations;
use super::log::{Log, View};
use crate::clock::Clock;
use crate::config::StoreConfig;
use crate::error::{Result, StorageError};
use crate::lock::ShardLock;
use crate::metrics::{Layout, ShardMetrics};
use crate::stats::{Counters, ShardStats};

/// One shard's state: the log (writer and readers' view), group commit,
/// and generations.
#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) fs: FileSystem,
    pub(crate) label: Arc<str>,
    pub(crate) dir: PathBuf,
    pub(crate) config: StoreConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) log: Log,
    pub(crate) commit: Arc<Commit>,
    pub(crate) generations: Generations,
    pub(crate) counters: Counters,
    /// The shard's metric handles (empty without the `metrics` feature).
    pub(crate) metrics: ShardMetrics,
    pub(crate) recovery_time: Duration,
    pub(crate) recovery_actions: Vec<Action>,
    /// Recovery's notes, then one per index a read found stale.
    pub(crate) notes: Mutex<Vec<Note>>,
    /// Held from open until close (or drop).
    pub(crate) lock: Mutex<Option<ShardLock>>,
    /// Whether the clean-shutdown file the open found is still in the
    /// directory (a store's shards keep it: `ShardOptions::keep_clean_shutdown`),
    /// still true of the sealed segments; cleared, with the file removed,
    /// before any roll, truncation or retention changes them.
    pub(crate) clean_shutdown_kept: AtomicBool,
    /// The newest segment as the kept clean-shutdown record lists it, when
    /// known to be so (the open found it so).
    pub(crate) clean_record_newest: Mutex<Option<SegmentExtent>>,
    /// Buffers large reads fill and reuse (the store's, shared by its
    /// shards, or the shard's own).
    pub(crate) read_buffers: Arc<ReadBuffers>,
    /// Held by `replace_sealed_segment` from writing its copy to the
    /// rename: replacements of one shard run one at a time, so two never
    /// share the one temporary name a copy of a segment has.
    pub(crate) replacing: Mutex<()>,
}

impl Core {
    pub(crate) fn segment_error(&self, source: SegmentError) -> StorageError {
        StorageError::Segment {
            shard: Arc::clone(&self.label),
            source,
        }
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        self.commit.check_open()
    }

    pub(crate) fn check_poison(&self) -> Result<()> {
        self.commit.check_poison()
    }

    /// Stops writes for good, keeping the first failure as the reason.
    pub(crate) fn poison_with(&self, err: StorageError) -> StorageError {
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
        let view = self.log.view();
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

    /// A snapshot of the shard's counters.
    pub(crate) fn stats(&self) -> ShardStats {
        let syncs = (
            self.commit.syncs.load(Relaxed),
            self.commit.synced_appends.load(Relaxed),
        );
        let notes = self
            .notes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // A read of the stats is a point where the metrics catch up.
        self.metrics.catch_up(self.commit.written());
        self.counters.snapshot(
            self.recovery_time,
            self.recovery_actions.clone(),
            notes,
            syncs,
        )
    }

    /// Records a fact about the shard that is not damage (see
    /// [`ShardStats::notes`]).
    pub(crate) fn add_note(&self, note: Note) {
        self.notes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(note);
    }

    /// Reports an open to the metrics: its time, recovery's actions, and
    /// where the log stands.
    pub(crate) fn report_open(&self) {
        self.metrics
            .opened(self.recovery_time, self.recovery_actions.len());
        self.report_layout();
        self.metrics.durable(self.commit.durable());
    }

    /// Reports the segments' layout to the metrics: after an open, a roll,
    /// retention, a cut and a replacement.
    pub(crate) fn report_layout(&self) {
        let view = self.log.view();
        let sealed_bytes = view.sealed.iter().map(|s| s.extent.len).sum();
        self.metrics.layout(Layout {
            base: view.base_offset(),
            sealed_bytes,
            active_len: view.active_limit.end_position,
            segments: view.sealed.len() + 1,
            written: self.commit.written(),
        });
    }

    /// Releases the shard directory's lock (at close), so the directory
    /// can be opened again while handles to this shard still exist.
    pub(crate) fn release_lock(&self) {
        self.lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}
