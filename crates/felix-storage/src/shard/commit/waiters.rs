//! Who is waiting for the log to move, and for what.
//!
//! One list holds every waiter of a shard: appenders waiting for their
//! records to become durable, and consumers waiting for records to become
//! readable. Whoever moves the durable or written offset takes the waiters
//! it satisfied off the list (under the commit lock) and wakes them after
//! releasing it.
//!
//! A waiter is woken through a [`Wake`]. Today that is always a parked
//! thread; completions that are futures or callbacks add their kinds here
//! (a `Waker` to wake, a callback to run with the outcome), so that every
//! form of waiting shares one list, one order and one place where it is
//! decided who is covered.

use std::thread::Thread;

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

/// How a waiter is woken.
#[derive(Debug, Clone)]
pub(crate) enum Wake {
    /// A thread parked in a blocking call.
    Thread(Thread),
}

impl Wake {
    /// The waker for the calling thread.
    pub(crate) fn current_thread() -> Self {
        Self::Thread(std::thread::current())
    }

    /// Wakes the waiter. Called with no lock held: an unpark is a system
    /// call, and holding the commit lock across dozens of them stalls every
    /// appender that wants to register (64 appenders: 68 k → 118 k
    /// records/s).
    pub(crate) fn wake(self) {
        match self {
            Self::Thread(thread) => thread.unpark(),
        }
    }
}

/// Wakes every waiter in `wakes`, after the commit lock was released.
pub(crate) fn wake_all(wakes: Vec<Wake>) {
    for wake in wakes {
        wake.wake();
    }
}

/// Identifies one registration, so a waiter can tell whether it is still
/// on the list (not yet covered) or was taken off it (covered).
pub(crate) type Token = u64;

#[derive(Debug)]
struct Waiter {
    token: Token,
    watch: Watch,
    target: u64,
    wake: Wake,
}

/// The waiters of one shard, under the commit lock.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    list: Vec<Waiter>,
    next_token: Token,
    /// Waiters watching the written offset: appends only take the commit
    /// lock to wake someone when this is not zero.
    tail_written: usize,
}

impl Waiters {
    /// Registers a waiter; it stays on the list until covered or removed.
    pub(crate) fn add(&mut self, watch: Watch, target: u64, wake: Wake) -> Token {
        let token = self.next_token;
        self.next_token += 1;
        if watch == Watch::TailWritten {
            self.tail_written += 1;
        }
        self.list.push(Waiter {
            token,
            watch,
            target,
            wake,
        });
        token
    }

    /// Whether the registration is still waiting (not covered).
    pub(crate) fn contains(&self, token: Token) -> bool {
        self.list.iter().any(|w| w.token == token)
    }

    /// Takes a registration off the list, covered or not.
    pub(crate) fn remove(&mut self, token: Token) {
        if let Some(i) = self.list.iter().position(|w| w.token == token) {
            let waiter = self.list.swap_remove(i);
            if waiter.watch == Watch::TailWritten {
                self.tail_written -= 1;
            }
        }
    }

    /// Takes off every waiter that `durable` and `written` satisfy and
    /// returns how to wake them.
    #[must_use = "the covered waiters must be woken"]
    pub(crate) fn take_covered(&mut self, durable: u64, written: u64) -> Vec<Wake> {
        let mut covered = Vec::new();
        let mut tail_written = 0;
        self.list.retain(|w| {
            let done = match w.watch {
                Watch::Durability | Watch::TailDurable => w.target <= durable,
                Watch::TailWritten => w.target <= written,
            };
            if done {
                covered.push(w.wake.clone());
            } else if w.watch == Watch::TailWritten {
                tail_written += 1;
            }
            !done
        });
        self.tail_written = tail_written;
        covered
    }

    /// Every waiter's waker, leaving them on the list: for a poison or a
    /// close, after which each waiter sees for itself that it was not
    /// covered and why.
    pub(crate) fn wake_everyone(&self) -> Vec<Wake> {
        self.list.iter().map(|w| w.wake.clone()).collect()
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

    /// Whether any appender waits for durability (so a sync is on its way
    /// or the flusher is about to make one).
    pub(crate) fn has_durability_waiters(&self) -> bool {
        self.list.iter().any(|w| w.watch == Watch::Durability)
    }

    /// Waiters watching the written offset.
    pub(crate) fn tail_written(&self) -> usize {
        self.tail_written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Wake {
        Wake::current_thread()
    }

    #[test]
    fn take_covered_takes_each_watch_by_its_own_offset() {
        let mut waiters = Waiters::default();
        let durable = waiters.add(Watch::Durability, 5, me());
        let tail_durable = waiters.add(Watch::TailDurable, 7, me());
        let tail_written = waiters.add(Watch::TailWritten, 7, me());
        assert_eq!(waiters.tail_written(), 1);
        assert_eq!(waiters.take_covered(5, 6).len(), 1);
        assert!(!waiters.contains(durable));
        assert!(waiters.contains(tail_durable) && waiters.contains(tail_written));
        assert_eq!(waiters.take_covered(5, 7).len(), 1);
        assert!(!waiters.contains(tail_written));
        assert_eq!(waiters.tail_written(), 0);
        assert_eq!(waiters.take_covered(7, 7).len(), 1);
        assert!(!waiters.contains(tail_durable));
    }

    #[test]
    fn clamp_durability_leaves_tail_waiters_alone() {
        let mut waiters = Waiters::default();
        let append = waiters.add(Watch::Durability, 9, me());
        let tail = waiters.add(Watch::TailDurable, 9, me());
        waiters.clamp_durability(4);
        assert!(waiters.needs_sync(3));
        assert_eq!(waiters.take_covered(4, 4).len(), 1);
        assert!(!waiters.contains(append));
        assert!(waiters.contains(tail));
        assert!(!waiters.has_durability_waiters());
        waiters.remove(tail);
        assert!(!waiters.contains(tail));
    }
}
