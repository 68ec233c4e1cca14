//! Group commit: syncs run by the sync pool back to back while appends
//! continue, completing exactly the waiters each sync covered.
//!
//! Who does what:
//!
//! - An appender writes its batch (under the writer lock, or through the
//!   write-combining queue, `log/combine.rs`) and registers what it needs
//!   durable on the shard's one waiter list (`waiters.rs`): a blocking
//!   append parks its thread, an append's future or callback returns at
//!   once (`durable.rs`, `completion.rs`). A lone blocking appender on an
//!   idle shard syncs inline instead (two thread switches less latency).
//! - When a waiter needs a sync and none is in flight or queued, the shard
//!   queues itself once on its sync pool (`crate::pool`, the store's, or a
//!   lone shard's own). A pool worker runs one sync (`job.rs`): it reads
//!   how far the log is written under the commit lock, releases it, runs
//!   one `fdatasync`, and under the lock again moves the durable offset and
//!   completes every waiter it covered, in offset order (`settle.rs`).
//! - The worker then unparks the threads and wakes the wakers it completed
//!   (with no lock held), and, if more waiters need a sync, queues the
//!   shard again at the back: a busy shard is synced back to back, and
//!   shards take turns. Callbacks run on the pool's dispatch thread.
//!
//! Appends that arrive while a sync is in flight are covered by the next
//! one, so a hundred concurrent appenders cost a handful of syncs. An
//! append with a future or a callback that arrives while a sync is pending
//! is not even written: its batch is queued with its offsets
//! (`log/combine.rs`), and the worker has every queued batch written, in one
//! `write`, just before its next sync (`job.rs`, [`QueuedWrites`]), so
//! the appending thread makes no system call and writes no page the sync
//! is writing back.
//! Consumers waiting for the tail (`tail.rs`) are on the same list and are
//! completed by the same sync or append.
//!
//! A failed sync is never retried: it poisons the shard. Every waiter that
//! was waiting then (the appends the failed sync covered) completes with
//! the original error; every call made afterwards gets
//! [`StorageError::Poisoned`]. Poisoning freezes the durable offset, so
//! what readers are served stays what was acknowledged. A close or a drop
//! completes every waiter left with [`StorageError::ShardClosed`]: none is left
//! hanging.
//!
//! The protocol is model-checked with loom (`loom_tests.rs`).
//!
//! Invariants (asserted in debug builds): `durable ≤ written ≤ assigned`;
//! `durable` only moves back when the log is cut; a shard is queued on its
//! pool at most once, and never while a sync of it is in flight.

mod completion;
mod durable;
mod in_flight;
mod job;
mod settle;
mod state;
mod tail;
mod waiters;

pub use completion::{AppendFuture, DurableFuture, TailFuture};
pub(crate) use in_flight::Admission;
pub(crate) use waiters::Completion;

use std::sync::atomic::AtomicU64 as StatCounter;
use std::sync::{Arc, OnceLock, Weak};

use felix_segment::{SegmentError, SyncHandle};

use crate::config::Durability;
use crate::error::{Result, StorageError};
use crate::loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use crate::loom::sync::{Condvar, Mutex, MutexGuard};
use crate::metrics::ShardMetrics;
use crate::pool::SyncPool;
use in_flight::InFlight;
use settle::{Deferred, Settle};
use state::{Mode, Stage};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release, SeqCst};
use waiters::Waiters;

/// What a sync makes durable: the active segment's data.
pub(crate) trait SyncData: Send + Sync + std::fmt::Debug {
    /// One `fdatasync`.
    fn sync_data(&self) -> felix_segment::Result<()>;
}

impl SyncData for SyncHandle {
    fn sync_data(&self) -> felix_segment::Result<()> {
        SyncHandle::sync_data(self)
    }
}

