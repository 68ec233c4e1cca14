//! Where a shard's syncs stand, as two small state machines under the
//! commit lock: the [`Stage`] of its next (or current) sync and the
//! [`Mode`] group commit runs in. Each transition is one method that
//! asserts (in debug builds) the state it leaves, so a combination the
//! protocol never makes (a shard queued while a sync of it is in flight,
//! a worker lingering without the shard's turn, a stopped shard paused)
//! cannot be represented, and a transition from the wrong state fails
//! loudly in every test and loom model.

use super::CommitState;

/// Where the shard's sync stands: at most one of queued, lingering or in
/// flight at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// No sync queued or in flight.
    Idle,
    /// In its pool's queue, waiting for a worker, or kept by the worker
    /// that last synced it for its next turn (`job.rs`, `Commit::keep`).
    /// No appender syncs inline meanwhile.
    Queued,
    /// Queued, and the worker that took the turn waits for the appenders
    /// the last sync woke to append again before it syncs (`job.rs`,
    /// `Commit::linger`).
    Lingering,
    /// An `fdatasync` is in flight (a pool worker's, or an idle shard's
    /// appender's own).
    Syncing,
}

/// Whether syncs may begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Syncs begin when a waiter needs one.
    Running,
    /// No sync may begin: the writer is rolling to a new segment (see
    /// `Commit::pause_syncs`).
    Paused,
    /// The shard closed or was dropped: no more syncs are queued. Final.
    Stopped,
}

impl CommitState {
    /// Where the shard's sync stands.
    pub(super) fn stage(&self) -> Stage {
        self.stage
    }

    /// Whether an `fdatasync` is in flight.
    pub(super) fn syncing(&self) -> bool {
        self.stage == Stage::Syncing
    }

    /// Whether the shard has a sync queued (lingering included) or in
    /// flight: nothing else may queue it or sync inline.
    pub(super) fn busy(&self) -> bool {
        self.stage != Stage::Idle
    }

    /// Idle → queued: the shard goes into its pool's queue (or is kept by
    /// the worker for its next turn).
    pub(super) fn queue(&mut self) {
        debug_assert_eq!(self.stage, Stage::Idle, "queued while busy");
        self.stage = Stage::Queued;
    }

    /// Queued → idle: the turn ends without a sync, or no worker took it.
    pub(super) fn unqueue(&mut self) {
        debug_assert_eq!(self.stage, Stage::Queued, "unqueued while not queued");
        self.stage = Stage::Idle;
    }

    /// Queued → lingering: the worker with the turn waits for appenders.
    pub(super) fn begin_linger(&mut self) {
        debug_assert_eq!(self.stage, Stage::Queued, "lingering without the turn");
        self.stage = Stage::Lingering;
    }

    /// Lingering → queued: the worker stops waiting, still holding the turn.
    pub(super) fn end_linger(&mut self) {
        debug_assert_eq!(self.stage, Stage::Lingering, "not lingering");
        self.stage = Stage::Queued;
    }

    /// Idle → syncing: one sync of a shard at a time, and never while it
    /// is queued (a worker gives up the queue first).
    pub(super) fn begin_sync(&mut self) {
        debug_assert_eq!(self.stage, Stage::Idle, "one sync of a shard at a time");
        debug_assert_eq!(
            self.mode,
            Mode::Running,
            "a sync began while paused or stopped"
        );
        self.stage = Stage::Syncing;
    }

    /// Syncing → idle.
    pub(super) fn end_sync(&mut self) {
        debug_assert_eq!(self.stage, Stage::Syncing, "no sync in flight");
        self.stage = Stage::Idle;
    }

    /// The mode group commit runs in.
    pub(super) fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether syncs may begin.
    pub(super) fn running(&self) -> bool {
        self.mode == Mode::Running
    }

    /// Whether the shard closed or was dropped.
    pub(super) fn stopped(&self) -> bool {
        self.mode == Mode::Stopped
    }

    /// Running → paused (a stopped shard stays stopped).
    pub(super) fn pause(&mut self) {
        debug_assert_ne!(self.mode, Mode::Paused, "syncs paused twice");
        if self.mode == Mode::Running {
            self.mode = Mode::Paused;
        }
    }

    /// Paused → running (a stopped shard stays stopped).
    pub(super) fn resume(&mut self) {
        debug_assert_ne!(self.mode, Mode::Running, "syncs resumed without a pause");
        if self.mode == Mode::Paused {
            self.mode = Mode::Running;
        }
    }

    /// Any mode → stopped, for good.
    pub(super) fn stop(&mut self) {
        self.mode = Mode::Stopped;
    }
}
