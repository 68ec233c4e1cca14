//! The bound on appends in flight: appends whose future or callback has
//! not completed yet. Each takes a place before it writes and gives it back
//! when it completes, so a producer that never awaits cannot grow the
//! waiter list (and the memory behind it) without limit. Past the bound an
//! append waits for a place or fails at once, as its caller chose.

use std::sync::atomic::Ordering::SeqCst;

use super::Commit;
use crate::error::{Result, StorageError};
use crate::loom::lock;
use crate::loom::sync::atomic::AtomicUsize;
use crate::loom::sync::{Condvar, Mutex};
use crate::metrics::{Started, Timer};

#[derive(Debug)]
pub(super) struct InFlight {
    max: usize,
    count: AtomicUsize,
    /// Appenders waiting for a place: a completion takes the `room` lock
    /// to wake them only when this is not zero.
    waiting: AtomicUsize,
    room: Mutex<()>,
    freed: Condvar,
}

/// A place taken for one append; given back on drop unless it was handed
/// to the append's waiter ([`Admission::keep`]), which gives it back when
/// it completes.
#[derive(Debug)]
#[must_use = "an admission holds a place until dropped"]
pub(crate) struct Admission<'a> {
    commit: &'a Commit,
    held: bool,
    /// When the append asked for its place: the start of its
    /// append-to-durable latency (a wait for a place included).
    started: Started,
}

impl Admission<'_> {
    /// The place now belongs to a waiter on the list; the append's start
    /// goes with it.
    pub(super) fn keep(mut self) -> Started {
        self.held = false;
        self.started
    }

    /// When the append asked for its place.
    pub(super) fn started(&self) -> Started {
        self.started
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if self.held {
            self.commit.in_flight.release(1);
        }
    }
}

impl InFlight {
    pub(super) fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            count: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            room: Mutex::new(()),
            freed: Condvar::new(),
        }
    }

    /// Places taken now.
    #[cfg(all(test, loom))]
    pub(super) fn taken(&self) -> usize {
        self.count.load(SeqCst)
    }

    fn try_take(&self) -> bool {
        let mut n = self.count.load(SeqCst);
        while n < self.max {
            match self.count.compare_exchange_weak(n, n + 1, SeqCst, SeqCst) {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
        false
    }

    /// Takes a place, waiting for one when `wait` (until the shard closes
    /// or stops), or failing with [`StorageError::InFlightFull`].
    pub(super) fn admit<'a>(&self, commit: &'a Commit, wait: bool) -> Result<Admission<'a>> {
        let started = Started::append(Timer::start());
        let admitted = |held| Admission {
            commit,
            held,
            started,
        };
        if self.try_take() {
            return Ok(admitted(true));
        }
        if !wait {
            return Err(StorageError::InFlightFull {
                shard: commit.label().clone(),
                limit: self.max,
            });
        }
        // Registered before the check below, sequentially consistent with
        // `give_back`'s decrement and load: either the releaser sees a waiter
        // and notifies under `room`, or this sees the freed place.
        self.waiting.fetch_add(1, SeqCst);
        let mut room = lock(&self.room);
        let outcome = loop {
            if self.try_take() {
                break Ok(admitted(true));
            }
            if let Err(err) = commit.check_open().and_then(|()| commit.check_poison()) {
                break Err(err);
            }
            room = self
                .freed
                .wait(room)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        };
        drop(room);
        self.waiting.fetch_sub(1, SeqCst);
        outcome
    }

    /// Gives back `n` places.
    pub(super) fn release(&self, n: usize) {
        if self.give_back(n) {
            self.notify();
        }
    }

    /// Gives back `n` places without waking anyone: returns whether an
    /// appender waits for one, to be woken by [`InFlight::notify`] once the
    /// caller released its locks. A completion gives its place back before
    /// it becomes observable, so a caller whose append completed always
    /// finds that place free for its next one.
    pub(super) fn give_back(&self, n: usize) -> bool {
        if n == 0 {
            return false;
        }
        // Sequentially consistent with `admit`'s increment of `waiting`
        // and its `try_take`: either this sees the waiter, or the waiter
        // sees the freed place.
        let before = self.count.fetch_sub(n, SeqCst);
        debug_assert!(before >= n, "released {n} of {before} places");
        self.waiting.load(SeqCst) > 0
    }

    /// Wakes the appenders waiting for a place.
    pub(super) fn notify(&self) {
        let _room = lock(&self.room);
        self.freed.notify_all();
    }

    /// Wakes every waiting appender to see that the shard stopped. Takes
    /// the lock whoever waits: a waiter checks for the stop under it, so
    /// it either saw the stop or is waiting when this notifies (the closed
    /// flag and the poison are not sequentially consistent with `waiting`).
    pub(super) fn wake_all(&self) {
        let _room = lock(&self.room);
        self.freed.notify_all();
    }
}
