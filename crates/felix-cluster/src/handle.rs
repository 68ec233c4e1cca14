//! What a node does with each request.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use felix_storage::ShardKey;
use openraft::BasicNode;
use openraft::error::{InitializeError, RaftError};
use openraft::raft::AppendEntriesResponse;
use openraft::rt::watch::WatchReceiver;

use crate::ReplicatedShard;
use crate::error::NodeError;
use crate::node::{Group, Shared};
use crate::state_machine::Snapshot;
use crate::wire::{
    PROTOCOL_VERSION, RaftRequest, RaftResponse, RemoteError, Request, Response, ShardName,
    SnapshotDefect,
};

/// The answer to `request`.
pub(crate) async fn handle(shared: &Arc<Shared>, request: Request) -> Response {
    let answer = match request {
        Request::Hello { protocol, node } => hello(shared, protocol, node),
        Request::Raft { shard, rpc } => raft(shared, &shard, rpc).await,
        Request::OpenGroup {
            shard,
            members,
            initialize,
        } => open_group(shared, &shard, members, initialize).await,
        Request::CreateShard { shard, replicas } => create_shard(shard, replicas, shared).await,
        Request::AddNode { shard, node, addr } => add_node(shared, &shard, node, addr).await,
        Request::RemoveNode { shard, node } => remove_node(shared, &shard, node).await,
        Request::Append { shard, records } => append(shared, &shard, records).await,
        Request::Read {
            shard,
            from,
            max_bytes,
            wait_ms,
        } => read(shared, &shard, from, max_bytes, wait_ms).await,
        Request::OffsetForTimestamp {
            shard,
            timestamp_micros,
        } => offset_for_timestamp(shared, &shard, timestamp_micros).await,
        Request::Status => Ok(Response::Status(crate::status::node_status(shared).await)),
        Request::Ping => Ok(Response::Pong {
            run: shared.run,
            stops: shared.stops.load(std::sync::atomic::Ordering::Acquire),
        }),
        Request::Quiesce {
            shard,
            term,
            leader,
            applied,
        } => quiesce(shared, &shard, term, leader, applied),
        Request::DeleteRecords { shard, offset } => delete_records(shared, &shard, offset).await,
    };
    answer.unwrap_or_else(Response::Error)
}

type Answer = Result<Response, RemoteError>;

/// The most a read answers with, whatever it asks: a quarter of a frame.
pub const MAX_READ_BYTES: u64 = (crate::wire::MAX_FRAME / 4) as u64;
/// The longest a read waits for a record, whatever it asks (a client
/// following the tail asks again).
pub const MAX_READ_WAIT: Duration = Duration::from_secs(30);

/// A greeting the connection let through (its version is this node's:
/// `server.rs` refuses another before it greets anything).
fn hello(shared: &Shared, protocol: u32, node: Option<u64>) -> Answer {
    debug_assert_eq!(
        protocol, PROTOCOL_VERSION,
        "the server refuses other versions"
    );
    tracing::debug!(node = shared.id, from = ?node, "greeted");
    Ok(Response::Hello { node: shared.id })
}

fn shard_text(shard: &ShardName) -> String {
    ShardKey::from(shard).to_string()
}

fn stopped(shared: &Shared, shard: &ShardName, reason: impl std::fmt::Display) -> RemoteError {
    RemoteError::Stopped {
        node: shared.id,
        shard: shard_text(shard),
        reason: reason.to_string(),
    }
}

/// The group, opened if this node does not host it yet: a Raft message
/// for an unknown group is how a node added to a shard learns of it.
async fn opened(shared: &Shared, shard: &ShardName) -> Result<Group, RemoteError> {
    shared
        .group(&ShardKey::from(shard))
        .await
        .map_err(|e| match e {
            // Another node may serve it: a client tries the next.
            NodeError::Stopping { node } => RemoteError::Stopped {
                node,
                shard: shard_text(shard),
                reason: "the node is shutting down".to_owned(),
            },
            e => RemoteError::Storage {
                node: shared.id,
                message: e.to_string(),
            },
        })
}

/// The replica, only if this node hosts it.
async fn hosted(shared: &Arc<Shared>, shard: &ShardName) -> Result<ReplicatedShard, RemoteError> {
    let key = ShardKey::from(shard);
    match shared.hosted(&key) {
        Some(group) => Ok(ReplicatedShard::new(key, group, Arc::clone(shared))),
        None => Err(RemoteError::UnknownShard {
            node: shared.id,
            shard: shard_text(shard),
        }),
    }
}

/// A quiet group's follower agrees to stop its timers, or refuses and
/// says why.
fn quiesce(
    shared: &Shared,
    shard: &ShardName,
    term: u64,
    leader: u64,
    applied: Option<u64>,
) -> Answer {
    let group = shared
        .hosted(&ShardKey::from(shard))
        .ok_or_else(|| RemoteError::UnknownShard {
            node: shared.id,
            shard: shard_text(shard),
        })?;
    match crate::quiesce::quiesce(&group, term, leader, applied) {
        Ok(()) => Ok(Response::Done),
        Err(refusal) => Err(RemoteError::StaysAwake {
            node: shared.id,
            shard: shard_text(shard),
            refusal,
        }),
    }
}

