//! Waiting for the tail: a consumer waits until records past its offset
//! become readable, completed by the append or sync that makes them so:
//! a blocked thread (with a deadline), a future, or a callback.
//!
//! A consumer whose reads end at the durable offset waits on the sync that
//! moves it; one whose reads end at what is written waits on the append
//! that writes. Appends take the commit lock to complete someone only
//! while a consumer watches the written offset (`Commit::tail_written`):
//! the consumer registers before it looks at the offset, and the append
//! publishes the offset before it looks for consumers, both sequentially
//! consistent, so one of the two always sees the other and no wake-up is
//! lost.

use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Instant;

use super::Commit;
use super::completion::thread_waker;
use super::settle::Deferred;
use super::waiters::{Completion, Notify, Slot, Token, Watch};
use crate::error::Result;
use crate::loom::thread;
use crate::shard::bounds::{ReadBound, Tail};

impl Commit {
    /// Waits until a record at or past `from` is readable under `bound`,
    /// until `deadline`, and says what it saw. Returns at once when it
    /// already is, when nothing can become readable under `bound`, or when
    /// the shard is poisoned and everything acknowledged lies below `from`;
    /// a close fails the wait with [`crate::StorageError::ShardClosed`].
    pub(crate) fn wait_readable(
        &self,
        from: u64,
        bound: ReadBound,
        deadline: Option<Instant>,
    ) -> Result<Tail> {
        let slot = Slot::new(Some(thread_waker()));
        let Some(token) = self.watch_tail(from, bound, Completion::Slot(Arc::clone(&slot))) else {
            return slot.get().unwrap_or(Ok(Tail::TimedOut { end: from }));
        };
        loop {
            if let Some(outcome) = slot.get() {
                return outcome;
            }
            let now = Instant::now();
            match deadline {
                Some(deadline) if deadline <= now => {
                    let mut state = self.lock();
                    if self.forget_tail_locked(&mut state, token) {
                        return Ok(self.tail_now(&state, from, bound));
                    }
                    // Completed just now: the slot was filled under the lock.
                    drop(state);
                    if let Some(outcome) = slot.get() {
                        return outcome;
                    }
                }
                Some(deadline) => thread::park_timeout(deadline - now),
                None => thread::park(),
            }
        }
    }

    /// Registers `done` to complete once a record at or past `from` is
    /// readable under `bound` (or the shard is poisoned and everything
    /// acknowledged lies below `from`, or it closes). Completes it at once,
    /// returning `None`, when the answer is known now; otherwise returns
    /// the registration, for [`Commit::forget_tail`].
    pub(crate) fn watch_tail(
        &self,
        from: u64,
        bound: ReadBound,
        done: Completion<Result<Tail>>,
    ) -> Option<Token> {
        let watch = match bound {
            ReadBound::Committed if self.on_commit() => Watch::TailDurable,
            _ => Watch::TailWritten,
        };
        let mut state = self.lock();
        if self.is_closed() || state.stopped() {
            drop(state);
            self.deliver_now(done, Err(self.closed_error()));
            return None;
        }
        let notify = Notify::Tail { from, bound, done };
        let token = state
            .waiters
            .add(watch, from.saturating_add(1), notify, None);
        self.tail_written
            .store(state.waiters.tail_written(), SeqCst);
        // Reads the written offset after registering: see the module docs.
        let tail = self.tail_now(&state, from, bound);
        if matches!(tail, Tail::TimedOut { .. }) {
            return Some(token);
        }
        let waiter = state.waiters.remove(token);
        self.tail_written
            .store(state.waiters.tail_written(), SeqCst);
        let mut deferred = Deferred::default();
        if let Some(waiter) = waiter
            && let Notify::Tail { done, .. } = waiter.notify
        {
            self.deliver(done, Ok(tail), &mut deferred);
        }
        drop(state);
        deferred.run(self);
        None
    }

    /// Takes a tail wait off the list (its future was dropped, or its
    /// deadline passed). Returns whether it was still waiting.
    pub(crate) fn forget_tail(&self, token: Token) -> bool {
        self.forget_tail_locked(&mut self.lock(), token)
    }

    fn forget_tail_locked(&self, state: &mut super::CommitState, token: Token) -> bool {
        let removed = state.waiters.remove(token).is_some();
        self.tail_written
            .store(state.waiters.tail_written(), SeqCst);
        removed
    }
}
