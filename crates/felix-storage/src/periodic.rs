//! Background work on a schedule: periodic syncs and retention passes.
//!
//! One loop serves both owners: a [`Store`](crate::Store) runs it on its one
//! thread for all its shards, and a shard opened on its own runs it on a
//! thread of its own, so that [`Durability::Periodic`] and
//! [`Retention::interval`](crate::Retention::interval) take effect wherever
//! they are configured. A configuration with neither starts no thread.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::{Durability, StoreConfig};

/// One kind of background work that fell due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Task {
    /// Make everything written durable.
    Sync,
    /// Apply the retention rules.
    Retention,
}

/// When each kind of work is next due.
#[derive(Debug)]
struct Schedule {
    sync_every: Option<Duration>,
    retain_every: Option<Duration>,
    next_sync: Option<Instant>,
    next_retention: Option<Instant>,
}

impl Schedule {
    /// The schedule `config` asks for, or `None` when it asks for nothing.
    fn of(config: &StoreConfig, now: Instant) -> Option<Self> {
        let sync_every = match config.durability {
            Durability::Periodic(interval) => Some(interval),
            Durability::None | Durability::OnCommit => None,
        };
        let retain_every = config.retention.interval;
        if sync_every.is_none() && retain_every.is_none() {
            return None;
        }
        Some(Self {
            sync_every,
            retain_every,
            // Validated intervals (at most a day) cannot overflow an
            // `Instant`; `checked_add` keeps an unvalidated one from
            // panicking all the same.
            next_sync: sync_every.and_then(|d| now.checked_add(d)),
            next_retention: retain_every.and_then(|d| now.checked_add(d)),
        })
    }

    fn next_due(&self) -> Option<Instant> {
        [self.next_sync, self.next_retention]
            .into_iter()
            .flatten()
            .min()
    }

    /// The work due at `now`, each rescheduled one interval on.
    fn take_due(&mut self, now: Instant) -> Vec<Task> {
        let mut due = Vec::new();
        for (next, every, task) in [
            (&mut self.next_sync, self.sync_every, Task::Sync),
            (&mut self.next_retention, self.retain_every, Task::Retention),
        ] {
            if let (Some(at), Some(every)) = (*next, every)
                && now >= at
            {
                *next = now.checked_add(every);
                due.push(task);
            }
        }
        due
    }
}

/// Tells a background loop (this one, or the scrubber's) to stop.
#[derive(Debug, Default)]
pub(crate) struct Stop {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl Stop {
    /// Waits until `until` (forever for `None`) or until stopped; returns
    /// whether it was stopped.
    pub(crate) fn wait(&self, until: Option<Instant>) -> bool {
        let mut stopped = self.stopped.lock().unwrap_or_else(PoisonError::into_inner);
        while !*stopped {
            let timeout = match until {
                Some(at) => at.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if until.is_some() && timeout.is_zero() {
                break;
            }
            stopped = self
                .wake
                .wait_timeout(stopped, timeout)
                .map_or_else(|e| e.into_inner().0, |r| r.0);
        }
        *stopped
    }

    pub(crate) fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.wake.notify_all();
    }
}

/// A background thread that runs until told to stop: the one way the
/// maintenance thread and the scrubber start, stop and are joined.
#[derive(Debug)]
pub(crate) struct StoppableThread {
    stop: Arc<Stop>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl StoppableThread {
    /// Starts a thread named `name` running `body`, which should return
    /// soon after its [`Stop`] is stopped.
    pub(crate) fn spawn(
        name: String,
        body: impl FnOnce(&Stop) + Send + 'static,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(Stop::default());
        let stopper = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || body(&stopper))?;
        Ok(Self {
            stop,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Stops the thread and waits for what it is doing, if anything.
    /// Must not be called from the thread itself.
    pub(crate) fn stop(&self) {
        self.stop.stop();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            // A panic in the thread has been reported by the panic hook;
            // the owner goes on stopping.
            let _ = thread.join();
        }
    }
}

impl Drop for StoppableThread {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A running maintenance thread; [`Maintenance::stop`] (or drop) ends it.
#[derive(Debug)]
pub(crate) struct Maintenance {
    thread: StoppableThread,
}

impl Maintenance {
    /// Starts a thread named `name` that calls `run` with each task as it
    /// falls due under `config`'s intervals, or returns `None` when the
    /// configuration has no interval.
    pub(crate) fn spawn(
        name: String,
        config: &StoreConfig,
        mut run: impl FnMut(Task) + Send + 'static,
    ) -> std::io::Result<Option<Self>> {
        let Some(mut schedule) = Schedule::of(config, Instant::now()) else {
            return Ok(None);
        };
        let thread = StoppableThread::spawn(name, move |stop| {
            while !stop.wait(schedule.next_due()) {
                for task in schedule.take_due(Instant::now()) {
                    run(task);
                }
            }
        })?;
        Ok(Some(Self { thread }))
    }

    /// Stops the thread and waits for the task it is running, if any.
    /// Must not be called from the thread itself.
    pub(crate) fn stop(&self) {
        self.thread.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Retention;

    #[test]
    fn schedule_of_a_config_without_intervals_is_none() {
        assert!(Schedule::of(&StoreConfig::default(), Instant::now()).is_none());
    }

    #[test]
    fn schedule_takes_each_task_when_due_and_reschedules_it() {
        let start = Instant::now();
        let config = StoreConfig {
            durability: Durability::Periodic(Duration::from_millis(10)),
            retention: Retention {
                max_bytes: Some(1),
                interval: Some(Duration::from_millis(25)),
                ..Retention::default()
            },
            ..StoreConfig::default()
        };
        let mut schedule = Schedule::of(&config, start).unwrap();
        assert_eq!(schedule.next_due(), Some(start + Duration::from_millis(10)));
        assert_eq!(schedule.take_due(start), []);
        let at = start + Duration::from_millis(10);
        assert_eq!(schedule.take_due(at), [Task::Sync]);
        assert_eq!(schedule.next_due(), Some(at + Duration::from_millis(10)));
        let later = start + Duration::from_millis(30);
        assert_eq!(schedule.take_due(later), [Task::Sync, Task::Retention]);
    }
}
