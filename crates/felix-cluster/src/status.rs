//! What a node says about its groups: the status answer, and log lines
//! when a group's leader, term, role or membership changes.

use felix_raft::TypeConfig;
use openraft::ServerState;
use openraft::metrics::RaftMetrics;
use openraft::rt::watch::WatchReceiver;

use crate::node::{GroupRaft, Shared};
use crate::wire::{GroupStatus, NodeStatus, ShardName, ShardOffsets};

fn role(metrics: &RaftMetrics<TypeConfig>) -> String {
    if let Err(fatal) = &metrics.running_state {
        return format!("stopped: {fatal}");
    }
    match metrics.state {
        ServerState::Leader => "leader",
        ServerState::Follower => "follower",
        ServerState::Candidate => "candidate",
        ServerState::Learner => "learner",
        ServerState::Shutdown => "shutdown",
    }
    .to_owned()
}

/// Every hosted group's status.
pub(crate) async fn node_status(shared: &Shared) -> NodeStatus {
    let mut groups = Vec::new();
    for (key, group) in shared.all_groups() {
        let metrics = group.raft.metrics().borrow_watched().clone();
        let last = metrics.last_log_index.unwrap_or(0);
        let lag = metrics
            .replication
            .as_ref()
            .map(|replication| {
                replication
                    .iter()
                    .filter(|(id, _)| **id != shared.id)
                    .map(|(id, matched)| {
                        let behind = match matched {
                            Some(m) => last.saturating_sub(m.index),
                            None => last.saturating_add(1),
                        };
                        (*id, behind)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let membership = metrics.membership_config.membership();
        let offsets = group.log.shard().offsets();
        groups.push(GroupStatus {
            shard: ShardName::from(&key),
            role: role(&metrics),
            leader: metrics.current_leader,
            term: metrics.current_term,
            commit_index: metrics
                .cluster_committed
                .or(metrics.local_committed)
                .map(|id| id.index),
            last_applied: metrics.last_applied.map(|id| id.index),
            offsets: ShardOffsets {
                base: offsets.base,
                committed: group.machine.committed(),
                written: offsets.written,
            },
            lag,
            voters: membership.voter_ids().collect(),
            learners: membership.learner_ids().collect(),
            quiet: group.is_quiet(),
        });
    }
    for (key, why) in shared.unopened() {
        groups.push(GroupStatus {
            shard: ShardName::from(&key),
            role: format!("stopped: did not open: {why}"),
            leader: None,
            term: 0,
            commit_index: None,
            last_applied: None,
            offsets: ShardOffsets::default(),
            lag: Default::default(),
            voters: Vec::new(),
            learners: Vec::new(),
            quiet: false,
        });
    }
    NodeStatus {
        node: shared.id,
        peer_connections: u64::try_from(shared.peers.count()).unwrap_or(u64::MAX),
        inbound_connections: shared.inbound.load(std::sync::atomic::Ordering::Relaxed),
        inbound_bytes_peak: shared
            .inbound_bytes_peak
            .load(std::sync::atomic::Ordering::Relaxed),
        groups,
    }
}

/// Records one group's figures through the `metrics` facade (nothing
/// happens without an installed recorder). Every name is in the crate
/// docs' "Metrics" section.
fn record(node: u64, shard: &str, m: &RaftMetrics<TypeConfig>) {
    let labels = [("node", node.to_string()), ("shard", shard.to_owned())];
    let index = |id: Option<&felix_raft::LogId>| id.map_or(0.0, |id| id.index as f64);
    metrics::gauge!("felix_cluster_term", &labels).set(m.current_term as f64);
    metrics::gauge!("felix_cluster_commit_index", &labels).set(index(
        m.cluster_committed.as_ref().or(m.local_committed.as_ref()),
    ));
    metrics::gauge!("felix_cluster_last_applied", &labels).set(index(m.last_applied.as_ref()));
    metrics::gauge!("felix_cluster_is_leader", &labels).set(if m.current_leader == Some(node) {
        1.0
    } else {
        0.0
    });
    if let Some(replication) = &m.replication {
        let last = m.last_log_index.unwrap_or(0);
        for (follower, matched) in replication.iter().filter(|(id, _)| **id != node) {
            let behind = matched
                .as_ref()
                .map_or(last.saturating_add(1), |m| last.saturating_sub(m.index));
            metrics::gauge!(
                "felix_cluster_follower_lag",
                "node" => node.to_string(),
                "shard" => shard.to_owned(),
                "follower" => follower.to_string()
            )
            .set(behind as f64);
        }
    }
}

/// How often a group's figures are recorded: on a timer rather than on
/// every change, which would wake each group on every heartbeat.
const RECORD_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

fn role_name(state: ServerState) -> &'static str {
    match state {
        ServerState::Leader => "leader",
        ServerState::Follower => "follower",
        ServerState::Candidate => "candidate",
        ServerState::Learner => "learner",
        ServerState::Shutdown => "shutdown",
    }
}

/// Logs a group's elections, leader changes, membership changes and its
/// stop, and records its figures, until the group ends.
///
/// Changes come from openraft's server metrics, which move with
/// elections and membership, not with each heartbeat or entry; the
/// figures are recorded every [`RECORD_INTERVAL`].
pub(crate) async fn watch_group(
    node: u64,
    shard: String,
    raft: GroupRaft,
    stops: std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    let mut server = raft.server_metrics();
    let mut tick = tokio::time::interval(RECORD_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut seen = (None, 0u64, ServerState::Learner, None);
    let mut stopped = false;
    loop {
        tokio::select! {
            changed = server.changed() => {
                if changed.is_err() {
                    return;
                }
                let m = server.borrow_and_update();
                let now = (
                    m.current_leader,
                    m.vote.leader_id.term,
                    m.state,
                    m.membership_config.log_id().map(|id| id.index),
                );
                // A new term in which this node voted for itself: it stood
                // (seen however the states between were coalesced).
                if now.1 != seen.1 && m.vote.leader_id.voted_for == node {
                    metrics::counter!(
                        "felix_cluster_elections_total",
                        "node" => node.to_string(),
                        "shard" => shard.clone()
                    )
                    .increment(1);
                }
                if now.1 != seen.1 || now.0 != seen.0 {
                    tracing::info!(node, shard = %shard, term = now.1, leader = ?now.0, role = role_name(now.2), "leader changed");
                } else if now.2 != seen.2 {
                    tracing::info!(node, shard = %shard, term = now.1, role = role_name(now.2), "role changed");
                }
                if now.3 != seen.3 {
                    let members = m.membership_config.membership();
                    tracing::info!(
                        node,
                        shard = %shard,
                        voters = ?members.voter_ids().collect::<Vec<_>>(),
                        learners = ?members.learner_ids().collect::<Vec<_>>(),
                        "membership changed"
                    );
                }
                seen = now;
            }
            _ = tick.tick() => {
                let m = raft.metrics().borrow_watched().clone();
                record(node, &shard, &m);
                if let (Err(fatal), false) = (&m.running_state, stopped) {
                    tracing::error!(node, shard = %shard, error = %fatal, "group stopped");
                    stopped = true;
                    stops.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                }
            }
        }
    }
}