/// Who writes the batches queued with their offsets assigned
/// (`log/combine.rs`): the shard, so that a sync worker has them written, in one
/// `write`, just before the sync that covers them.
pub(crate) trait QueuedWrites: Send + Sync + std::fmt::Debug {
    /// Writes every batch queued so far (a failure poisons the shard, and
    /// so fails their waiters), unless the writer lock is held: then it
    /// returns `false` at once, and the holder writes them. A writer's
    /// guard writes the queue when it is taken and keeps it locked while
    /// held; a combining leader writes until the queue is empty or hands
    /// the lead to an appender with a batch queued (with only futures'
    /// batches left it writes them first). Every holder pokes the pool
    /// after a write, never without one, so the worker, which clears its
    /// queued mark before it last looks at what is written, misses none. A worker
    /// never waits for the lock: a roll holds it across a seal's
    /// `fdatasync`, a close across its last sync (which this worker may be
    /// the one to make), and every other shard's syncs would wait too.
    fn write_queued(&self) -> bool;
}

/// What group commit knows, under the commit lock.
#[derive(Debug)]
pub(crate) struct CommitState {
    /// One past the last offset a completed sync covers.
    durable: u64,
    /// Syncs the active segment.
    handle: Arc<dyn SyncData>,
    /// Appenders and consumers waiting for the log to move.
    waiters: Waiters,
    /// Whether a sync is queued, lingering or in flight (`state.rs`).
    stage: Stage,
    /// Whether syncs may begin: running, paused by a roll, or stopped
    /// (`state.rs`).
    mode: Mode,
    /// Bumped whenever the log is cut or replaced: a sync that began before
    /// may cover offsets that no longer hold the records it wrote, so its
    /// completion must not advance `durable`.
    log_epoch: u64,
    /// A background sync was asked for although nobody waits (see
    /// [`Commit::request_writeback`]): a request the next sync takes, not
    /// a state of the protocol.
    writeback: bool,
    /// Appends with a future or a callback the last sync completed.
    woken_last: usize,
    /// How long the last sync took.
    last_sync: std::time::Duration,
}

/// Group commit's shared half: the shard, the pool's workers and the
/// shard's futures hold it.
#[derive(Debug)]
pub(crate) struct Commit {
    /// This commit, for queuing itself on the pool from `&self`.
    me: Weak<Commit>,
    label: Arc<str>,
    /// The shard's durability policy: the one place it is kept once the
    /// shard is open (everything else asks [`Commit::durability`]).
    durability: Durability,
    /// One past the last offset written. Appenders publish it without the
    /// commit lock (they hold the writer lock, which orders them); it only
    /// moves backwards in `reset_log`, under the commit lock, so a reader
    /// holding the commit lock sees it consistent with `log_epoch`.
    written: AtomicU64,
    /// One past the last offset assigned: `written` plus on-commit batches
    /// queued for the combining leader (`log/combine.rs`). Waits are clamped to
    /// it, not to `written`, so a queued batch is waited for.
    assigned: AtomicU64,
    /// `CommitState::durable`, for readers that take no commit lock.
    durable: AtomicU64,
    /// `Waiters::tail_written`: appends take the commit lock to wake a
    /// consumer only when someone watches the written offset.
    tail_written: AtomicUsize,
    state: Mutex<CommitState>,
    /// Signalled when a sync finishes while syncs are paused, and when
    /// enough appenders came back for a lingering worker.
    idle: Condvar,
    /// The failure that stopped writes. Set under the commit lock, so that
    /// it and the durable offset it froze are seen together.
    poison: OnceLock<Arc<StorageError>>,
    /// Set under the commit lock when the shard closes.
    closed: AtomicBool,
    /// Runs this shard's syncs and callbacks.
    pool: SyncPool,
    /// Appends whose completion is pending, and their bound.
    in_flight: InFlight,
    /// `fdatasync`s made for durability.
    pub(crate) syncs: StatCounter,
    /// Waits that were satisfied.
    pub(crate) synced_appends: StatCounter,
    /// The shard's metric handles (`metrics/mod.rs`).
    pub(crate) metrics: ShardMetrics,
    /// The shard, which writes queued batches before a sync (`job.rs`).
    /// Unset (a commit on its own, as the model checks it): syncs cover
    /// what is written, and nothing is queued for them.
    writes: OnceLock<Weak<dyn QueuedWrites>>,
}

