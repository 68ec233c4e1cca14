//! What every part of a shard reads or counts into: its settings (fixed at
//! open), its counters and metric handles, and the notes it keeps.
//!
//! The settings never change after the open, so they are plain fields
//! every part reads; the counters are atomics and the metric handles
//! record through `&self`, so nothing here is guarded by a part's lock.
//! The notes are the one piece of state with an invariant (recovery's
//! first, then one per index a read found stale, in order), kept private
//! behind [`Shared::add_note`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use felix_io::FileSystem;
use felix_recovery::{Action, Note};
use felix_segment::{ReadBuffers, SegmentError};

use crate::clock::Clock;
use crate::config::StoreConfig;
use crate::error::StorageError;
use crate::metrics::ShardMetrics;
use crate::stats::{Counters, ShardStats};

/// A shard's settings, counters, metrics and notes, shared by its parts.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) fs: FileSystem,
    pub(crate) label: Arc<str>,
    pub(crate) dir: PathBuf,
    pub(crate) config: StoreConfig,
    pub(crate) clock: Arc<dyn Clock>,
    /// Buffers large reads fill and reuse (the store's, shared by its
    /// shards, or the shard's own).
    pub(crate) read_buffers: Arc<ReadBuffers>,
    pub(crate) counters: Counters,
    /// The shard's metric handles (empty without the `metrics` feature).
    pub(crate) metrics: ShardMetrics,
    recovery_time: Duration,
    recovery_actions: Vec<Action>,
    /// Recovery's notes, then one per index a read found stale.
    notes: Mutex<Vec<Note>>,
}

/// What recovery reported at the open, kept for the stats.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) time: Duration,
    pub(crate) actions: Vec<Action>,
    pub(crate) notes: Vec<Note>,
}

impl Shared {
    /// The shared state of a shard an open has just recovered.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        fs: FileSystem,
        label: Arc<str>,
        dir: PathBuf,
        config: StoreConfig,
        clock: Arc<dyn Clock>,
        read_buffers: Arc<ReadBuffers>,
        counters: Counters,
        metrics: ShardMetrics,
        opened: Opened,
    ) -> Self {
        Self {
            fs,
            label,
            dir,
            config,
            clock,
            read_buffers,
            counters,
            metrics,
            recovery_time: opened.time,
            recovery_actions: opened.actions,
            notes: Mutex::new(opened.notes),
        }
    }

    /// A segment layer failure, said of this shard.
    pub(crate) fn segment_error(&self, source: SegmentError) -> StorageError {
        StorageError::Segment {
            shard: Arc::clone(&self.label),
            source,
        }
    }

    /// Records a fact about the shard that is not damage (see
    /// [`ShardStats::notes`]).
    pub(crate) fn add_note(&self, note: Note) {
        self.notes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(note);
    }

    /// How long the open took, and how many actions recovery took.
    pub(crate) fn recovery(&self) -> (Duration, usize) {
        (self.recovery_time, self.recovery_actions.len())
    }

    /// A snapshot of the counters, recovery's report and the notes, with
    /// group commit's `syncs`.
    pub(crate) fn stats(&self, syncs: (u64, u64)) -> ShardStats {
        let notes = self
            .notes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.counters.snapshot(
            self.recovery_time,
            self.recovery_actions.clone(),
            notes,
            syncs,
        )
    }
}