async fn raft(shared: &Shared, shard: &ShardName, rpc: RaftRequest) -> Answer {
    let group = opened(shared, shard).await?;
    // Entries, a vote or a snapshot wake a quiet group, once openraft has
    // taken them (an AppendEntries renews the leader's lease first, so the
    // group does not stand for election at its first tick). A heartbeat
    // does not: one sent just before the leader went quiet may arrive after
    // the follower did, and a follower awake under a quiet leader would
    // stand for election. A follower asleep under an awake leader loses
    // nothing: it takes every entry, and its node's pings notice the
    // leader gone (`quiesce.rs`).
    let answer = match rpc {
        RaftRequest::Append(rpc) => {
            let written = !rpc.entries.is_empty();
            let answer = group.raft.append_entries(rpc).await;
            // Only entries of the leader this replica follows (taken, or
            // in conflict with its log), not a deposed leader's.
            if written
                && matches!(
                    answer,
                    Ok(AppendEntriesResponse::Success
                        | AppendEntriesResponse::PartialSuccess(_)
                        | AppendEntriesResponse::Conflict)
                )
            {
                group.wake();
            }
            RaftResponse::Append(answer)
        }
        // A vote does not wake a quiet group: answering needs no timer, and
        // a woken follower whose lease ran out long ago would stand at its
        // next tick. An election that ends in a leader wakes every replica
        // with the leader's first entry.
        RaftRequest::Vote(rpc) => RaftResponse::Vote(group.raft.vote(rpc).await),
        // Changes nothing here, so wakes nothing either.
        RaftRequest::PreVote(rpc) => RaftResponse::PreVote(group.raft.pre_vote(rpc).await),
        RaftRequest::Snapshot { vote, meta } => {
            // openraft stops the group (an assertion in its core) on a
            // snapshot no protocol-following leader sends: refused here.
            if let Some(defect) = impossible_snapshot(shared, &group, &vote, &meta) {
                tracing::warn!(node = shared.id, shard = %shard_text(shard), %defect, "refusing a snapshot");
                return Err(RemoteError::ImpossibleSnapshot {
                    node: shared.id,
                    shard: shard_text(shard),
                    defect,
                });
            }
            tracing::info!(node = shared.id, shard = %shard_text(shard), last = ?meta.last_log_id, "installing the leader's snapshot");
            let snapshot = Snapshot {
                meta,
                snapshot: Cursor::new(Vec::new()),
            };
            let answer = group.raft.install_full_snapshot(vote, snapshot).await;
            group.wake();
            RaftResponse::Snapshot(answer)
        }
    };
    Ok(Response::Raft(answer))
}

/// Why a snapshot sent with `vote` cannot be a leader's, if it cannot.
/// openraft asserts each of these (some in debug builds only) and stops
/// the group; a peer left from an earlier cluster with the same node ids
/// could send any of them. The entry committed here is read from the
/// metrics, which may trail the core by a moment: a snapshot racing new
/// commits can still reach openraft's own check.
fn impossible_snapshot(
    shared: &Shared,
    group: &Group,
    vote: &felix_raft::Vote,
    meta: &openraft::alias::SnapshotMetaOf<felix_raft::TypeConfig>,
) -> Option<SnapshotDefect> {
    let (vote_term, vote_node) = (vote.leader_id().term, vote.leader_id().voted_for);
    if !vote.is_committed() {
        return Some(SnapshotDefect::VoteNotCommitted {
            vote_term,
            vote_node,
        });
    }
    if vote_node == shared.id {
        return Some(SnapshotDefect::VoteForThisNode { vote_term });
    }
    let last = meta.last_log_id?;
    let (index, term) = (last.index, *last.leader_id);
    if term > vote_term {
        return Some(SnapshotDefect::LaterTerm {
            index,
            term,
            vote_term,
        });
    }
    let metrics = group.raft.metrics();
    let committed = metrics.borrow_watched().local_committed;
    match committed {
        Some(committed) if last > committed && index <= committed.index => {
            Some(SnapshotDefect::ContradictsCommitted {
                index,
                term,
                committed_index: committed.index,
                committed_term: *committed.leader_id,
            })
        }
        _ => None,
    }
}

