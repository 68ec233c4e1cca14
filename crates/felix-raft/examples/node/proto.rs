//! The node example's wire protocol: one request, one response, each a
//! frame of a big-endian `u32` length and a postcard body, over TCP on
//! 127.0.0.1.
#![allow(dead_code, unreachable_pub)]

use felix_raft::{TypeConfig, Vote};
use openraft::alias::SnapshotMetaOf;
use openraft::error::{Fatal, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest frame accepted (a snapshot of the example's state machine
/// fits well within it).
pub const MAX_FRAME: u32 = 256 << 20;

/// What one node asks another, or a client asks a node.
#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    Append(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<TypeConfig>),
    Snapshot {
        vote: Vote,
        meta: SnapshotMetaOf<TypeConfig>,
        data: Vec<u8>,
    },
    /// A client's write: committed through this node if it leads.
    Write(Vec<u8>),
    /// Every normal entry this node's state machine applied.
    Applied,
}

/// The answer to a [`Request`] of the same name.
#[derive(Debug, Serialize, Deserialize)]
pub enum Response {
    Append(Result<AppendEntriesResponse<TypeConfig>, RaftError<TypeConfig>>),
    Vote(Result<VoteResponse<TypeConfig>, RaftError<TypeConfig>>),
    Snapshot(Result<SnapshotResponse<TypeConfig>, Fatal<TypeConfig>>),
    /// The committed entry's index, or the leader to ask instead (if known).
    Write(Result<u64, Option<u64>>),
    Applied(Vec<(u64, Vec<u8>)>),
}

pub async fn send<T: Serialize>(stream: &mut TcpStream, message: &T) -> std::io::Result<()> {
    let body = postcard::to_allocvec(message).map_err(std::io::Error::other)?;
    let len = u32::try_from(body.len()).map_err(std::io::Error::other)?;
    stream.write_u32(len).await?;
    stream.write_all(&body).await?;
    stream.flush().await
}

pub async fn receive<T: for<'de> Deserialize<'de>>(stream: &mut TcpStream) -> std::io::Result<T> {
    let len = stream.read_u32().await?;
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {len} bytes"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    stream.read_exact(&mut body).await?;
    postcard::from_bytes(&body).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// One request on a fresh connection to `addr`.
pub async fn call(addr: &str, request: &Request) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect(addr).await?;
    send(&mut stream, request).await?;
    receive(&mut stream).await
}
