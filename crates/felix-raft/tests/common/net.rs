//! An in-process network: RPCs call the target's `Raft` directly; a node
//! missing from the router is down (unreachable).

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};

use felix_raft::TypeConfig;
use openraft::alias::VoteOf;
use openraft::error::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Raft};

use super::sm::{Snapshot, StateMachine};

pub type Node = Raft<TypeConfig, StateMachine>;

type Rpc<T> = Result<T, RPCError<TypeConfig>>;

#[derive(Clone, Default)]
pub struct Router {
    nodes: Arc<Mutex<BTreeMap<u64, Node>>>,
}

impl Router {
    pub fn add(&self, id: u64, raft: Node) {
        self.nodes.lock().unwrap().insert(id, raft);
    }

    pub fn remove(&self, id: u64) -> Option<Node> {
        self.nodes.lock().unwrap().remove(&id)
    }

    pub fn get(&self, id: u64) -> Option<Node> {
        self.nodes.lock().unwrap().get(&id).cloned()
    }
}

fn down() -> Unreachable<TypeConfig> {
    Unreachable::new(&io::Error::new(io::ErrorKind::NotConnected, "node down"))
}

/// A node whose `Raft` answered with its fatal error (it is stopping) is
/// as good as down.
fn stopped(e: &(impl std::error::Error + 'static)) -> Unreachable<TypeConfig> {
    Unreachable::new(e)
}

pub struct Conn {
    router: Router,
    target: u64,
}

impl RaftNetworkFactory<TypeConfig> for Router {
    type Network = Conn;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> Conn {
        Conn {
            router: self.clone(),
            target,
        }
    }
}

impl RaftNetworkV2<TypeConfig> for Conn {
    type SnapshotData = std::io::Cursor<Vec<u8>>;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<AppendEntriesResponse<TypeConfig>> {
        let raft = self.router.get(self.target).ok_or_else(down)?;
        raft.append_entries(rpc)
            .await
            .map_err(|e| RPCError::Unreachable(stopped(&e)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<VoteResponse<TypeConfig>> {
        let raft = self.router.get(self.target).ok_or_else(down)?;
        raft.vote(rpc)
            .await
            .map_err(|e| RPCError::Unreachable(stopped(&e)))
    }

    async fn full_snapshot(
        &mut self,
        vote: VoteOf<TypeConfig>,
        snapshot: Snapshot,
        _cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let raft = self
            .router
            .get(self.target)
            .ok_or_else(|| StreamingError::Unreachable(down()))?;
        raft.install_full_snapshot(vote, snapshot)
            .await
            .map_err(|e| StreamingError::Unreachable(stopped(&e)))
    }
}
