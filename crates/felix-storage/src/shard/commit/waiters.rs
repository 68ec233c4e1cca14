//! Who is waiting for the log to move, for what, and how each is told.
//!
//! One list holds every waiter of a shard: appends and `wait_durable`s
//! waiting for records to become durable, and consumers waiting for records
//! to become readable. Whoever moves the durable or written offset (a sync,
//! an append), stops the shard (a failure) or closes it takes the waiters
//! that settles off the list, under the commit lock, and completes each
//! exactly once with its outcome ([`Completion`]): a blocked thread and a
//! future find the outcome in their [`Slot`] (set under the commit lock, so
//! that completions of one shard become ready in offset order) and are
//! woken after the lock is released; a callback is handed, in the same
//! order, to the sync pool's dispatch thread.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::error::Result;
use crate::loom::lock;
use crate::loom::sync::Mutex;
use crate::metrics::Started;
use crate::shard::bounds::{ReadBound, Tail};

/// What a waiter waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Watch {
    /// Records below `target` durable, for an append or `wait_durable`.
    /// A cut of the log clamps the target to the new end: the records it
    /// waited for are gone, and nothing else will make them durable.
    Durability,
    /// The durable offset at or past `target`, for a consumer whose reads
    /// end at the durable offset. Not clamped by a cut, and no reason for a
    /// sync: consumers do not drive durability, appenders do.
    TailDurable,
    /// The written offset at or past `target`, for a consumer whose reads
    /// end at what is written.
    TailWritten,
}

/// Where an outcome goes: a slot that a blocked thread or a future reads,
/// or a callback.
pub(crate) enum Completion<T> {
    /// Filled once; its waker (a parked thread's, or a future's) is woken.
    Slot(Arc<Slot<T>>),
    /// Run once with the outcome, on the dispatch thread.
    Callback(Box<dyn FnOnce(T) + Send>),
}

impl<T> std::fmt::Debug for Completion<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Slot(_) => "Slot",
            Self::Callback(_) => "Callback",
        })
    }
}

/// How a waiter is told, by what it waits for.
#[derive(Debug)]
pub(crate) enum Notify {
    /// A durability wait: `Ok` once its records are durable.
    Durable(Completion<Result<()>>),
    /// A tail wait at `from` under `bound`: what the consumer may read.
    Tail {
        from: u64,
        bound: ReadBound,
        done: Completion<Result<Tail>>,
    },
}

/// One outcome, written once, read by a blocked thread or a future.
#[derive(Debug)]
pub(crate) struct Slot<T> {
    state: Mutex<SlotState<T>>,
}

#[derive(Debug)]
struct SlotState<T> {
    outcome: Option<T>,
    waker: Option<Waker>,
}

