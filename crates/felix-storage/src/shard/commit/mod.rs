//! Group commit: a flusher thread that syncs back to back while appends
//! continue, waking exactly the waiters each sync covered.
//!
//! An `OnCommit` appender writes its batch (under the writer lock, or
//! through the write-combining queue, `combine.rs`), registers the offset
//! it needs durable and parks. The flusher, started on the shard's first
//! wait, takes the commit lock only to read how far the log is written,
//! releases it, runs one `fdatasync`, and then wakes every waiter the sync
//! covered. Appends that arrive while a sync is in flight are covered by
//! the next one, so a hundred concurrent appenders cost a handful of syncs,
//! and no appender ever waits on another appender's turn at the disk.
//!
//! Consumers waiting for the tail (`tail.rs`) are on the same waiter list
//! (`waiters.rs`) and are woken by the same sync or append.
//!
//! A failed sync is never retried: it poisons the shard. Every waiter that
//! was waiting then (the appends the failed sync covered) wakes to the
//! original error; every call made afterwards gets
//! [`StorageError::Poisoned`]. Poisoning freezes the durable offset, so
//! what readers are served stays what was acknowledged.
//!
//! Invariants (asserted in debug builds): `durable ≤ written ≤ assigned`;
//! `durable` only moves back when the log is cut.

mod combine;
mod flusher;
mod tail;
mod waiters;

pub(crate) use combine::{MAX_LEAD_ROUNDS, Queue, Spare, WriterGuard};
pub(crate) use waiters::{Wake, Watch, wake_all};

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;

use felix_segment::{SegmentError, SyncHandle};

use crate::error::{Result, StorageError};
use crate::metrics::ShardMetrics;
use waiters::Waiters;

/// What group commit knows, under the commit lock.
#[derive(Debug)]
pub(crate) struct CommitState {
    /// One past the last offset a completed sync covers.
    durable: u64,
    /// Syncs the active segment.
    pub(crate) handle: SyncHandle,
    /// Appenders and consumers waiting for the log to move.
    waiters: Waiters,
    /// Whether an `fdatasync` is in flight (the flusher's, or an idle
    /// shard's appender's own).
    syncing: bool,
    /// Whether the flusher is waiting on `work`: only then is it worth a
    /// `futex` wake (a condition variable's notify is a system call even
    /// when nobody waits, and appenders register by the dozen per sync).
    flusher_idle: bool,
    /// Bumped whenever the log is cut or replaced: a sync that began before
    /// may cover offsets that no longer hold the records it wrote, so its
    /// completion must not advance `durable`.
    log_epoch: u64,
    /// Set when the shard closes or is dropped: the flusher exits.
    stop: bool,
    /// A background sync was asked for although nobody waits (see
    /// [`Commit::request_writeback`]).
    writeback: bool,
}

/// Group commit's shared half: the shard and its flusher thread both hold it.
#[derive(Debug)]
pub(crate) struct Commit {
    label: Arc<str>,
    /// Whether reads end at the durable offset (`OnCommit`).
    on_commit: bool,
    /// One past the last offset written. Appenders publish it without the
    /// commit lock (they hold the writer lock, which orders them); it only
    /// moves backwards in `reset_log`, under the commit lock, so a reader
    /// holding the commit lock sees it consistent with `log_epoch`.
    written: AtomicU64,
    /// One past the last offset assigned: `written` plus on-commit batches
    /// queued for the combining leader (`combine.rs`). Waits are clamped to
    /// it, not to `written`, so a queued batch is waited for.
    assigned: AtomicU64,
    /// `CommitState::durable`, for readers that take no commit lock.
    durable: AtomicU64,
    /// `Waiters::tail_written`: appends take the commit lock to wake a
    /// consumer only when someone watches the written offset.
    tail_written: AtomicUsize,
    state: Mutex<CommitState>,
    /// Wakes the flusher when a waiter needs a sync, or at shutdown.
    work: Condvar,
    /// The failure that stopped writes. Set under the commit lock, so that
    /// it and the durable offset it froze are seen together.
    poison: OnceLock<Arc<StorageError>>,
    /// Set under the commit lock when the shard closes.
    closed: AtomicBool,
    flusher: Mutex<Option<JoinHandle<()>>>,
    /// `fdatasync`s made for durability.
    pub(crate) syncs: AtomicU64,
    /// Waits that were satisfied.
    pub(crate) synced_appends: AtomicU64,
    /// The shard's metric handles.
    metrics: ShardMetrics,
}

impl Commit {
    pub(crate) fn new(
        label: Arc<str>,
        on_commit: bool,
        next_offset: u64,
        handle: SyncHandle,
        metrics: ShardMetrics,
    ) -> Self {
        Self {
            label,
            on_commit,
            written: AtomicU64::new(next_offset),
            assigned: AtomicU64::new(next_offset),
            durable: AtomicU64::new(next_offset),
            tail_written: AtomicUsize::new(0),
            state: Mutex::new(CommitState {
                durable: next_offset,
                handle,
                waiters: Waiters::default(),
                syncing: false,
                flusher_idle: false,
                log_epoch: 0,
                stop: false,
                writeback: false,
            }),
            work: Condvar::new(),
            poison: OnceLock::new(),
            closed: AtomicBool::new(false),
            flusher: Mutex::new(None),
            syncs: AtomicU64::new(0),
            synced_appends: AtomicU64::new(0),
            metrics,
        }
    }

