//! The synchronisation primitives of group commit and the sync pool: from
//! `std` in every normal build, from `loom` under `--cfg loom`, so that the
//! loom models (`shard/commit/loom_tests.rs`) check the very code a shard
//! runs, as tokio checks its own primitives.
//!
//! `Arc` is `std`'s in both builds: loom's cannot hold a trait object (the
//! pool's jobs, a `Waker`'s thread), and reference counts are not part of
//! the protocol the models check.

pub(crate) mod sync {
    #[cfg(loom)]
    pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
    #[cfg(not(loom))]
    pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};

    pub(crate) mod atomic {
        #[cfg(loom)]
        pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
        #[cfg(not(loom))]
        pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
    }
}

pub(crate) mod thread {
    #[cfg(loom)]
    pub(crate) use loom::thread::{Builder, JoinHandle, Thread, current, park};
    #[cfg(not(loom))]
    pub(crate) use std::thread::{Builder, JoinHandle, Thread, current, park, park_timeout};

    /// loom has no timed park; a timed park may return early anyway, so a
    /// yield is one (tail waits with a deadline are not modelled).
    #[cfg(loom)]
    pub(crate) fn park_timeout(_: std::time::Duration) {
        loom::thread::yield_now();
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
