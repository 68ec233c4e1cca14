//! The store's one background thread: periodic syncs and retention passes
//! over the open shards, each on its own interval, until the store stops.

use std::time::{Duration, Instant};

use super::{Inner, lock};
use crate::error::StorageError;

pub(super) fn run(inner: &Inner, sync_every: Option<Duration>, retain_every: Option<Duration>) {
    let now = Instant::now();
    let mut next_sync = sync_every.map(|d| now + d);
    let mut next_retention = retain_every.map(|d| now + d);
    loop {
        let wake_at = [next_sync, next_retention].into_iter().flatten().min();
        {
            let mut stopped = lock(&inner.stop);
            while !*stopped {
                let timeout = wake_at.map_or(Duration::from_secs(3600), |t| {
                    t.saturating_duration_since(Instant::now())
                });
                if timeout.is_zero() {
                    break;
                }
                stopped = inner
                    .wake
                    .wait_timeout(stopped, timeout)
                    .map_or_else(|e| e.into_inner().0, |r| r.0);
            }
            if *stopped {
                return;
            }
        }
        let now = Instant::now();
        let shards: Vec<_> = lock(&inner.shards).values().cloned().collect();
        // A shard closed since the list was taken (closed, reopened or
        // deleted through the store) has nothing left to sync.
        let failed = |err: &StorageError| !matches!(err, StorageError::Closed { .. });
        if let (Some(at), Some(every)) = (next_sync, sync_every)
            && now >= at
        {
            for shard in &shards {
                if let Err(err) = shard.sync()
                    && failed(&err)
                {
                    tracing::error!(shard = shard.label(), error = %err, "periodic sync failed");
                }
            }
            next_sync = Some(now + every);
        }
        if let (Some(at), Some(every)) = (next_retention, retain_every)
            && now >= at
        {
            for shard in &shards {
                if let Err(err) = shard.apply_retention()
                    && failed(&err)
                {
                    tracing::error!(shard = shard.label(), error = %err, "retention failed");
                }
            }
            next_retention = Some(now + every);
        }
    }
}
