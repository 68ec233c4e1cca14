//! Where a replicated shard's log begins, moved through the log.
//!
//! `delete_records_before` and retention never delete on one replica
//! alone: the leader appends a log-start entry ([`Request::LogStart`]);
//! every replica that applies it asks for a snapshot at the entry before
//! the new start (`state_machine.rs`), openraft purges its log up to that
//! snapshot, and felix-raft moves the shard's start. A replica that missed
//! the entries below the start is sent the snapshot instead.
//!
//! Here: the keeper that asks a group's openraft for that snapshot when an
//! applied entry asks for a new start (one task per group, asleep until
//! then), and the retention pass by which a node proposes a start for each
//! group it leads, when [`NodeConfig::retention`](crate::NodeConfig::retention)
//! sets limits.

use std::sync::Arc;
use std::time::Duration;

use felix_raft::{FelixLogStore, Request, TypeConfig};
use felix_storage::Retention;
use openraft::rt::watch::WatchReceiver;
use tokio::sync::watch;

use crate::node::{GroupRaft, Shared};

/// How long the keeper waits for a snapshot or purge it asked for before
/// it asks again; doubled on each try...
const FIRST_WAIT: Duration = Duration::from_millis(200);
/// ...up to this.
const LONGEST_WAIT: Duration = Duration::from_secs(10);

/// Moves the group's log start wherever the applied log-start entries ask
/// (and, at open, just past the recorded snapshot, finishing a purge a
/// crash cut short): asks openraft for a snapshot at the entry before the
/// start until it has one, then for the purge up to it until the log
/// begins there. A leader's purge waits while replication reads those
/// entries, so it is asked again, with a growing pause, until it is done
/// or a later start is wanted. Ends when the group stops.
pub(crate) async fn keep_start(
    node: u64,
    shard: String,
    raft: GroupRaft,
    log: FelixLogStore<TypeConfig>,
    mut wanted: watch::Receiver<u64>,
) {
    loop {
        let start = *wanted.borrow_and_update();
        if let Some(target) = start.checked_sub(1) {
            let mut wait = FIRST_WAIT;
            while log.shard().offsets().base <= target {
                let snapshot = raft.metrics().borrow_watched().snapshot;
                let asked = if snapshot.is_some_and(|s| s.index >= target) {
                    // openraft skips a purge already scheduled: one past
                    // the target passes that check and is cut back to the
                    // snapshot.
                    raft.trigger().purge_log(target.saturating_add(1)).await
                } else {
                    raft.trigger().snapshot().await
                };
                if asked.is_err() {
                    return;
                }
                let mut metrics = raft.metrics();
                let moved = tokio::time::timeout(wait, async {
                    while log.shard().offsets().base <= target {
                        if metrics.changed().await.is_err() {
                            return false;
                        }
                    }
                    true
                })
                .await;
                if moved == Ok(false) {
                    return;
                }
                if wanted.has_changed().unwrap_or(true) {
                    break;
                }
                wait = (wait * 2).min(LONGEST_WAIT);
            }
            if log.shard().offsets().base > target {
                tracing::info!(node, shard = %shard, start, "log start moved: snapshot taken and log purged");
            }
        }
        if wanted.changed().await.is_err() {
            return;
        }
    }
}

/// Every `retention.interval`, proposes for each group this node leads the
/// log start its limits leave (whole sealed segments, as a local shard's
/// retention deletes them), when that is past the current start. Ends when
/// `stop` turns true; does nothing without an interval.
pub(crate) async fn retain(
    shared: Arc<Shared>,
    retention: Retention,
    mut stop: watch::Receiver<bool>,
) {
    let Some(every) = retention.interval else {
        return;
    };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            changed = stop.changed() => if changed.is_err() { return },
            _ = tick.tick() => {}
        }
        if *stop.borrow() {
            return;
        }
        for (key, group) in shared.all_groups() {
            if group.raft.metrics().borrow_watched().current_leader != Some(shared.id) {
                continue;
            }
            let shard = group.log.shard();
            let start = match shard.retention_start(&retention) {
                Ok(start) => start,
                Err(e) => {
                    tracing::warn!(node = shared.id, shard = %key, error = %e, "retention: where the log would begin is unknown");
                    continue;
                }
            };
            // Never past what is committed, and only forward.
            let start = start.min(group.machine.committed());
            if start <= shard.offsets().base || start <= group.machine.start() {
                continue;
            }
            group.stir().await;
            // Bounded: a leader cut off from its majority commits nothing,
            // and must not hold up the other groups' retention.
            let write = group.raft.client_write(Request::LogStart { start });
            match tokio::time::timeout(every, write).await {
                Ok(Ok(_)) => {
                    tracing::info!(node = shared.id, shard = %key, start, "retention: log start moved");
                }
                Ok(Err(e)) => {
                    tracing::warn!(node = shared.id, shard = %key, start, error = %e, "retention: log start not moved");
                }
                Err(_) => {
                    tracing::warn!(node = shared.id, shard = %key, start, "retention: log start not committed within {every:?}");
                }
            }
        }
    }
}