async fn open_group(
    shared: &Shared,
    shard: &ShardName,
    members: BTreeMap<u64, String>,
    initialize: bool,
) -> Answer {
    for (node, addr) in &members {
        shared.learn(*node, addr);
    }
    let group = opened(shared, shard).await?;
    if initialize {
        let nodes: BTreeMap<u64, BasicNode> = members
            .into_iter()
            .map(|(id, addr)| (id, BasicNode { addr }))
            .collect();
        match group.raft.initialize(nodes.clone()).await {
            Ok(()) => {
                tracing::info!(node = shared.id, shard = %shard_text(shard), "group initialized");
            }
            // Initialized before (a repeated create, or a restart):
            // harmless when it has these voters, refused when not.
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {
                let m = group.raft.metrics().borrow_watched().clone();
                let voters: BTreeSet<u64> = m.membership_config.membership().voter_ids().collect();
                let asked: BTreeSet<u64> = nodes.keys().copied().collect();
                if voters != asked {
                    return Err(RemoteError::Invalid {
                        node: shared.id,
                        reason: format!(
                            "shard {} exists with voters {voters:?}, not {asked:?}",
                            shard_text(shard)
                        ),
                    });
                }
            }
            Err(e) => return Err(stopped(shared, shard, e)),
        }
    }
    Ok(Response::Done)
}

async fn create_shard(shard: ShardName, replicas: Vec<u64>, shared: &Arc<Shared>) -> Answer {
    let distinct: BTreeSet<u64> = replicas.iter().copied().collect();
    if distinct.is_empty() || distinct.len() != replicas.len() || distinct.contains(&0) {
        return Err(RemoteError::Invalid {
            node: shared.id,
            reason: format!("replicas {replicas:?}: distinct non-zero node ids are needed"),
        });
    }
    let mut members = BTreeMap::new();
    for &node in &distinct {
        let addr = shared.address_of(node).ok_or(RemoteError::UnknownNode {
            node: shared.id,
            unknown: node,
        })?;
        members.insert(node, addr);
    }
    // Every replica hosts the group first, then one starts it, and leads
    // it at first: chosen by the key's hash, so a node's shards spread
    // their leaders over their replicas.
    let key = ShardKey::from(&shard);
    let pick = usize::try_from(key.hash() % distinct.len() as u64).unwrap_or(0);
    let first = distinct.iter().nth(pick).copied().unwrap_or(shared.id);
    for (&node, addr) in members.iter().rev() {
        let request = Request::OpenGroup {
            shard: shard.clone(),
            members: members.clone(),
            initialize: node == first,
        };
        let answer = if node == shared.id {
            Box::pin(handle(shared, request)).await
        } else {
            shared
                .peers
                .get(addr)
                .call(request, shared.call_timeout())
                .await
                .map_err(|e| stopped(shared, &shard, e))?
        };
        match answer {
            Response::Done => {}
            Response::Error(e) => return Err(e),
            other => return Err(stopped(shared, &shard, format!("unexpected {other:?}"))),
        }
    }
    Ok(Response::Done)
}

async fn add_node(shared: &Arc<Shared>, shard: &ShardName, node: u64, addr: String) -> Answer {
    let replica = hosted(shared, shard).await?;
    replica
        .add_node(node, addr)
        .await
        .map_err(|e| e.to_remote(shared.id))?;
    Ok(Response::Done)
}

async fn remove_node(shared: &Arc<Shared>, shard: &ShardName, node: u64) -> Answer {
    let replica = hosted(shared, shard).await?;
    replica
        .remove_node(node)
        .await
        .map_err(|e| e.to_remote(shared.id))?;
    Ok(Response::Done)
}

async fn delete_records(shared: &Arc<Shared>, shard: &ShardName, offset: u64) -> Answer {
    let replica = hosted(shared, shard).await?;
    let start = replica
        .delete_records_before(offset)
        .await
        .map_err(|e| e.to_remote(shared.id))?;
    Ok(Response::Start(start))
}

async fn append(shared: &Arc<Shared>, shard: &ShardName, records: Vec<Vec<u8>>) -> Answer {
    let replica = hosted(shared, shard).await?;
    let offsets = replica
        .append(records)
        .await
        .map_err(|e| e.to_remote(shared.id))?;
    Ok(Response::Appended(offsets))
}

async fn read(
    shared: &Arc<Shared>,
    shard: &ShardName,
    from: u64,
    max_bytes: u64,
    wait_ms: u32,
) -> Answer {
    let replica = hosted(shared, shard).await?;
    if wait_ms > 0 {
        let wait = Duration::from_millis(u64::from(wait_ms)).min(MAX_READ_WAIT);
        replica.wait_readable(from, wait).await;
    }
    let batch = replica
        .read(from, max_bytes.min(MAX_READ_BYTES))
        .map_err(|e| e.to_remote(shared.id))?;
    let (runs, next, offsets) = batch.into_wire();
    Ok(Response::Records {
        runs,
        next,
        offsets,
    })
}

async fn offset_for_timestamp(
    shared: &Arc<Shared>,
    shard: &ShardName,
    timestamp_micros: u64,
) -> Answer {
    let replica = hosted(shared, shard).await?;
    let offset = replica
        .offset_for_timestamp(timestamp_micros)
        .map_err(|e| e.to_remote(shared.id))?;
    Ok(Response::Offset(offset))
}
