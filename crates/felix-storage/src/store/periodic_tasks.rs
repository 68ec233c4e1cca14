//! The store's one background thread's work: each periodic task, as it
//! falls due (see `crate::periodic`), over the open shards.

use super::{Inner, lock};
use crate::error::StorageError;
use crate::periodic::Task;

pub(super) fn run(inner: &Inner, task: Task) {
    let shards = lock(&inner.shards).handles();
    for shard in &shards {
        let result = match task {
            Task::Sync => shard.sync(),
            Task::Retention => shard.apply_retention().map(drop),
        };
        // A shard closed since the list was taken (closed, reopened or
        // deleted through the store) has nothing left to do.
        if let Err(err) = result
            && !matches!(err, StorageError::ShardClosed { .. })
        {
            tracing::error!(shard = shard.label(), ?task, error = %err, "background task failed");
        }
    }
}
