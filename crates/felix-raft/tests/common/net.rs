//! An in-process network: RPCs call the target's `Raft` directly; a node
//! missing from the router is down (unreachable).

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};

use felix_raft::TypeConfig;
use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed,
    StreamingError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::storage::Snapshot;
use openraft::{BasicNode, Raft, Vote};

type Rpc<T, E = RaftError<u64>> = Result<T, RPCError<u64, BasicNode, E>>;

#[derive(Clone, Default)]
pub struct Router {
    nodes: Arc<Mutex<BTreeMap<u64, Raft<TypeConfig>>>>,
}

impl Router {
    pub fn add(&self, id: u64, raft: Raft<TypeConfig>) {
        self.nodes.lock().unwrap().insert(id, raft);
    }

    pub fn remove(&self, id: u64) -> Option<Raft<TypeConfig>> {
        self.nodes.lock().unwrap().remove(&id)
    }

    pub fn get(&self, id: u64) -> Option<Raft<TypeConfig>> {
        self.nodes.lock().unwrap().get(&id).cloned()
    }
}

fn down() -> Unreachable {
    Unreachable::new(&io::Error::new(io::ErrorKind::NotConnected, "node down"))
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

impl RaftNetwork<TypeConfig> for Conn {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<AppendEntriesResponse<u64>> {
        let raft = self.router.get(self.target).ok_or_else(down)?;
        raft.append_entries(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>> {
        let raft = self.router.get(self.target).ok_or_else(down)?;
        raft.install_snapshot(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn vote(&mut self, rpc: VoteRequest<u64>, _option: RPCOption) -> Rpc<VoteResponse<u64>> {
        let raft = self.router.get(self.target).ok_or_else(down)?;
        raft.vote(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote<u64>,
        snapshot: Snapshot<TypeConfig>,
        _cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<u64>, StreamingError<TypeConfig, Fatal<u64>>> {
        let raft = self
            .router
            .get(self.target)
            .ok_or_else(|| StreamingError::Unreachable(down()))?;
        raft.install_full_snapshot(vote, snapshot)
            .await
            .map_err(|e| StreamingError::RemoteError(RemoteError::new(self.target, e)))
    }
}

#[allow(dead_code)]
fn _unused(e: &io::Error) -> NetworkError {
    NetworkError::new(e)
}
