//! One turn of group commit on a pool worker: when a shard asks for a
//! sync, and what a sync does once it returns.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::settle::{Deferred, Settle};
use super::state::{Mode, Stage};
use super::{Commit, CommitState, SyncData};
use crate::error::{Result, StorageError};
use crate::loom::sync::MutexGuard;
use crate::pool::{SyncJob, SyncPool};

impl Commit {
    /// Whether a sync would help: something written is not durable, and a
    /// waiter needs it (one whose batch is still queued for the combining
    /// leader waits for the leader's poke) or writeback asked.
    fn sync_wanted(&self, state: &CommitState) -> bool {
        state.running()
            && self.poison.get().is_none()
            && self.sync_end() > state.durable
            && (state.writeback || state.waiters.needs_sync(state.durable))
    }

    /// Marks the shard queued when it needs a sync and has none in flight
    /// or queued; the caller then submits it ([`Commit::submit`]) once the
    /// commit lock is released.
    #[must_use = "a shard marked queued must be submitted"]
    pub(super) fn schedule(&self, state: &mut CommitState) -> bool {
        if state.stage() == Stage::Lingering && state.waiters.durability() >= state.woken_last {
            self.idle.notify_all();
        }
        if state.busy() || !self.sync_wanted(state) {
            return false;
        }
        state.queue();
        true
    }

    /// Queues the shard on its pool when [`Commit::schedule`] said so. If
    /// no worker can take it (none could be started), the waiters that
    /// needed the sync complete with that failure rather than wait forever;
    /// nothing is lost, and the next wait tries again.
    pub(super) fn submit(&self, submit: bool) {
        if !submit {
            return;
        }
        let Some(me) = self.me.upgrade() else {
            return;
        };
        let Err(err) = self.pool.submit(me) else {
            return;
        };
        let err = StorageError::Segment {
            shard: Arc::clone(&self.label),
            source: felix_io::IoError::new(
                "start a sync thread",
                std::path::Path::new(&*self.label),
                err,
            )
            .into(),
        };
        tracing::error!(shard = %self.label, error = %err, "no sync thread");
        let mut state = self.lock();
        state.unqueue();
        let waiting = state.waiters.take_durability();
        let mut deferred = Deferred::default();
        self.settle(&state, waiting, Settle::Error(&err), &mut deferred);
        drop(state);
        deferred.run(self);
    }

    /// Marks a sync as in flight and returns what it will cover: everything
    /// written so far, in the current log.
    pub(super) fn begin_sync(&self, state: &mut CommitState) -> (u64, u64, Arc<dyn SyncData>) {
        state.begin_sync();
        self.metrics.sync_began(self.written());
        (self.written(), state.log_epoch, Arc::clone(&state.handle))
    }

    /// Records the outcome of a sync that covered everything below `upto`:
    /// completes the waiters it covered and says what comes next, or
    /// poisons the shard (a failed sync is never retried). `on_worker`: the
    /// caller is a pool worker, which may keep the shard for its next turn.
    pub(super) fn finish_sync(
        &self,
        upto: u64,
        epoch: u64,
        result: felix_segment::Result<()>,
        took: Duration,
        on_worker: bool,
    ) -> (Deferred, Next, Result<()>) {
        self.metrics.synced(took, result.is_ok());
        match result {
            Ok(()) => {
                self.syncs.fetch_add(1, Relaxed);
                let mut state = self.lock();
                self.end_sync(&mut state);
                state.last_sync = took;
                // A sync that began before the log was cut proves nothing
                // about what was written since; the next one will. Once
                // poisoned, the durable offset stays where the waiters
                // were told (they have been completed with the failure).
                if state.log_epoch == epoch && self.poison.get().is_none() && upto > state.durable {
                    self.set_durable(&mut state, upto);
                }
                let mut deferred = Deferred::default();
                self.settle_covered(&mut state, &mut deferred);
                state.woken_last = deferred.permits();
                let next = if self.schedule(&mut state) {
                    Next::Submit
                } else if on_worker && self.keep(&mut state) {
                    Next::Keep
                } else {
                    Next::Idle
                };
                (deferred, next, Ok(()))
            }
            Err(source) => {
                // In the same critical section: see `poison_locked`.
                let mut state = self.lock();
                self.end_sync(&mut state);
                let (reason, own) = Self::reason_of(StorageError::Segment {
                    shard: Arc::clone(&self.label),
                    source,
                });
                let err = self.poison_locked(state, reason, own);
                (Deferred::default(), Next::Idle, Err(err))
            }
        }
    }

    /// Marks the shard queued for the worker that just synced it, when that
    /// sync completed several appends with a future or a callback (their
    /// owners append again at once, and the next sync should cover them),
    /// nothing needs a sync yet, and no other shard waits for a worker.
    /// Without it, the first of those appends finds the shard idle: it
    /// writes alone and queues the shard, and another worker is woken for
    /// it. With it, the appends queue their batches for the worker, which
    /// lingers for them as for any turn, which is faster for one thread
    /// with many futures in flight (measured with `felix-bench
    /// append-async felix --in-flight 64`: docs/performance.md,
    /// "Completions and the sync pool", point 6).
    fn keep(&self, state: &mut CommitState) -> bool {
        let keep = state.woken_last > 1
            && !state.busy()
            && state.running()
            && self.poison.get().is_none()
            && !self.pool.has_queued();
        if keep {
            state.queue();
        }
        keep
    }

