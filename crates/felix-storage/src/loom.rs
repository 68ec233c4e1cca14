//! The synchronisation primitives of group commit and the sync pool: from
//! `std` in every normal build, from `loom` under `--cfg loom`, so that the
//! loom models (`shard/commit/loom_tests.rs`, `loom_shard_tests.rs`) check
//! the very code a shard runs, as tokio checks its own primitives.
//!
//! `Arc` is `std`'s in both builds: loom's cannot hold a trait object (the
//! pool's jobs, a `Waker`'s thread), and reference counts are not part of
//! the protocol the models check.
//!
//! Threads park and unpark through a token of their own under loom
//! (`thread::park`, `Thread::unpark`), kept as `std` keeps one: loom's
//! `unpark` of a thread blocked on a mutex or in `join` wakes it there and
//! fails loom's own assertions, while the protocol may unpark a thread
//! that has stopped waiting already.
//!
//! A lock that is ever taken with `try_lock` is a [`sync::TryMutex`]: `std`'s
//! `Mutex` in a normal build; under loom a mutex of our own whose
//! `try_lock` fails at once when the lock is held, as `std`'s does (loom's
//! own `try_lock` can leave the thread blocked until the lock is free when
//! another thread takes it just before, which is a wait `std` never makes
//! and would show a deadlock the real code does not have).

pub(crate) mod sync {
    #[cfg(loom)]
    pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
    #[cfg(not(loom))]
    pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};

    #[cfg(loom)]
    pub(crate) use super::try_mutex::{TryMutex, TryMutexGuard};
    #[cfg(not(loom))]
    pub(crate) use std::sync::{Mutex as TryMutex, MutexGuard as TryMutexGuard};

    pub(crate) mod atomic {
        #[cfg(loom)]
        pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
        #[cfg(not(loom))]
        pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
    }
}

pub(crate) mod thread {
    #[cfg(loom)]
    pub(crate) use super::parker::{Thread, current, park};
    #[cfg(loom)]
    pub(crate) use loom::thread::{Builder, JoinHandle};
    #[cfg(not(loom))]
    pub(crate) use std::thread::{Builder, JoinHandle, Thread, current, park, park_timeout};

    /// loom has no timed park; a timed park may return early anyway, so a
    /// yield is one (tail waits with a deadline are not modelled).
    #[cfg(loom)]
    pub(crate) fn park_timeout(_: std::time::Duration) {
        loom::thread::yield_now();
    }
}

#[cfg(loom)]
mod parker {
    use std::fmt;
    use std::sync::{Arc, PoisonError};

    use loom::sync::{Condvar, Mutex};
    use loom::thread::ThreadId;

    /// A thread's park token, as `std` keeps one: `unpark` sets it, `park`
    /// waits for it and takes it.
    struct Parker {
        token: Mutex<bool>,
        unparked: Condvar,
    }

    /// A handle to park and unpark a loom thread through its own token
    /// rather than loom's: loom's `unpark` also wakes a thread blocked on a
    /// mutex or in `join`, which then fails loom's own assertions, while
    /// `std` keeps such an unpark for the thread's next `park`. The
    /// protocol unparks a thread that may have stopped waiting already
    /// (a completion wakes its waiter after the waiter saw it complete).
    #[derive(Clone)]
    pub(crate) struct Thread {
        id: ThreadId,
        parker: Arc<Parker>,
    }

    loom::thread_local! {
        static CURRENT: Thread = Thread {
            id: loom::thread::current().id(),
            parker: Arc::new(Parker {
                token: Mutex::new(false),
                unparked: Condvar::new(),
            }),
        };
    }

    /// The calling thread.
    pub(crate) fn current() -> Thread {
        CURRENT.with(Thread::clone)
    }

    /// Waits until the calling thread's token is set, and takes it.
    pub(crate) fn park() {
        CURRENT.with(|me| {
            let mut token = crate::loom::lock(&me.parker.token);
            while !*token {
                token = me
                    .parker
                    .unparked
                    .wait(token)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            *token = false;
        });
    }

    impl Thread {
        pub(crate) fn id(&self) -> ThreadId {
            self.id
        }

        /// Sets the thread's token, waking it if it is parked.
        pub(crate) fn unpark(&self) {
            *crate::loom::lock(&self.parker.token) = true;
            self.parker.unparked.notify_one();
        }
    }

    impl fmt::Debug for Thread {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Thread").field("id", &self.id).finish()
        }
    }
}

#[cfg(loom)]
mod try_mutex {
    use std::fmt;
    use std::sync::{LockResult, PoisonError, TryLockError, TryLockResult};

    use loom::sync::{Condvar, Mutex, MutexGuard};

    /// A mutex whose `try_lock` never waits (see the module docs). Who holds
    /// it is a flag under a loom mutex that is held for a few steps only;
    /// a thread that finds it set waits on a loom condition variable, so a
    /// wait nobody ends is a deadlock loom reports. The data is behind a
    /// loom mutex of its own, taken once the flag is ours: only a holder
    /// still letting it go can make that wait.
    pub(crate) struct TryMutex<T> {
        held: Mutex<bool>,
        released: Condvar,
        data: Mutex<T>,
    }

    /// The lock held: released on drop.
    pub(crate) struct TryMutexGuard<'a, T> {
        mutex: &'a TryMutex<T>,
        data: MutexGuard<'a, T>,
    }

    impl<T> TryMutex<T> {
        pub(crate) fn new(data: T) -> Self {
            Self {
                held: Mutex::new(false),
                released: Condvar::new(),
                data: Mutex::new(data),
            }
        }

        pub(crate) fn lock(&self) -> LockResult<TryMutexGuard<'_, T>> {
            let mut held = crate::loom::lock(&self.held);
            while *held {
                held = self
                    .released
                    .wait(held)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            *held = true;
            drop(held);
            Ok(self.guard())
        }

        pub(crate) fn try_lock(&self) -> TryLockResult<TryMutexGuard<'_, T>> {
            let mut held = crate::loom::lock(&self.held);
            if *held {
                return Err(TryLockError::WouldBlock);
            }
            *held = true;
            drop(held);
            Ok(self.guard())
        }

        fn guard(&self) -> TryMutexGuard<'_, T> {
            TryMutexGuard {
                mutex: self,
                data: crate::loom::lock(&self.data),
            }
        }
    }

    impl<T> fmt::Debug for TryMutex<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("TryMutex").finish_non_exhaustive()
        }
    }

    impl<T> std::ops::Deref for TryMutexGuard<'_, T> {
        type Target = T;

        fn deref(&self) -> &T {
            &self.data
        }
    }

    impl<T> std::ops::DerefMut for TryMutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            &mut self.data
        }
    }

    impl<T> Drop for TryMutexGuard<'_, T> {
        /// Clears the flag; the data's own guard is let go right after.
        fn drop(&mut self) {
            *crate::loom::lock(&self.mutex.held) = false;
            self.mutex.released.notify_one();
        }
    }
}

use sync::{Mutex, MutexGuard};

/// Locks `mutex`, recovering it if a thread panicked while holding it:
/// every state these locks guard is updated by a few assignments, so a
/// panic cannot leave it inconsistent.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
