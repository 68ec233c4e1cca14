//! openraft's network for one group, over the node's one connection per
//! peer: every group's messages to a node share its [`Peer`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use felix_raft::{TypeConfig, Vote};
use openraft::BasicNode;
use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};

use crate::peer::{CallError, Peer};
use crate::state_machine::Snapshot;
use crate::tls::ClientTls;
use crate::wire::{RaftRequest, RaftResponse, Request, Response, ShardName};

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
        CallError::Lost { .. } | CallError::Timeout { .. } => {
            RPCError::Network(NetworkError::new(&e))
        }
    }
}

/// An answer of the wrong kind, or a node refusing the group.
fn unexpected(r: &Response) -> NetworkError<TypeConfig> {
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
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        match self
            .call(RaftRequest::Append(rpc), option.hard_ttl())
            .await?
        {
            RaftResponse::Append(r) => r.map_err(|e| RPCError::Unreachable(stopped(&e))),
            other => Err(RPCError::Network(NetworkError::new(
                &std::io::Error::other(format!("unexpected answer {other:?}")),
            ))),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        match self.call(RaftRequest::Vote(rpc), option.hard_ttl()).await? {
            RaftResponse::Vote(r) => r.map_err(|e| RPCError::Unreachable(stopped(&e))),
            other => Err(RPCError::Network(NetworkError::new(
                &std::io::Error::other(format!("unexpected answer {other:?}")),
            ))),
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
            other => Err(StreamingError::Network(NetworkError::new(
                &std::io::Error::other(format!("unexpected answer {other:?}")),
            ))),
        }
    }
}
