//! Waiting for durability: a blocking wait that parks its thread (or, for a
//! lone appender on an idle shard, syncs inline), and the registration of a
//! future's or callback's completion, which returns at once.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::task::Waker;

use super::completion::thread_waker;
use super::job::Next;
use super::waiters::{Completion, Notify, Slot, Watch};
use super::{Admission, Commit, CommitState};
use crate::error::{Result, StorageError};
use crate::loom::thread;

impl Commit {
    /// Waits until every record below `offset` (clamped to what was
    /// assigned) is durable. A call made after the shard was poisoned gets
    /// [`StorageError::Poisoned`]; one that was waiting when the failure
    /// happened gets the failure itself.
    pub(crate) fn wait_durable(&self, offset: u64) -> Result<()> {
        self.wait_durable_with(offset, false, &|| Ok(()))
    }

    /// The outcome of a durability wait for `offset` known without waiting:
    /// the shard is closed or stopped, or poisoned, or the records are
    /// durable already. `accepted`: the wait is an append's whose records
    /// were accepted before it began, so a failure that stopped the shard
    /// since covered them and is its error itself, not `Poisoned`.
    fn settled_now(&self, state: &CommitState, offset: u64, accepted: bool) -> Option<Result<()>> {
        // Clamped, so a target past the log end never keeps the pool
        // syncing for records that do not exist. Checked before the poison:
        // a sync that covered the records acknowledges them even if a later
        // failure stopped the shard (the durable offset is frozen at it).
        let durable = state.durable >= offset.min(self.assigned());
        // Once the shard is closed, stopped or poisoned, an append is
        // acknowledged only by a sync that covered its own records: not
        // clamped, since a failed write of queued batches gives their
        // offsets back (`assigned` moves down) without writing them.
        let own_records_durable = accepted && state.durable >= offset;
        if self.is_closed() || state.stopped() {
            // A close syncs everything written before it marks the shard
            // closed: an append whose records it covered is acknowledged,
            // not failed (told `ShardClosed`, its caller would append them
            // again). So is one a sync covered before a failure poisoned
            // the shard (the durable offset is frozen at what was synced).
            if own_records_durable {
                self.synced_appends.fetch_add(1, Relaxed);
                return Some(Ok(()));
            }
            return Some(Err(self.closed_error()));
        }
        if self.poison.get().is_some() {
            if own_records_durable {
                return Some(Ok(()));
            }
            return Some(Err(if accepted {
                self.failure()
            } else {
                self.check_poison().err().unwrap_or_else(|| self.failure())
            }));
        }
        durable.then(|| {
            self.synced_appends.fetch_add(1, Relaxed);
            Ok(())
        })
    }

    /// [`Commit::wait_durable`] for an append whose records were accepted
    /// before it waits (`accepted`, see [`Commit::settled_now`]). Calls
    /// `on_wake` each time the thread is woken before its wait completes
    /// (write combining hands its lead over that way).
    pub(crate) fn wait_durable_with(
        &self,
        offset: u64,
        accepted: bool,
        on_wake: &dyn Fn() -> Result<()>,
    ) -> Result<()> {
        let mut state = self.lock();
        loop {
            if let Some(outcome) = self.settled_now(&state, offset, accepted) {
                return outcome;
            }
            // Someone else is syncing or waiting, or the batch is still
            // queued for the combining leader: hand off to the pool, which
            // the leader pokes once it has written.
            let target = offset.min(self.assigned());
            if state.busy()
                || !state.running()
                || state.waiters.has_durability_waiters()
                || self.written() < target
            {
                break;
            }
            // Nobody else is waiting or syncing: sync here rather than hand
            // off to the pool, which costs a lone appender two thread
            // switches of latency (measured in docs/performance.md).
            let (upto, epoch, handle) = self.begin_sync(&mut state);
            drop(state);
            let started = std::time::Instant::now();
            let result = handle.sync_data();
            let (deferred, next, outcome) =
                self.finish_sync(upto, epoch, result, started.elapsed(), false);
            self.submit(next == Next::Submit);
            deferred.run(self);
            match outcome {
                Ok(()) => {}
                // Another failure got there first: it covered these records.
                Err(StorageError::Poisoned { .. }) => return Err(self.failure()),
                Err(own) => return Err(own),
            }
            state = self.lock();
        }
        let target = offset.min(self.assigned());
        let slot = Slot::new(Some(thread_waker()));
        let done = Completion::Slot(Arc::clone(&slot));
        let token = state
            .waiters
            .add(Watch::Durability, target, Notify::Durable(done), None);
        let submit = self.schedule(&mut state);
        drop(state);
        self.submit(submit);
        loop {
            if let Some(outcome) = slot.get() {
                return outcome;
            }
            // Woken once completed (or by a leader handing over); a
            // spurious wake-up just checks again.
            thread::park();
            if let Some(outcome) = slot.get() {
                return outcome;
            }
            if let Err(err) = on_wake() {
                // Its failure has poisoned the shard, which completed this
                // wait too; return the lead's own error.
                self.lock().waiters.remove(token);
                return Err(err);
            }
        }
    }

    /// Registers a completion for every record below `offset` becoming
    /// durable, and returns at once. An outcome known already (durable,
    /// closed, poisoned) completes it now; otherwise a sync is queued on
    /// the pool if none is in flight. `admission`, an append's place in
    /// flight, is given back when the completion completes.
    pub(crate) fn watch_durable(
        &self,
        offset: u64,
        accepted: bool,
        done: Completion<Result<()>>,
        admission: Option<Admission<'_>>,
    ) {
        let mut state = self.lock();
        if let Some(outcome) = self.settled_now(&state, offset, accepted) {
            drop(state);
            if outcome.is_ok()
                && let Some(admission) = &admission
            {
                // Durable already (a sync raced ahead): settled now.
                self.metrics.settled_durable(admission.started());
            }
            drop(admission);
            return self.deliver_now(done, outcome);
        }
        let target = offset.min(self.assigned());
        let permit = admission.map(Admission::keep);
        state
            .waiters
            .add(Watch::Durability, target, Notify::Durable(done), permit);
        let submit = self.schedule(&mut state);
        drop(state);
        self.submit(submit);
    }

    /// Completes `done`, not on the list, with `outcome` (no lock held).
    pub(crate) fn deliver_now<T: Clone + Send + 'static>(&self, done: Completion<T>, outcome: T) {
        let mut deferred = super::settle::Deferred::default();
        self.deliver(done, outcome, &mut deferred);
        deferred.run(self);
    }

    /// A slot for a future's outcome, and its completion.
    pub(crate) fn future_slot<T: Clone>() -> (Arc<Slot<T>>, Completion<T>) {
        let slot = Slot::new(None::<Waker>);
        let done = Completion::Slot(Arc::clone(&slot));
        (slot, done)
    }
}