impl<T: Clone> Slot<T> {
    /// An empty slot; `waker` is woken when it is filled.
    pub(crate) fn new(waker: Option<Waker>) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(SlotState {
                outcome: None,
                waker,
            }),
        })
    }

    /// Sets the outcome (the first one only) and returns the waker to wake
    /// once no lock is held.
    #[must_use = "the waker must be woken"]
    pub(crate) fn fill(&self, outcome: T) -> Option<Waker> {
        let mut state = lock(&self.state);
        if state.outcome.is_some() {
            return None;
        }
        state.outcome = Some(outcome);
        state.waker.take()
    }

    /// The outcome, if set.
    pub(crate) fn get(&self) -> Option<T> {
        lock(&self.state).outcome.clone()
    }

    /// The outcome, or `Pending` with `cx`'s waker kept to be woken.
    pub(crate) fn poll(&self, cx: &Context<'_>) -> Poll<T> {
        let mut state = lock(&self.state);
        match &state.outcome {
            Some(outcome) => Poll::Ready(outcome.clone()),
            None => {
                match &mut state.waker {
                    Some(waker) if waker.will_wake(cx.waker()) => {}
                    slot => *slot = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }

    /// Forgets the waker (a future dropped): the outcome is still set when
    /// it comes, and nobody is woken.
    pub(crate) fn forget_waker(&self) {
        lock(&self.state).waker = None;
    }
}

/// Identifies one registration, so that it can be taken off the list.
pub(crate) type Token = u64;

/// One waiter on the list.
#[derive(Debug)]
pub(crate) struct Waiter {
    pub(crate) token: Token,
    pub(crate) watch: Watch,
    pub(crate) target: u64,
    pub(crate) notify: Notify,
    /// Whether it holds one of the shard's in-flight places (an append's
    /// future or callback), given back once it completes.
    pub(crate) permit: bool,
    /// When the append it completes began, for the append-to-durable
    /// histogram (`Started::NONE` for anything else).
    pub(crate) started: Started,
}

/// The waiters of one shard, under the commit lock.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    list: Vec<Waiter>,
    next_token: Token,
    /// Waiters watching the written offset: appends only take the commit
    /// lock to wake someone when this is not zero.
    tail_written: usize,
    /// Durability waiters on the list.
    durability: usize,
}

impl Waiters {
    /// Registers a waiter; it stays on the list until taken off. `permit`
    /// is, for an append holding an in-flight place, when it began.
    pub(crate) fn add(
        &mut self,
        watch: Watch,
        target: u64,
        notify: Notify,
        permit: Option<Started>,
    ) -> Token {
        let token = self.next_token;
        self.next_token += 1;
        match watch {
            Watch::TailWritten => self.tail_written += 1,
            Watch::Durability => self.durability += 1,
            Watch::TailDurable => {}
        }
        self.list.push(Waiter {
            token,
            watch,
            target,
            notify,
            permit: permit.is_some(),
            started: permit.unwrap_or(Started::NONE),
        });
        token
    }

    /// Takes a registration off the list, if it is still on it.
    pub(crate) fn remove(&mut self, token: Token) -> Option<Waiter> {
        let i = self.list.iter().position(|w| w.token == token)?;
        // Order matters only among covered waiters, which are sorted when
        // taken; `remove` keeps the rest in registration order anyway.
        let waiter = self.list.remove(i);
        match waiter.watch {
            Watch::TailWritten => self.tail_written -= 1,
            Watch::Durability => self.durability -= 1,
            Watch::TailDurable => {}
        }
        Some(waiter)
    }

    /// Takes off every waiter that `durable` and `written` satisfy, in
    /// offset order (registration order among equal targets).
    #[must_use = "the covered waiters must be completed"]
    pub(crate) fn take_covered(&mut self, durable: u64, written: u64) -> Vec<Waiter> {
        let covers = |w: &Waiter| match w.watch {
            Watch::Durability | Watch::TailDurable => w.target <= durable,
            Watch::TailWritten => w.target <= written,
        };
        if !self.list.iter().any(covers) {
            return Vec::new();
        }
        // In place: the list keeps its capacity, so adding waiters after a
        // sync does not allocate again.
        let mut covered: Vec<Waiter> = self.list.extract_if(.., |w| covers(w)).collect();
        self.recount();
        covered.sort_by_key(|w| w.target);
        covered
    }

    /// Takes off every waiter, in offset order: for a failure, a close or
    /// a drop, which settle them all.
    #[must_use = "the waiters must be completed"]
    pub(crate) fn take_all(&mut self) -> Vec<Waiter> {
        self.tail_written = 0;
        self.durability = 0;
        let mut all = std::mem::take(&mut self.list);
        all.sort_by_key(|w| w.target);
        all
    }

    /// Takes off every durability waiter, in offset order.
    #[must_use = "the waiters must be completed"]
    pub(crate) fn take_durability(&mut self) -> Vec<Waiter> {
        let mut taken: Vec<Waiter> = self
            .list
            .extract_if(.., |w| w.watch == Watch::Durability)
            .collect();
        self.durability = 0;
        taken.sort_by_key(|w| w.target);
        taken
    }

    fn recount(&mut self) {
        self.tail_written = 0;
        self.durability = 0;
        for w in &self.list {
            match w.watch {
                Watch::TailWritten => self.tail_written += 1,
                Watch::Durability => self.durability += 1,
                Watch::TailDurable => {}
            }
        }
    }

    /// Durability waiters on the list (appends and `wait_durable`s whose
    /// records the last sync did not cover).
    pub(crate) fn durability(&self) -> usize {
        self.durability
    }

    /// After a cut of the log to `end`: durability waits for records that
    /// no longer exist end at `end`.
    pub(crate) fn clamp_durability(&mut self, end: u64) {
        for w in &mut self.list {
            if w.watch == Watch::Durability {
                w.target = w.target.min(end);
            }
        }
    }

    /// Whether an appender waits for a sync that would cover more than
    /// `durable`.
    pub(crate) fn needs_sync(&self, durable: u64) -> bool {
        self.list
            .iter()
            .any(|w| w.watch == Watch::Durability && w.target > durable)
    }

    /// Whether any appender waits for durability (so a sync is on its way).
    pub(crate) fn has_durability_waiters(&self) -> bool {
        self.durability > 0
    }

    /// Waiters watching the written offset.
    pub(crate) fn tail_written(&self) -> usize {
        self.tail_written
    }

    /// Waiters on the list.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn slot() -> Notify {
        Notify::Durable(Completion::Slot(Slot::new(None)))
    }

    fn tail() -> Notify {
        Notify::Tail {
            from: 0,
            bound: ReadBound::Committed,
            done: Completion::Slot(Slot::new(None)),
        }
    }

    fn tokens(waiters: &[Waiter]) -> Vec<Token> {
        waiters.iter().map(|w| w.token).collect()
    }

    #[test]
    fn take_covered_takes_each_watch_by_its_own_offset_in_offset_order() {
        let mut waiters = Waiters::default();
        let late = waiters.add(Watch::Durability, 5, slot(), None);
        let early = waiters.add(Watch::Durability, 3, slot(), None);
        let tail_durable = waiters.add(Watch::TailDurable, 7, tail(), None);
        let tail_written = waiters.add(Watch::TailWritten, 7, tail(), None);
        assert_eq!(waiters.tail_written(), 1);
        assert_eq!(tokens(&waiters.take_covered(5, 6)), [early, late]);
        assert_eq!(tokens(&waiters.take_covered(5, 7)), [tail_written]);
        assert_eq!(waiters.tail_written(), 0);
        assert_eq!(tokens(&waiters.take_covered(7, 7)), [tail_durable]);
        assert_eq!(waiters.len(), 0);
    }

    #[test]
    fn clamp_durability_leaves_tail_waiters_alone() {
        let mut waiters = Waiters::default();
        let append = waiters.add(Watch::Durability, 9, slot(), Some(Started::NONE));
        let tail = waiters.add(Watch::TailDurable, 9, tail(), None);
        waiters.clamp_durability(4);
        assert!(waiters.needs_sync(3));
        assert_eq!(tokens(&waiters.take_covered(4, 4)), [append]);
        assert!(!waiters.has_durability_waiters());
        assert_eq!(waiters.remove(tail).map(|w| w.token), Some(tail));
        assert!(waiters.remove(tail).is_none());
    }

    #[test]
    fn slot_fills_once_and_wakes_its_waker() {
        let slot = Slot::<u32>::new(None);
        assert!(slot.fill(1).is_none());
        assert!(slot.fill(2).is_none());
        assert_eq!(slot.get(), Some(1));
    }
}