    /// The commit state. A panic while holding the lock cannot leave it
    /// inconsistent (each update is a few assignments), so a poisoned lock
    /// is recovered rather than propagated.
    pub(crate) fn lock(&self) -> MutexGuard<'_, CommitState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The failure that stopped writes, if any.
    pub(crate) fn poisoned(&self) -> Option<&Arc<StorageError>> {
        self.poison.get()
    }

    /// Whether reads end at the durable offset.
    pub(crate) fn on_commit(&self) -> bool {
        self.on_commit
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

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            return Err(StorageError::Closed {
                shard: Arc::clone(&self.label),
            });
        }
        Ok(())
    }

    /// Stops writes for good, keeping the first failure as the reason, and
    /// wakes every waiter to see it. Returns the error for the caller: its
    /// own failure when it is the first (it is this call's error), else
    /// `Poisoned` naming the first.
    ///
    /// A segment writer that refuses work because an earlier failure
    /// stopped it answers with its own "poisoned" error; the reason kept is
    /// the failure underneath, so no message ever nests one stop in another.
    pub(crate) fn poison_with(&self, err: StorageError) -> StorageError {
        let (reason, own) = match err {
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
        };
        let state = self.lock();
        let first = self.poison.set(Arc::new(reason.clone())).is_ok();
        let everyone = state.waiters.wake_everyone();
        drop(state);
        if first {
            tracing::error!(shard = %self.label, error = %reason, "shard stopped accepting writes");
            self.metrics.poisoned();
        }
        wake_all(everyone);
        self.work.notify_all();
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
            None => StorageError::Closed {
                shard: Arc::clone(&self.label),
            },
        }
    }

    /// Marks the shard closed: every waiter wakes and fails with
    /// [`StorageError::Closed`], the flusher exits. Called with the writer
    /// lock held, after everything was made durable.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        self.closed.store(true, Release);
        state.stop = true;
        let everyone = state.waiters.wake_everyone();
        drop(state);
        wake_all(everyone);
        self.stop();
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
    /// held, after the bytes are in the file; wakes the consumers that
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
            let covered = self.take_covered(&mut state);
            drop(state);
            wake_all(covered);
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
        self.metrics.durable(durable, self.on_commit);
    }

    /// Records that everything below `offset` is durable (a seal synced
    /// it) and wakes the waiters that covers. Ignored once poisoned: the
    /// durable offset is then frozen at what was acknowledged.
    pub(crate) fn advance_durable(&self, offset: u64) {
        let mut state = self.lock();
        if self.poison.get().is_some() || offset <= state.durable {
            return;
        }
        self.set_durable(&mut state, offset);
        let covered = self.take_covered(&mut state);
        drop(state);
        wake_all(covered);
    }

    /// Wakes an idle flusher when appenders are waiting: called after
    /// queued batches were written by someone who will not wait for them.
    pub(crate) fn poke(&self) {
        let mut state = self.lock();
        if state.flusher_idle && state.waiters.has_durability_waiters() {
            state.flusher_idle = false;
            drop(state);
            self.work.notify_one();
        }
    }

    /// Takes every waiter the durable and written offsets now cover, to be
    /// woken with [`wake_all`] once the commit lock is released.
    #[must_use = "the covered waiters must be woken"]
    fn take_covered(&self, state: &mut CommitState) -> Vec<Wake> {
        let covered = state.waiters.take_covered(state.durable, self.written());
        self.tail_written
            .store(state.waiters.tail_written(), SeqCst);
        covered
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
        state.handle = handle;
        state.waiters.clamp_durability(written);
        let covered = self.take_covered(&mut state);
        drop(state);
        wake_all(covered);
        self.work.notify_all();
    }

    /// Waits until every record below `offset` (clamped to what was
    /// assigned) is durable. A call made after the shard was poisoned gets
    /// [`StorageError::Poisoned`]; one that was waiting when the failure
    /// happened gets the failure itself.
    pub(crate) fn wait_durable(self: &Arc<Self>, offset: u64) -> Result<()> {
        self.wait_durable_then(offset, false, &|| Ok(()))
    }

    /// [`Commit::wait_durable`] for an append whose records were accepted
    /// before it waits (`accepted`): a failure that stops the shard before
    /// the wait begins covered them too, and is this call's error itself
    /// rather than `Poisoned`. Calls `on_wake` each time the waiter is
    /// woken before it is covered (write combining hands its lead over that
    /// way).
    pub(crate) fn wait_durable_then(
        self: &Arc<Self>,
        offset: u64,
        accepted: bool,
        on_wake: &dyn Fn() -> Result<()>,
    ) -> Result<()> {
        let mut state = self.lock();
        self.check_open()?;
        if self.poison.get().is_some() {
            // A failure stopped the shard before this wait began. An append
            // whose records were accepted before it is acknowledged if a
            // sync covered them, and otherwise gets the failure, which
            // covered them; any other call is a later one.
            if accepted && state.durable >= offset.min(self.assigned()) {
                return Ok(());
            }
            return Err(if accepted {
                self.failure()
            } else {
                self.check_poison().err().unwrap_or_else(|| self.failure())
            });
        }
        loop {
            // Clamped, so a target past the log end never keeps the flusher
            // syncing for records that do not exist (and re-clamped on every
            // check: a truncation may cut the log below `offset`). Checked
            // before the poison: a sync that covered the records
            // acknowledges them even if a later failure stopped the shard
            // (the durable offset is frozen at that failure).
            let target = offset.min(self.assigned());
            if state.durable >= target {
                self.synced_appends.fetch_add(1, Relaxed);
                return Ok(());
            }
            self.check_open()?;
            if self.poison.get().is_some() {
                return Err(self.failure());
            }
            // Someone else is syncing or waiting, or the batch is still
            // queued for the combining leader: hand off to the flusher,
            // which the leader pokes once it has written.
            if state.syncing || state.waiters.has_durability_waiters() || self.written() < target {
                break;
            }
            // Nobody else is waiting or syncing: sync here rather than hand
            // off to the flusher, which would cost two thread switches of
            // latency for a lone appender.
            let (upto, epoch, handle) = Self::begin_sync(self, &mut state);
            drop(state);
            let result = self.metrics.sync(|| handle.sync_data());
            match self.finish_sync(upto, epoch, result) {
                Ok(()) => {}
                // Another failure got there first: it covered these records.
                Err(StorageError::Poisoned { .. }) => return Err(self.failure()),
                Err(own) => return Err(own),
            }
            state = self.lock();
        }
        self.ensure_flusher()?;
        let target = offset.min(self.assigned());
        let token = state
            .waiters
            .add(Watch::Durability, target, Wake::current_thread());
        if std::mem::take(&mut state.flusher_idle) {
            drop(state);
            self.work.notify_one();
            state = self.lock();
        }
        loop {
            drop(state);
            // Woken once covered, or by a poison or a close; a spurious
            // wake-up just checks again.
            std::thread::park();
            state = self.lock();
            // Covered means taken off the list by whoever advanced
            // `durable` past the target registered above, which is checked
            // first: a sync that covered the records acknowledges them even
            // if a later failure stopped the shard. Re-clamping the target
            // to what is assigned now would be wrong: appends since then
            // may have raised it, and a waiter that parked again after
            // being taken off the list would never be woken.
            if !state.waiters.contains(token) {
                self.synced_appends.fetch_add(1, Relaxed);
                return Ok(());
            }
            // Not covered, and the shard stopped or closed: the failure
            // covered this wait's records, so it is this call's error.
            if self.poison.get().is_some() {
                state.waiters.remove(token);
                return Err(self.failure());
            }
            if let Err(closed) = self.check_open() {
                state.waiters.remove(token);
                return Err(closed);
            }
            drop(state);
            if let Err(err) = on_wake() {
                self.lock().waiters.remove(token);
                return Err(err);
            }
            state = self.lock();
        }
    }

    /// Marks a sync as in flight and returns what it will cover: everything
    /// written so far, in the current log.
    fn begin_sync(&self, state: &mut CommitState) -> (u64, u64, SyncHandle) {
        state.syncing = true;
        (self.written(), state.log_epoch, state.handle.clone())
    }

    /// Records the outcome of a sync that covered everything below `upto`:
    /// wakes the waiters it covered and lets the flusher go on, or poisons
    /// the shard (a failed sync is never retried).
    fn finish_sync(&self, upto: u64, epoch: u64, result: felix_segment::Result<()>) -> Result<()> {
        match result {
            Ok(()) => {
                self.syncs.fetch_add(1, Relaxed);
                let mut state = self.lock();
                state.syncing = false;
                // A sync that began before the log was cut proves nothing
                // about what was written since; the next one will. Once
                // poisoned, the durable offset stays where the waiters
                // were told (they have been woken to the failure).
                if state.log_epoch == epoch && self.poison.get().is_none() && upto > state.durable {
                    self.set_durable(&mut state, upto);
                }
                let covered = self.take_covered(&mut state);
                // An appender's own sync may leave waiters for the flusher.
                let wake_flusher = std::mem::take(&mut state.flusher_idle);
                drop(state);
                wake_all(covered);
                if wake_flusher {
                    self.work.notify_one();
                }
                Ok(())
            }
            Err(source) => {
                self.lock().syncing = false;
                Err(self.poison_with(StorageError::Segment {
                    shard: Arc::clone(&self.label),
                    source,
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests;
