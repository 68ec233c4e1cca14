//! The background scrub: one thread reading every sealed segment of a set
//! of shards in turn at a configured rate
//! ([`StoreConfig::scrub_bytes_per_second`](crate::StoreConfig::scrub_bytes_per_second)).
//!
//! It runs apart from the maintenance thread (`periodic.rs`), whose
//! periodic syncs and retention passes must not wait behind a scrub of
//! gigabytes. The rate is held by sleeping between chunks: after each
//! chunk the thread sleeps until the time the bytes so far are due at the
//! rate, on the stop signal, so a close never waits for more than a chunk.
//! A pass over every shard is followed by the next, at most one a second
//! (a shard with nothing sealed does not make it spin).

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::StorageError;
use crate::periodic::{Stop, StoppableThread};
use crate::shard::Core;

/// The shortest time a pass takes, however little it had to read.
const MIN_PASS: Duration = Duration::from_secs(1);

/// A running background scrub; [`Scrubber::stop`] (or drop) ends it.
#[derive(Debug)]
pub(crate) struct Scrubber {
    thread: StoppableThread,
}

impl Scrubber {
    /// Starts a thread named `name` scrubbing the shards `shards` lists
    /// (asked again at every pass) at `bytes_per_second`.
    pub(crate) fn spawn(
        name: String,
        bytes_per_second: u64,
        shards: impl Fn() -> Vec<Arc<Core>> + Send + 'static,
    ) -> std::io::Result<Self> {
        let thread = StoppableThread::spawn(name, move |stopper| {
            loop {
                let started = Instant::now();
                for shard in shards() {
                    if pass(&shard, bytes_per_second, stopper).is_break() {
                        return;
                    }
                }
                if stopper.wait(started.checked_add(MIN_PASS)) {
                    return;
                }
            }
        })?;
        Ok(Self { thread })
    }

    /// Stops the thread, waiting for at most the chunk it is reading.
    pub(crate) fn stop(&self) {
        self.thread.stop();
    }
}

/// The time `bytes` are due at `bytes_per_second` from `started`.
fn due(started: Instant, bytes: u64, bytes_per_second: u64) -> Option<Instant> {
    let micros = u128::from(bytes) * 1_000_000 / u128::from(bytes_per_second.max(1));
    started.checked_add(Duration::from_micros(
        u64::try_from(micros).unwrap_or(u64::MAX),
    ))
}

/// Scrubs one shard at the rate; `Break` once stopped.
fn pass(shard: &Core, bytes_per_second: u64, stop: &Stop) -> ControlFlow<()> {
    let started = Instant::now();
    let mut stopped = false;
    let result = shard.check_open().and_then(|()| {
        shard.log().scrub(&mut |bytes| {
            // Sleeps until the bytes read so far are due; a stop ends it.
            if stop.wait(due(started, bytes, bytes_per_second)) {
                stopped = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        })
    });
    match result {
        Ok(report) if !report.is_clean() => {
            tracing::error!(shard = %shard.label(), damaged = report.damage().count(), "background scrub found damaged records");
        }
        Ok(_) | Err(StorageError::ShardClosed { .. }) => {}
        Err(err) => {
            tracing::error!(shard = %shard.label(), error = %err, "background scrub failed")
        }
    }
    if stopped {
        ControlFlow::Break(())
    } else {
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_spreads_bytes_over_time_at_the_rate() {
        let start = Instant::now();
        assert_eq!(due(start, 0, 1 << 20), Some(start));
        assert_eq!(
            due(start, 1 << 20, 1 << 20),
            Some(start + Duration::from_secs(1))
        );
        assert_eq!(
            due(start, 3 << 19, 1 << 20),
            Some(start + Duration::from_millis(1500))
        );
    }
}
