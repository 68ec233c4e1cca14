//! openraft's network for one group, over the node's one connection per
//! peer: every group's messages to a node share its [`Peer`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use felix_raft::{EntryData, TypeConfig, Vote};
use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, EntryPayload};

use crate::peer::{CallError, Peer};
use crate::state_machine::Snapshot;
use crate::tls::ClientTls;
use crate::wire::{MAX_FRAME, RaftRequest, RaftResponse, Request, Response, ShardName};

/// The node's connections, one per peer address, shared by every group.
#[derive(Debug)]
pub(crate) struct Peers {
    me: u64,
    tls: Option<ClientTls>,
    by_addr: Mutex<HashMap<String, Peer>>,
}

impl Peers {
    pub(crate) fn new(me: u64, tls: Option<ClientTls>) -> Arc<Self> {
        Arc::new(Self {
            me,
            tls,
            by_addr: Mutex::default(),
        })
    }

    /// The connection to `addr`, made on first use.
    pub(crate) fn get(&self, addr: &str) -> Peer {
        let mut map = self.by_addr.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(addr.to_owned())
            .or_insert_with(|| Peer::new(addr, Some(self.me), self.tls.clone()))
            .clone()
    }

    /// How many peer connections this node keeps.
    pub(crate) fn count(&self) -> usize {
        self.by_addr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// The bytes of entries one AppendEntries carries at most (half a frame:
/// room for the envelope and the encoding's overhead).
const APPEND_BUDGET: usize = MAX_FRAME / 2;

/// An entry's size on the wire, near enough: its payload and a margin.
fn wire_size(entry: &felix_raft::Entry) -> usize {
    match &entry.payload {
        EntryPayload::Normal(request) => request.payload().len().saturating_add(64),
        EntryPayload::Membership(_) => 4096,
        EntryPayload::Blank => 64,
    }
}

/// How many of `entries`, from the first, fit in [`APPEND_BUDGET`]: at
/// least one (a record is never larger than a frame allows).
fn fitting_prefix(entries: &[felix_raft::Entry]) -> usize {
    let mut total = 0usize;
    for (i, entry) in entries.iter().enumerate() {
        total = total.saturating_add(wire_size(entry));
        if total > APPEND_BUDGET && i > 0 {
            return i;
        }
    }
    entries.len()
}

/// The network of one group.
pub(crate) struct GroupNetwork {
    pub(crate) peers: Arc<Peers>,
    pub(crate) shard: ShardName,
}

/// One group's messages to one node.
pub(crate) struct GroupConn {
    peer: Peer,
    shard: ShardName,
}

impl RaftNetworkFactory<TypeConfig> for GroupNetwork {
    type Network = GroupConn;

    async fn new_client(&mut self, _target: u64, node: &BasicNode) -> GroupConn {
        GroupConn {
            peer: self.peers.get(&node.addr),
            shard: self.shard.clone(),
        }
    }
}

/// A failed call: openraft backs off an unreachable node, and retries a
/// timed out one.
fn call_error(e: CallError) -> RPCError<TypeConfig> {
    match e {
        CallError::Unreachable { .. } => RPCError::Unreachable(Unreachable::new(&e)),
        _ => RPCError::Network(NetworkError::new(&e)),
    }
}

/// An answer of the wrong kind, or a node refusing the group.
fn unexpected(r: &impl std::fmt::Debug) -> NetworkError<TypeConfig> {
    NetworkError::new(&std::io::Error::other(format!("unexpected answer {r:?}")))
}

/// The node answered that it is stopping (its `Raft` ended with its fatal
/// error): as good as down.
fn stopped(e: &(impl std::error::Error + 'static)) -> Unreachable<TypeConfig> {
    Unreachable::new(e)
}

impl GroupConn {
    async fn call(
        &self,
        rpc: RaftRequest,
        timeout: Duration,
    ) -> Result<RaftResponse, RPCError<TypeConfig>> {
        let request = Request::Raft {
            shard: self.shard.clone(),
            rpc,
        };
        match self.peer.call(request, timeout).await.map_err(call_error)? {
            Response::Raft(r) => Ok(r),
            other => Err(RPCError::Network(unexpected(&other))),
        }
    }
}

impl RaftNetworkV2<TypeConfig> for GroupConn {
    type SnapshotData = std::io::Cursor<Vec<u8>>;

    async fn append_entries(
        &mut self,
        mut rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        // openraft bounds a batch by entries, not bytes: send the prefix
        // that fits a frame, and report that prefix as what was accepted.
        let fits = fitting_prefix(&rpc.entries);
        let cut = (fits < rpc.entries.len()).then(|| {
            rpc.entries.truncate(fits);
            rpc.entries.last().map(|e| e.log_id)
        });
        match self
            .call(RaftRequest::Append(rpc), option.hard_ttl())
            .await?
        {
            RaftResponse::Append(Ok(AppendEntriesResponse::Success)) if cut.is_some() => {
                Ok(AppendEntriesResponse::PartialSuccess(cut.flatten()))
            }
            RaftResponse::Append(r) => r.map_err(|e| RPCError::Unreachable(stopped(&e))),
            other => Err(RPCError::Network(unexpected(&other))),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        match self.call(RaftRequest::Vote(rpc), option.hard_ttl()).await? {
            RaftResponse::Vote(r) => r.map_err(|e| RPCError::Unreachable(stopped(&e))),
            other => Err(RPCError::Network(unexpected(&other))),
        }
    }

    /// Sent for real (openraft's default grants it unasked, which makes
    /// Pre-Vote a no-op): a follower whose log is behind then learns it
    /// cannot win without moving anyone's term, so the up-to-date follower
    /// is not made to wait out a new lease before it stands.
    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        match self
            .call(RaftRequest::PreVote(rpc), option.hard_ttl())
            .await?
        {
            RaftResponse::PreVote(r) => r.map_err(|e| RPCError::Unreachable(stopped(&e))),
            other => Err(RPCError::Network(unexpected(&other))),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        _cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let rpc = RaftRequest::Snapshot {
            vote,
            meta: snapshot.meta,
        };
        let answer = self
            .call(rpc, option.hard_ttl())
            .await
            .map_err(StreamingError::from)?;
        match answer {
            RaftResponse::Snapshot(r) => r.map_err(|e| StreamingError::Unreachable(stopped(&e))),
            other => Err(StreamingError::Network(unexpected(&other))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal(index: u64, len: usize) -> felix_raft::Entry {
        openraft::Entry {
            log_id: felix_raft::LogId::new(
                openraft::vote::leader_id_std::CommittedLeaderId::new(1),
                index,
            ),
            payload: EntryPayload::Normal(felix_raft::Request::at(0, vec![0u8; len])),
        }
    }

    #[test]
    fn a_batch_over_half_a_frame_is_cut_where_the_next_entry_would_pass_it() {
        let quarter = APPEND_BUDGET / 4;
        let entries: Vec<_> = (0..10).map(|i| normal(i, quarter)).collect();
        // Each entry is a quarter plus its margin: three fit, four do not.
        assert_eq!(fitting_prefix(&entries), 3);
        assert_eq!(fitting_prefix(&entries[..2]), 2);
        // One entry alone always goes, whatever its size.
        assert_eq!(fitting_prefix(&[normal(0, APPEND_BUDGET * 2)]), 1);
        assert_eq!(fitting_prefix(&[]), 0);
    }
}
