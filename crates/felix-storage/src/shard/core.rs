//! The shard's parts, and the state its handle, background threads and
//! store share.
//!
//! `Core` is a composition of parts, each owning its state behind private
//! fields; calls go one way, down this list:
//!
//! - `Core` itself: the shard's operations that need more than one part
//!   (replication and cuts in `replica.rs`, deletions from the head in
//!   `retention.rs`, appends reporting through completions in
//!   `requests.rs`), each a few calls to the parts below, in order, holding
//!   the log's writer guard where the log and the generations must change
//!   together; the rest the shard's handle asks a part for directly;
//! - `log: Log` (`log/mod.rs`): the writer lock, the on-commit queue, the
//!   readers' view, the directory lock and the clean-shutdown record, and
//!   the work done under the writer lock (appends, rolls, cuts, the log
//!   start, reads); it publishes what it wrote to group commit;
//! - `generations: Generations` (`generations.rs`), beside the log (neither
//!   calls the other): the generation history and its file;
//! - `commit: Commit` (`commit/`): group commit, which keeps the durability
//!   policy and reaches the log only through `QueuedWrites` (implemented
//!   here, by handing the call to the log);
//! - `shared: Shared` (`shared.rs`), read by all: the settings fixed at
//!   open, the counters, the metric handles and the notes.
//!
//! Nothing below `Core` names it or a part above it: `cargo xtask
//! layering` checks the order (`STORAGE_UNITS`: `shard::log`,
//! `shard::generations`, `shard::commit`, `shard::shared`).
//!
//! Locking, in the order they may be taken:
//!
//! 0. the log's replacement lock — held by a replacement of a sealed
//!    segment from writing its copy to the rename (`log/replace.rs`).
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
//! 5. the generations' history (see `generations.rs`).
//!
//! Leaf locks taken with none of these held: the sync pool's queue (a
//! shard queues itself after releasing `commit`) and a shard's in-flight
//! room (appenders waiting for a place).

use std::path::Path;
use std::sync::Arc;

use felix_io::FileSystem;

use super::bounds::Offsets;
use super::commit::{Commit, QueuedWrites};
use super::generations::Generations;
use super::log::{Log, SegmentInfo};
use super::shared::Shared;
use crate::config::StoreConfig;
use crate::error::Result;
use crate::stats::ShardStats;

/// One shard's parts: its log, generations, group commit and what they
/// share (see the module docs).
#[derive(Debug)]
pub(crate) struct Core {
    shared: Arc<Shared>,
    log: Log,
    commit: Arc<Commit>,
    generations: Generations,
}

impl Core {
    /// The shard made of these parts (`log` and `generations` report to
    /// `commit`, and all of them share `shared`).
    pub(crate) fn new(
        shared: Arc<Shared>,
        log: Log,
        commit: Arc<Commit>,
        generations: Generations,
    ) -> Self {
        Self {
            shared,
            log,
            commit,
            generations,
        }
    }

    /// The settings, counters, metrics and notes the parts share.
    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The log.
    pub(crate) fn log(&self) -> &Log {
        &self.log
    }

    /// Group commit.
    pub(crate) fn commit(&self) -> &Arc<Commit> {
        &self.commit
    }

    /// The generation history.
    pub(crate) fn generations(&self) -> &Generations {
        &self.generations
    }

    /// The shard's name in errors, logs and metrics.
    pub(crate) fn label(&self) -> &Arc<str> {
        &self.shared.label
    }

    /// The shard's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The shard's configuration.
    pub(crate) fn config(&self) -> &StoreConfig {
        &self.shared.config
    }

    /// The file system the shard reads and writes through.
    pub(crate) fn fs(&self) -> &FileSystem {
        &self.shared.fs
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        self.commit.check_open()
    }

    /// The log's offsets, as one snapshot (see [`Log::offsets`]).
    pub(crate) fn offsets(&self) -> Offsets {
        self.log.offsets()
    }

    /// Whether appends on this shard wait for durability (group commit
    /// keeps the policy).
    pub(crate) fn on_commit(&self) -> bool {
        self.commit.on_commit()
    }

    /// Makes everything written so far durable (see [`Log::sync`]).
    pub(crate) fn sync(&self) -> Result<()> {
        self.log.sync()
    }

    /// Closes the shard (see [`Log::close`]).
    pub(crate) fn close(&self) -> Result<()> {
        self.log.close()
    }

    /// Closes the shard as a store does, leaving one already closed as it
    /// is (see [`Log::close_for_store`]).
    pub(crate) fn close_for_store(&self) -> Result<()> {
        self.log.close_for_store()
    }

    /// The shard's segments in offset order, the active one last (see
    /// [`Log::segments`]).
    pub(crate) fn segments(&self) -> Vec<SegmentInfo> {
        self.log.segments()
    }

    /// A snapshot of the shard's counters.
    pub(crate) fn stats(&self) -> ShardStats {
        let syncs = (
            self.commit.syncs.load(std::sync::atomic::Ordering::Relaxed),
            self.commit
                .synced_appends
                .load(std::sync::atomic::Ordering::Relaxed),
        );
        // A read of the stats is a point where the metrics catch up.
        self.shared.metrics.catch_up(self.commit.written());
        self.shared.stats(syncs)
    }

    /// Reports an open to the metrics: its time, recovery's actions, and
    /// where the log stands.
    pub(crate) fn report_open(&self) {
        let (time, actions) = self.shared.recovery();
        self.shared.metrics.opened(time, actions);
        self.log.report_layout();
        self.shared.metrics.durable(self.commit.durable());
    }
}

/// Group commit asks the shard to write its queue before a sync; the log
/// does (see `Log::write_queued`).
impl QueuedWrites for Core {
    fn write_queued(&self) -> bool {
        self.log.write_queued()
    }
}
