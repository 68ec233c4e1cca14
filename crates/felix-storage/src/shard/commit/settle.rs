//! Completing waiters: each exactly once, with its outcome, in offset
//! order, and whatever wakes a thread or runs user code only once the
//! commit lock is released.

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::task::Waker;

use super::waiters::{Completion, Notify, Waiter};
use super::{Commit, CommitState};
use crate::error::StorageError;
use crate::pool::Callback;
use crate::shard::bounds::{ReadBound, Tail, readable_end};

/// Why waiters are being completed.
#[derive(Debug, Clone, Copy)]
pub(super) enum Settle<'a> {
    /// A sync or an append covered them.
    Covered,
    /// A failure stopped the shard (the poison is set).
    Failed,
    /// The shard closed or was dropped.
    Closed,
    /// No sync could be queued for them (no sync thread could start).
    Error(&'a StorageError),
}

/// What completing waiters leaves to do once the commit lock is released.
#[derive(Default)]
#[must_use = "deferred completions must be run"]
pub(super) struct Deferred {
    wakers: Vec<Waker>,
    /// Callbacks the pool could not take (it stopped): run here.
    callbacks: Vec<Callback>,
    /// In-flight places given back (under the commit lock, before the
    /// completions were made).
    permits: usize,
    /// Whether an appender waits for one of those places.
    room_freed: bool,
}

impl Deferred {
    /// In-flight places given back so far: appends with a future or a
    /// callback completed.
    pub(super) fn permits(&self) -> usize {
        self.permits
    }

    /// Wakes and runs what was collected, and wakes the appenders waiting
    /// for the places given back. Called with no lock
    /// held: an unpark is a system call, and holding the commit lock across
    /// dozens of them stalls every appender that wants to register
    /// (measured in docs/performance.md: "Changes made for speed").
    pub(super) fn run(self, commit: &Commit) {
        for waker in self.wakers {
            waker.wake();
        }
        for callback in self.callbacks {
            callback();
        }
        if self.room_freed {
            commit.in_flight.notify();
        }
    }
}

impl Commit {
    /// Completes `waiters` (taken off the list) for `why`, under the commit
    /// lock: slots are filled now, so completions become ready in the order
    /// given (offset order); callbacks go to the dispatch thread in that
    /// order.
    pub(super) fn settle(
        &self,
        state: &CommitState,
        waiters: Vec<Waiter>,
        why: Settle<'_>,
        deferred: &mut Deferred,
    ) {
        // Given back before any completion is made (a future's slot is
        // read without the commit lock): a caller that sees its append
        // complete finds its place free.
        let permits = waiters.iter().filter(|waiter| waiter.permit).count();
        deferred.permits += permits;
        deferred.room_freed |= self.in_flight.give_back(permits);
        for waiter in waiters {
            match waiter.notify {
                Notify::Durable(done) => {
                    let outcome = match why {
                        Settle::Covered => {
                            self.synced_appends.fetch_add(1, Relaxed);
                            // An async append's latency, once durable (a
                            // failed or closed one is not sampled).
                            self.metrics.settled_durable(waiter.started);
                            Ok(())
                        }
                        Settle::Failed => Err(self.failure()),
                        Settle::Closed => Err(self.closed_error()),
                        Settle::Error(err) => Err(err.clone()),
                    };
                    self.deliver(done, outcome, deferred);
                }
                Notify::Tail { from, bound, done } => {
                    let outcome = match why {
                        Settle::Closed => Err(self.closed_error()),
                        Settle::Error(err) => Err(err.clone()),
                        Settle::Covered | Settle::Failed => Ok(self.tail_now(state, from, bound)),
                    };
                    self.deliver(done, outcome, deferred);
                }
            }
        }
    }

    /// Takes and completes every waiter the durable and written offsets now
    /// cover.
    pub(super) fn settle_covered(&self, state: &mut CommitState, deferred: &mut Deferred) {
        let covered = state.waiters.take_covered(state.durable, self.written());
        self.tail_written
            .store(state.waiters.tail_written(), SeqCst);
        self.settle(state, covered, Settle::Covered, deferred);
    }

    /// What a consumer at `from` under `bound` may read now.
    pub(super) fn tail_now(&self, state: &CommitState, from: u64, bound: ReadBound) -> Tail {
        let poisoned = self.poison.get().is_some();
        // Sequentially consistent: see `tail.rs`.
        let written = self.written.load(SeqCst);
        let end = readable_end(bound, written, state.durable, self.on_commit(), poisoned);
        match bound {
            ReadBound::Below(offset) if offset <= from => Tail::BoundReached { bound: offset },
            _ if end > from => Tail::Readable { end },
            _ if poisoned => Tail::Poisoned { end },
            // Not reached for a covered waiter (covered means readable); a
            // wait that ends without a record reports where the log ends.
            _ => Tail::TimedOut { end },
        }
    }

    /// Completes `done` with `outcome`: a slot now, a callback on the
    /// dispatch thread (after every callback handed over before it).
    pub(super) fn deliver<T: Clone + Send + 'static>(
        &self,
        done: Completion<T>,
        outcome: T,
        deferred: &mut Deferred,
    ) {
        match done {
            Completion::Slot(slot) => deferred.wakers.extend(slot.fill(outcome)),
            Completion::Callback(callback) => {
                let run: Callback = Box::new(move || callback(outcome));
                deferred.callbacks.extend(self.pool.dispatch(run));
            }
        }
    }
}
