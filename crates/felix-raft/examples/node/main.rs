//! One Raft node over loopback TCP, its log in a felix shard.
//!
//! ```text
//! cargo run -p felix-raft --example node -- --id 1 --dir /tmp/n1 \
//!     --peer 1=127.0.0.1:7101 --peer 2=127.0.0.1:7102 --peer 3=127.0.0.1:7103 --init
//! ```
//!
//! Each node listens on its own `--peer` address (127.0.0.1 only); `--init`
//! makes the node initialize a fresh cluster of every peer. Clients send
//! `Write` and `Applied` requests (see `proto.rs`); the same binary is a
//! client too:
//!
//! ```text
//! cargo run -p felix-raft --example node -- write 127.0.0.1:7101 hello
//! cargo run -p felix-raft --example node -- applied 127.0.0.1:7102
//! ```

mod proto;
#[path = "../../tests/common/sm.rs"]
#[allow(dead_code, unreachable_pub)]
mod sm;

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use felix_raft::{FelixLogStore, TypeConfig, Vote};
use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Config, Raft};
use proto::{Request, Response};
use sm::Snapshot;
use tokio::net::{TcpListener, TcpStream};

type Rpc<T> = Result<T, RPCError<TypeConfig>>;

struct Net;

struct Conn {
    addr: String,
}

impl RaftNetworkFactory<TypeConfig> for Net {
    type Network = Conn;

    async fn new_client(&mut self, _target: u64, node: &BasicNode) -> Conn {
        Conn {
            addr: node.addr.clone(),
        }
    }
}

impl Conn {
    async fn call(&self, request: Request) -> Result<Response, io::Error> {
        proto::call(&self.addr, &request).await
    }
}

