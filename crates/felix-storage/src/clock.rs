//! The wall clock a shard measures record ages against, injectable so that
//! age-based retention can be tested without waiting.

use std::fmt;
use std::time::SystemTime;

/// A source of wall-clock time. Retention's
/// [`max_age`](crate::Retention::max_age) compares records' timestamps with
/// [`Clock::now`].
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use felix_storage::{Clock, Shard};
///
/// /// A clock that only moves when told to.
/// #[derive(Debug, Default)]
/// struct ManualClock(AtomicU64);
///
/// impl Clock for ManualClock {
///     fn now(&self) -> SystemTime {
///         UNIX_EPOCH + Duration::from_micros(self.0.load(Ordering::Relaxed))
///     }
/// }
///
/// let dir = tempfile::tempdir()?;
/// let clock = Arc::new(ManualClock::default());
/// let shard = Shard::options(dir.path()).clock(clock.clone()).open()?;
/// clock.0.store(3_600_000_000, Ordering::Relaxed); // an hour in
/// # drop(shard);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current wall-clock time.
    fn now(&self) -> SystemTime;
}

/// The operating system's wall clock: the default [`Clock`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}