    /// Marks the sync in flight finished, and tells a roll waiting for it.
    fn end_sync(&self, state: &mut CommitState) {
        state.end_sync();
        if state.mode() == Mode::Paused {
            self.idle.notify_all();
        }
    }

    /// Wakes the pool for waiters whose records someone who will not wait
    /// for them (the combining leader) has just written.
    pub(crate) fn poke(&self) {
        let mut state = self.lock();
        let submit = self.schedule(&mut state);
        drop(state);
        self.submit(submit);
    }

    /// Asks for one sync although nobody waits: appends that are not synced
    /// as they go call this every so many bytes, so dirty data is written
    /// back as it accumulates and sealing a segment (which syncs it) waits
    /// for the last stretch only, not for a whole segment's worth. Only an
    /// optimisation: when no sync thread can be started, the data is synced
    /// at the next seal or explicit sync as without it.
    pub(crate) fn request_writeback(&self) {
        let mut state = self.lock();
        state.writeback = true;
        let submit = self.schedule(&mut state);
        drop(state);
        self.submit(submit);
    }
}

impl Commit {
    /// Before a sync under load, waits briefly for the appenders the last
    /// sync woke to append again, so that this sync covers them too rather
    /// than the next: without it, `n` appends kept in flight settle into
    /// two halves, one syncing while the other is written, and each sync
    /// covers `n / 2` (and a write to the page being written back may
    /// wait for it). The wait ends as soon as as many appends wait as the
    /// last sync completed, and after half the last sync's duration (at
    /// most [`MAX_LINGER`]) whatever happened. Only appends with a future
    /// or a callback count: blocking appenders are threads that must be
    /// scheduled first, and waiting for them measured slower, so a shard
    /// whose last sync completed at most one such append does not wait.
    /// With futures in flight from one thread, each sync covers about all
    /// of them instead of half, and more records go through (the figures:
    /// docs/performance.md, "Completions and the sync pool", point 2).
    /// Only a delay: nothing depends on it for correctness (under loom,
    /// which has no timed wait, it is skipped).
    fn linger<'a>(&self, mut state: MutexGuard<'a, CommitState>) -> MutexGuard<'a, CommitState> {
        let want = state.woken_last;
        if cfg!(loom) || want <= 1 || state.waiters.durability() >= want {
            return state;
        }
        let deadline = Instant::now() + (state.last_sync / 2).min(MAX_LINGER);
        state.begin_linger();
        while state.waiters.durability() < want && state.running() && self.poison.get().is_none() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            state = self
                .idle
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        state.end_linger();
        state
    }
}

/// The longest a worker lingers before a sync (see `Commit::linger`).
pub(super) const MAX_LINGER: Duration = Duration::from_micros(500);

/// What a finished sync leaves to its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// Nothing: no waiter needs another sync yet.
    Idle,
    /// The shard is marked queued: the caller submits it to the pool.
    Submit,
    /// The shard is marked queued for the calling worker's next turn.
    Keep,
}

impl SyncJob for Commit {
    /// One sync of the shard, then its completions; again while the worker
    /// keeps the shard ([`Commit::keep`]).
    fn run(self: Arc<Self>, _pool: &SyncPool) {
        let mut kept = false;
        while self.turn(kept) {
            kept = true;
        }
    }
}

impl Commit {
    /// One turn on a worker; returns whether the worker keeps the shard for
    /// the next. A kept turn lingers before it asks whether a sync is
    /// wanted: the appenders it waits for have not come back yet.
    fn turn(self: &Arc<Self>, kept: bool) -> bool {
        let mut state = self.lock();
        debug_assert_eq!(
            state.stage(),
            Stage::Queued,
            "a shard runs only when queued"
        );
        if !kept && !self.sync_wanted(&state) {
            state.unqueue();
            return false;
        }
        // Still queued while it lingers: no appender syncs inline meanwhile.
        let mut state = self.linger(state);
        // Batches queued for this sync are written now, in one `write`, and
        // covered by it. Still queued meanwhile, so appends go on queuing.
        let mut queue_written = true;
        if self.assigned() > self.written()
            && self.sync_wanted(&state)
            && let Some(writes) = self.writes.get().and_then(Weak::upgrade)
        {
            drop(state);
            queue_written = writes.write_queued();
            drop(writes);
            state = self.lock();
        }
        state.unqueue();
        if !self.sync_wanted(&state) {
            return false;
        }
        if self.written() <= state.durable {
            // Nothing newly written to sync. Batches queued since the queue
            // was written found the shard queued, so it queues again for
            // them; while the writer lock is held, its holder writes them
            // and pokes the pool.
            if queue_written {
                let again = self.schedule(&mut state);
                drop(state);
                self.submit(again);
            }
            return false;
        }
        state.writeback = false;
        let (upto, epoch, handle) = self.begin_sync(&mut state);
        drop(state);
        let started = Instant::now();
        let result = handle.sync_data();
        let (deferred, next, _) = self.finish_sync(upto, epoch, result, started.elapsed(), true);
        // Waking first lets the woken appenders write before the next sync
        // begins, so it covers them: 64 threads, 29 → 45 appends per sync
        // and 104 k → 113 k records/s (medians of three alternating runs)
        // against queuing the next sync first.
        deferred.run(self);
        self.submit(next == Next::Submit);
        next == Next::Keep
    }
}