/// The peer could not be reached, or answered that it is stopping (its
/// `Raft` failed with its fatal error): as good as down.
fn unreachable(e: &(impl std::error::Error + 'static)) -> Unreachable<TypeConfig> {
    Unreachable::new(e)
}

fn unexpected(r: &Response) -> NetworkError<TypeConfig> {
    NetworkError::new(&io::Error::other(format!("unexpected response {r:?}")))
}

impl RaftNetworkV2<TypeConfig> for Conn {
    type SnapshotData = io::Cursor<Vec<u8>>;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<AppendEntriesResponse<TypeConfig>> {
        match self.call(Request::Append(rpc)).await {
            Ok(Response::Append(r)) => r.map_err(|e| RPCError::Unreachable(unreachable(&e))),
            Ok(other) => Err(RPCError::Network(unexpected(&other))),
            Err(e) => Err(RPCError::Unreachable(unreachable(&e))),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<VoteResponse<TypeConfig>> {
        match self.call(Request::Vote(rpc)).await {
            Ok(Response::Vote(r)) => r.map_err(|e| RPCError::Unreachable(unreachable(&e))),
            Ok(other) => Err(RPCError::Network(unexpected(&other))),
            Err(e) => Err(RPCError::Unreachable(unreachable(&e))),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        _cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let request = Request::Snapshot {
            vote,
            meta: snapshot.meta,
            data: snapshot.snapshot.into_inner(),
        };
        match self.call(request).await {
            Ok(Response::Snapshot(r)) => {
                r.map_err(|e| StreamingError::Unreachable(unreachable(&e)))
            }
            Ok(other) => Err(StreamingError::Network(unexpected(&other))),
            Err(e) => Err(StreamingError::Unreachable(unreachable(&e))),
        }
    }
}

async fn serve(
    raft: Raft<TypeConfig, sm::StateMachine>,
    sm: sm::StateMachine,
    mut stream: TcpStream,
) {
    while let Ok(request) = proto::receive::<Request>(&mut stream).await {
        let response = match request {
            Request::Append(rpc) => Response::Append(raft.append_entries(rpc).await),
            Request::Vote(rpc) => Response::Vote(raft.vote(rpc).await),
            Request::Snapshot { vote, meta, data } => {
                let snapshot = Snapshot {
                    meta,
                    snapshot: io::Cursor::new(data),
                };
                Response::Snapshot(raft.install_full_snapshot(vote, snapshot).await)
            }
            Request::Write(bytes) => Response::Write(
                match raft.client_write(felix_raft::Request::new(bytes)).await {
                    Ok(written) => Ok(written.log_id.index),
                    Err(e) => Err(e.forward_to_leader().and_then(|f| f.leader_id)),
                },
            ),
            Request::Applied => Response::Applied(sm.data().entries),
        };
        if proto::send(&mut stream, &response).await.is_err() {
            return;
        }
    }
}

struct Args {
    id: u64,
    dir: PathBuf,
    peers: BTreeMap<u64, BasicNode>,
    init: bool,
}

fn args() -> Result<Args, String> {
    let mut id = None;
    let mut dir = None;
    let mut peers = BTreeMap::new();
    let mut init = false;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--id" => id = it.next().and_then(|v| v.parse().ok()),
            "--dir" => dir = it.next().map(PathBuf::from),
            "--peer" => {
                let peer = it.next().ok_or("--peer needs ID=127.0.0.1:PORT")?;
                let (pid, addr) = peer
                    .split_once('=')
                    .ok_or("--peer needs ID=127.0.0.1:PORT")?;
                if !addr.starts_with("127.0.0.1:") {
                    return Err(format!("{addr}: only 127.0.0.1 is served"));
                }
                let pid: u64 = pid.parse().map_err(|_| format!("{pid}: not a node id"))?;
                peers.insert(pid, BasicNode { addr: addr.into() });
            }
            "--init" => init = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Args {
        id: id.ok_or("--id N is needed")?,
        dir: dir.ok_or("--dir DIR is needed")?,
        peers,
        init,
    })
}

/// `write ADDR TEXT` or `applied ADDR`: one client request, its answer
/// printed.
async fn client(
    command: &str,
    addr: &str,
    text: Option<String>,
) -> Result<(), Box<dyn std::error::Error>> {
    let request = match command {
        "write" => Request::Write(text.ok_or("write ADDR TEXT")?.into_bytes()),
        _ => Request::Applied,
    };
    match proto::call(addr, &request).await? {
        Response::Write(Ok(index)) => println!("committed at index {index}"),
        Response::Write(Err(Some(leader))) => println!("not the leader: ask node {leader}"),
        Response::Write(Err(None)) => println!("not the leader, and no leader known"),
        Response::Applied(entries) => {
            for (index, bytes) in entries {
                println!("{index}\t{}", String::from_utf8_lossy(&bytes));
            }
        }
        other => println!("unexpected answer {other:?}"),
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut raw = std::env::args().skip(1);
    if let Some(command) = raw.next().filter(|c| c == "write" || c == "applied") {
        let addr = raw.next().ok_or("a node's address, 127.0.0.1:PORT")?;
        return client(&command, &addr, raw.next()).await;
    }
    let args = args()?;
    let addr = args
        .peers
        .get(&args.id)
        .ok_or("the node's own --peer is needed")?
        .addr
        .clone();
    let config = Arc::new(
        Config {
            heartbeat_interval: 100,
            election_timeout_min: 500,
            election_timeout_max: 1000,
            ..Config::default()
        }
        .validate()?,
    );
    std::fs::create_dir_all(&args.dir)?;
    let log: FelixLogStore<TypeConfig> = FelixLogStore::options(args.dir.join("log")).open()?;
    let sm = sm::StateMachine::persistent(args.dir.join("snapshot"));
    let raft = Raft::new(args.id, config, Net, log, sm.clone()).await?;
    let listener = TcpListener::bind(&addr).await?;
    println!("node {} listening on {addr}", args.id);
    if args.init {
        raft.initialize(args.peers.clone()).await?;
    }
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(serve(raft.clone(), sm.clone(), stream));
    }
}