impl Commit {
    pub(crate) fn new(
        label: Arc<str>,
        durability: Durability,
        next_offset: u64,
        handle: impl SyncData + 'static,
        pool: SyncPool,
        max_in_flight: usize,
        metrics: ShardMetrics,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            label,
            durability,
            written: AtomicU64::new(next_offset),
            assigned: AtomicU64::new(next_offset),
            durable: AtomicU64::new(next_offset),
            tail_written: AtomicUsize::new(0),
            state: Mutex::new(CommitState {
                durable: next_offset,
                handle: Arc::new(handle),
                waiters: Waiters::default(),
                stage: Stage::Idle,
                mode: Mode::Running,
                log_epoch: 0,
                writeback: false,
                woken_last: 0,
                last_sync: std::time::Duration::ZERO,
            }),
            idle: Condvar::new(),
            poison: OnceLock::new(),
            closed: AtomicBool::new(false),
            pool,
            in_flight: InFlight::new(max_in_flight),
            syncs: StatCounter::new(0),
            synced_appends: StatCounter::new(0),
            writes: OnceLock::new(),
            metrics,
        })
    }

    /// The commit state (see [`crate::loom::lock`] on poisoned locks).
    pub(crate) fn lock(&self) -> MutexGuard<'_, CommitState> {
        crate::loom::lock(&self.state)
    }

    /// The shard's label, as errors name it.
    pub(crate) fn label(&self) -> &Arc<str> {
        &self.label
    }

    /// The failure that stopped writes, if any.
    pub(crate) fn poisoned(&self) -> Option<&Arc<StorageError>> {
        self.poison.get()
    }

    /// Whether appends wait for durability and reads end at the durable
    /// offset: the policy is on-commit.
    pub(crate) fn on_commit(&self) -> bool {
        self.durability == Durability::OnCommit
    }

    pub(crate) fn check_poison(&self) -> Result<()> {
        match self.poison.get() {
            Some(original) => Err(StorageError::Poisoned {
                shard: Arc::clone(&self.label),
                original: Arc::clone(original),
            }),
            None => Ok(()),
        }
    }

    /// Whether the shard was closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Acquire)
    }

    fn closed_error(&self) -> StorageError {
        StorageError::ShardClosed {
            shard: Arc::clone(&self.label),
        }
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            return Err(self.closed_error());
        }
        Ok(())
    }

    /// Stops writes for good, keeping the first failure as the reason, and
    /// completes every waiter with it. Returns the error for the caller:
    /// its own failure when it is the first (it is this call's error), else
    /// `Poisoned` naming the first.
    ///
    /// A segment writer that refuses work because an earlier failure
    /// stopped it answers with its own "poisoned" error; the reason kept is
    /// the failure underneath, so no message ever nests one stop in another.
    pub(crate) fn poison_with(&self, err: StorageError) -> StorageError {
        let (reason, own) = Self::reason_of(err);
        self.poison_locked(self.lock(), reason, own)
    }

    /// The reason to keep for `err`, and whether it is the caller's own
    /// failure (see [`Commit::poison_with`]).
    fn reason_of(err: StorageError) -> (StorageError, bool) {
        match err {
            StorageError::Segment {
                shard,
                source: SegmentError::Poisoned { original, .. },
            } => (
                StorageError::Segment {
                    shard,
                    source: (*original).clone(),
                },
                false,
            ),
            other => (other, true),
        }
    }

    /// [`Commit::poison_with`] with the commit lock held since whatever
    /// failed: a failed sync marks itself finished and poisons the shard in
    /// one critical section, so that no other sync can begin in between
    /// and report durable what the failed one may have dropped.
    fn poison_locked(
        &self,
        mut state: MutexGuard<'_, CommitState>,
        reason: StorageError,
        own: bool,
    ) -> StorageError {
        let first = self.poison.set(Arc::new(reason.clone())).is_ok();
        let mut deferred = Deferred::default();
        let everyone = state.waiters.take_all();
        self.tail_written.store(0, SeqCst);
        self.settle(&state, everyone, Settle::Failed, &mut deferred);
        drop(state);
        if first {
            tracing::error!(shard = %self.label, error = %reason, "shard stopped accepting writes");
            self.metrics.poisoned();
        }
        deferred.run(self);
        self.in_flight.wake_all();
        if first && own {
            return reason;
        }
        StorageError::Poisoned {
            shard: Arc::clone(&self.label),
            original: self
                .poison
                .get()
                .map_or_else(|| Arc::new(reason), Arc::clone),
        }
    }

    /// The failure that stopped the shard, as the error of a call whose
    /// records it covered: the same failure, not `Poisoned`. Called only
    /// once the shard is poisoned.
    fn failure(&self) -> StorageError {
        match self.poison.get() {
            Some(original) => (**original).clone(),
            None => self.closed_error(),
        }
    }

    /// Marks the shard closed: every waiter left completes with
    /// [`StorageError::ShardClosed`], and no more syncs are queued. Called with
    /// the writer lock held, after everything was made durable.
    pub(crate) fn close(&self) {
        let state = self.lock();
        self.closed.store(true, Release);
        self.stop_locked(state);
    }

    /// Stops group commit at a drop: every waiter left completes with
    /// [`StorageError::ShardClosed`] (nothing is synced: the next open runs
    /// recovery), no more syncs are queued. A sync in flight finishes on
    /// its worker.
    pub(crate) fn stop(&self) {
        self.stop_locked(self.lock());
    }

    fn stop_locked(&self, mut state: MutexGuard<'_, CommitState>) {
        state.stop();
        let mut deferred = Deferred::default();
        // Waiters whose records are durable (at a close, every one: it
        // synced everything first) are acknowledged, not failed: an
        // appender told `ShardClosed` would append its records again.
        self.settle_covered(&mut state, &mut deferred);
        let everyone = state.waiters.take_all();
        self.tail_written.store(0, SeqCst);
        self.settle(&state, everyone, Settle::Closed, &mut deferred);
        drop(state);
        deferred.run(self);
        self.in_flight.wake_all();
    }

    /// One past the last offset written.
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Acquire)
    }

    /// One past the last offset durable, without the commit lock.
    pub(crate) fn durable(&self) -> u64 {
        self.durable.load(Acquire)
    }

    /// Publishes how far the log is written. Called with the writer lock
    /// held, after the bytes are in the file; completes the consumers that
    /// watch the written offset.
    pub(crate) fn set_written(&self, written: u64) {
        // Sequentially consistent with the store and load in `tail.rs`:
        // either this sees a consumer's registration or the consumer sees
        // this offset, so no wake-up is lost.
        self.written.store(written, SeqCst);
        // A direct append (not through the queue) writes before its guard
        // publishes the assignment. Only then is a locked instruction
        // needed: queued batches are assigned before they are written.
        if self.assigned.load(Acquire) < written {
            self.assigned.fetch_max(written, AcqRel);
        }
        if self.tail_written.load(SeqCst) > 0 {
            let mut state = self.lock();
            let mut deferred = Deferred::default();
            self.settle_covered(&mut state, &mut deferred);
            drop(state);
            deferred.run(self);
        }
    }

    /// Publishes how far offsets are assigned (under the queue lock).
    pub(crate) fn set_assigned(&self, assigned: u64) {
        debug_assert!(
            self.written() <= assigned,
            "assigned {assigned} below written {}",
            self.written()
        );
        self.assigned.store(assigned, Release);
    }

    fn assigned(&self) -> u64 {
        self.assigned.load(Acquire)
    }

    /// Names who writes queued batches before a sync: the shard, once.
    pub(crate) fn set_queued_writes(&self, writes: Weak<dyn QueuedWrites>) {
        let _ = self.writes.set(writes);
    }

    /// How far the next sync would reach: everything assigned when the
    /// shard writes what is queued just before it, what is written
    /// otherwise.
    fn sync_end(&self) -> u64 {
        if self.writes.get().is_some() {
            self.assigned()
        } else {
            self.written()
        }
    }

    /// Whether a sync of the shard is queued, lingering or in flight: an
    /// append's future that comes now is covered by the next one at the
    /// earliest, so its batch may as well be queued for that sync to write
    /// (`Core::append_completion`).
    pub(crate) fn sync_pending(&self) -> bool {
        let state = self.lock();
        state.busy()
    }

    /// Moves the durable offset (forwards, or back to the end of a cut
    /// log) and mirrors it for lock-free readers.
    fn set_durable(&self, state: &mut CommitState, durable: u64) {
        debug_assert!(
            durable <= self.written(),
            "durable {durable} past written {}",
            self.written()
        );
        state.durable = durable;
        self.durable.store(durable, Release);
        self.metrics.durable(durable);
    }

    /// Records that everything below `offset` is durable (a seal synced
    /// it) and completes the waiters that covers. Ignored once poisoned:
    /// the durable offset is then frozen at what was acknowledged.
    pub(crate) fn advance_durable(&self, offset: u64) {
        let mut state = self.lock();
        if self.poison.get().is_some() || offset <= state.durable {
            return;
        }
        self.set_durable(&mut state, offset);
        let mut deferred = Deferred::default();
        self.settle_covered(&mut state, &mut deferred);
        drop(state);
        deferred.run(self);
    }

    /// Points group commit at a log that was cut or replaced: what is
    /// written and durable (`durable`, or what was durable if less), and the
    /// segment to sync. Waiters for offsets the cut removed are clamped to
    /// the new end, so none waits for records that no longer exist. Called
    /// with the writer lock and the readers' view held, so that no reader
    /// sees the view and the offsets disagree.
    pub(crate) fn reset_log(&self, written: u64, durable: Option<u64>, handle: SyncHandle) {
        let mut state = self.lock();
        state.log_epoch += 1;
        self.written.store(written, SeqCst);
        // The queue is drained and held by whoever cut the log.
        self.assigned.store(written, Release);
        let durable = durable.unwrap_or(state.durable).min(written);
        self.set_durable(&mut state, durable);
        state.handle = Arc::new(handle);
        state.waiters.clamp_durability(written);
        let mut deferred = Deferred::default();
        self.settle_covered(&mut state, &mut deferred);
        let submit = self.schedule(&mut state);
        drop(state);
        deferred.run(self);
        self.submit(submit);
    }

    /// Waits for a sync in flight to finish and keeps any other from
    /// beginning until [`Commit::resume_syncs`]: called with the writer lock
    /// held by a roll, whose own seal syncs the segment.
    pub(crate) fn pause_syncs(&self) {
        let mut state = self.lock();
        state.pause();
        while state.syncing() {
            state = self
                .idle
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Lets syncs begin again, queuing one if a waiter needs it.
    pub(crate) fn resume_syncs(&self) {
        let mut state = self.lock();
        state.resume();
        let submit = self.schedule(&mut state);
        drop(state);
        self.submit(submit);
    }

    /// Points syncs at a new active segment (after a roll).
    pub(crate) fn set_handle(&self, handle: SyncHandle) {
        self.lock().handle = Arc::new(handle);
    }

    /// The shard's in-flight bound: a place for one append's completion.
    pub(crate) fn admit(&self, wait: bool) -> Result<Admission<'_>> {
        self.in_flight.admit(self, wait)
    }
}

#[cfg(all(test, loom))]
mod loom_shard_tests;
#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(test)]
mod tests;
