//! What nodes and clients say to each other, and how it is framed.
//!
//! A connection carries frames one way each: the side that opened it sends
//! [`RequestFrame`]s, the other answers with [`ResponseFrame`]s of the same
//! `id`, in any order (a node answers each request when it is done, so a
//! slow one does not hold up the rest). A frame is a big-endian `u32`
//! length and that many bytes of postcard; a length above [`MAX_FRAME`] is
//! refused from the header alone, before anything is allocated for it.
//! Every group's Raft messages to a node share the one connection this
//! node keeps to it.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use felix_raft::{TypeConfig, Vote};
use felix_storage::ShardKey;
use openraft::alias::SnapshotMetaOf;
use openraft::error::{Fatal, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

/// The largest frame a node or client accepts or sends: 64 MiB. A larger
/// length in a frame's header closes the connection.
pub const MAX_FRAME: usize = 64 << 20;

/// The protocol version of these messages, sent first on each connection
/// ([`Request::Hello`]); a node answers a different one with
/// [`RemoteError::Protocol`].
pub const PROTOCOL_VERSION: u32 = 5;

/// A shard's key as it travels: the four parts of a
/// [`ShardKey`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ShardName {
    /// The tenant owning the stream.
    pub tenant: String,
    /// The namespace within the tenant.
    pub namespace: String,
    /// The stream.
    pub stream: String,
    /// The shard number within the stream.
    pub shard: u32,
}

impl From<&ShardKey> for ShardName {
    fn from(key: &ShardKey) -> Self {
        Self {
            tenant: key.tenant.clone(),
            namespace: key.namespace.clone(),
            stream: key.stream.clone(),
            shard: key.shard,
        }
    }
}

impl From<&ShardName> for ShardKey {
    fn from(name: &ShardName) -> Self {
        ShardKey::new(&name.tenant, &name.namespace, &name.stream, name.shard)
    }
}

/// A request and the id its answer carries.
#[derive(Debug, Serialize, Deserialize)]
pub struct RequestFrame {
    /// Chosen by the sender, unique among its requests in flight on this
    /// connection.
    pub id: u64,
    /// What is asked.
    pub request: Request,
}

/// The answer to the request of the same `id`.
#[derive(Debug, Serialize, Deserialize)]
pub struct ResponseFrame {
    /// The request's id.
    pub id: u64,
    /// The answer.
    pub response: Response,
}

/// What a node is asked, by a peer or a client.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Request {
    /// The first request on a connection: the sender's protocol version,
    /// and its node id when it is a node.
    Hello {
        /// [`PROTOCOL_VERSION`] of the sender.
        protocol: u32,
        /// The sending node, or `None` for a client.
        node: Option<u64>,
    },
    /// A Raft message of one shard's group, from its leader or a
    /// candidate.
    Raft {
        /// The group's shard.
        shard: ShardName,
        /// The message.
        rpc: RaftRequest,
    },
    /// Host the group of `shard` (open or create its log), and, when
    /// `initialize` holds, start it with `members` as its voters.
    OpenGroup {
        /// The shard.
        shard: ShardName,
        /// The voters, by node id and address.
        members: BTreeMap<u64, String>,
        /// Whether this node starts the group (one member does).
        initialize: bool,
    },
    /// Create `shard` replicated on the nodes `replicas` (ids this node
    /// knows addresses of).
    CreateShard {
        /// The shard.
        shard: ShardName,
        /// Its voters.
        replicas: Vec<u64>,
    },
    /// Add `node` at `addr` to the shard's group: a learner until it has
    /// caught up, then a voter.
    AddNode {
        /// The shard.
        shard: ShardName,
        /// The node joining.
        node: u64,
        /// Where it listens.
        addr: String,
    },
    /// Remove `node` from the shard's voters; it leaves the membership
    /// rather than staying a learner. A node that is only a learner is no
    /// voter, and stays a learner.
    RemoveNode {
        /// The shard.
        shard: ShardName,
        /// The node leaving.
        node: u64,
    },
    /// Append `records` (payloads) to the shard, acknowledged once a
    /// majority holds them durably. Only the leader accepts.
    Append {
        /// The shard.
        shard: ShardName,
        /// The payloads, in order.
        #[serde(with = "blob::list")]
        records: Vec<Vec<u8>>,
    },
    /// Committed records from `from`, at most about `max_bytes` of them
    /// (at least one when one is there); when none is there yet, wait at
    /// most `wait_ms` for one.
    Read {
        /// The shard.
        shard: ShardName,
        /// The first offset wanted.
        from: u64,
        /// A bound on the bytes answered.
        max_bytes: u64,
        /// How long to wait for a record at `from`, in milliseconds.
        wait_ms: u32,
    },
    /// The offset of the first committed record whose timestamp is at
    /// least `timestamp_micros`.
    OffsetForTimestamp {
        /// The shard.
        shard: ShardName,
        /// The time looked up, microseconds since the Unix epoch.
        timestamp_micros: u64,
    },
    /// The node's view of every group it hosts.
    Status,
    /// Is the node there? Sent by each node to each peer every heartbeat
    /// interval: one message per peer, whatever the number of groups, so
    /// that groups whose timers are off notice a leader gone
    /// (`quiesce.rs`).
    Ping,
    /// From a group's leader: the group is idle and every follower holds
    /// every entry; stop its timers until the leader writes again. Refused
    /// unless the sender leads the group in `term` here and this replica
    /// has applied every entry up to `applied`.
    Quiesce {
        /// The shard.
        shard: ShardName,
        /// The leader's term.
        term: u64,
        /// The leader.
        leader: u64,
        /// The index of the leader's last entry, committed and applied
        /// there (`None` for an empty log). A follower holding it may not
        /// yet know it committed (the commit index travels with the next
        /// AppendEntries or heartbeat): asleep before it learnt, it would
        /// serve reads without the last records until the next write.
        applied: Option<u64>,
    },
    /// Delete every record of the shard before `offset`, on every replica,
    /// through the log. Only the leader accepts; answered with the new
    /// start ([`Response::Start`]).
    DeleteRecords {
        /// The shard.
        shard: ShardName,
        /// The new log start.
        offset: u64,
    },
}

/// A Raft message of one group.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RaftRequest {
    /// Entries (or a heartbeat) from the leader.
    Append(AppendEntriesRequest<TypeConfig>),
    /// A candidate's vote request.
    Vote(VoteRequest<TypeConfig>),
    /// The leader's snapshot: the last log id it covers and the membership
    /// (the stream is the state, so there are no other bytes).
    Snapshot {
        /// The leader's vote.
        vote: Vote,
        /// What the snapshot covers.
        meta: SnapshotMetaOf<TypeConfig>,
    },
    /// A would-be candidate's Pre-Vote: would the receiver vote for it in
    /// the next term? Answering changes nothing on the receiver (no term,
    /// no vote, no lease), so a candidate whose log is behind does not hold
    /// up an up-to-date one.
    PreVote(VoteRequest<TypeConfig>),
}

/// A node's answer.
#[derive(Debug, Serialize, Deserialize)]
pub enum Response {
    /// The answer to [`Request::Hello`]: the answering node's id.
    Hello {
        /// The node answering.
        node: u64,
    },
    /// The answer to a [`Request::Raft`].
    Raft(RaftResponse),
    /// Done: the answer to a request with nothing more to say.
    Done,
    /// The offsets the appended records were given, in order.
    Appended(Vec<u64>),
    /// Committed records, in offset order, as the runs of record bytes the
    /// node's segments hold, and the shard's offsets when read.
    Records {
        /// The runs, each following the one before from the read's start.
        /// A leader's blank entry and membership changes are in them (they
        /// take offsets): a reader steps over them.
        runs: Vec<WireRun>,
        /// Where the next read starts: past the last entry read, skipped
        /// ones included.
        next: u64,
        /// The shard's offsets on the node that answered.
        offsets: ShardOffsets,
    },
    /// The answer to [`Request::OffsetForTimestamp`]: `None` when no
    /// committed record is that recent.
    Offset(Option<u64>),
    /// The answer to [`Request::Status`].
    Status(NodeStatus),
    /// The request failed.
    Error(RemoteError),
    /// The answer to [`Request::Ping`].
    Pong {
        /// An id of this run of the node, new at each start: a change
        /// means it restarted, and groups it led may have no leader now.
        run: u64,
        /// How many groups stopped, or did not open, on the node in this
        /// run: a change means groups it led may have no leader now.
        stops: u64,
    },
    /// Where the shard's log begins now: the answer to
    /// [`Request::DeleteRecords`].
    Start(u64),
}

/// The answer to a [`RaftRequest`] of the same kind.
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftResponse {
    /// To [`RaftRequest::Append`].
    Append(Result<AppendEntriesResponse<TypeConfig>, RaftError<TypeConfig>>),
    /// To [`RaftRequest::Vote`].
    Vote(Result<VoteResponse<TypeConfig>, RaftError<TypeConfig>>),
    /// To [`RaftRequest::Snapshot`].
    Snapshot(Result<SnapshotResponse<TypeConfig>, Fatal<TypeConfig>>),
    /// To [`RaftRequest::PreVote`].
    PreVote(Result<VoteResponse<TypeConfig>, RaftError<TypeConfig>>),
}

/// Records that lie back to back in a segment of the answering node, as
/// it read them: their bytes exactly as framed on disk (28-byte headers,
/// payloads), which the reader checks again record by record
/// (`RecordRun::verify`) before it trusts them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireRun {
    /// The first record's offset.
    pub first_offset: u64,
    /// Where the node read the first record in its segment file: errors
    /// about these bytes name it.
    pub position: u64,
    /// The records' bytes.
    #[serde(with = "blob::shared")]
    pub bytes: Bytes,
}

/// A replicated shard's offsets on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ShardOffsets {
    /// The oldest offset held.
    pub base: u64,
    /// One past the last committed entry this node knows of: a read
    /// returns records below it.
    pub committed: u64,
    /// One past the last entry written here, committed or not.
    pub written: u64,
}

/// One node's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// The node.
    pub node: u64,
    /// How many peer connections it keeps open (one per peer node it
    /// talks to, whatever the number of groups).
    pub peer_connections: u64,
    /// How many connections to it are open now (from peers and clients).
    pub inbound_connections: u64,
    /// The most bytes of requests one connection had in its hands at a
    /// time since it started (bounded by its `max_in_flight_bytes`).
    pub inbound_bytes_peak: u64,
    /// Every group it hosts, by shard.
    pub groups: Vec<GroupStatus>,
}

/// One group as one node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStatus {
    /// The shard.
    pub shard: ShardName,
    /// `leader`, `follower`, `candidate`, `learner` or `stopped: …` (why).
    pub role: String,
    /// The leader this node knows of.
    pub leader: Option<u64>,
    /// The current term.
    pub term: u64,
    /// The index of the last entry known committed, if any.
    pub commit_index: Option<u64>,
    /// The index of the last entry applied here, if any.
    pub last_applied: Option<u64>,
    /// The shard's offsets here.
    pub offsets: ShardOffsets,
    /// On the leader, each follower's lag in entries (its last matched
    /// index behind the leader's last entry); empty elsewhere.
    pub lag: BTreeMap<u64, u64>,
    /// The voters.
    pub voters: Vec<u64>,
    /// The learners.
    pub learners: Vec<u64>,
    /// Whether the group is quiet here: idle, its timers and heartbeats
    /// off until its leader writes again.
    pub quiet: bool,
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The connection failed (including a length above [`MAX_FRAME`],
    /// which the length codec reports as invalid data).
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The frame's bytes are not a message of this protocol.
    #[error("malformed frame of {len} bytes: {source}")]
    Malformed {
        /// The frame's length.
        len: usize,
        /// What postcard found.
        #[source]
        source: postcard::Error,
    },
    /// A message could not be encoded.
    #[error("a message could not be encoded: {0}")]
    Encode(#[source] postcard::Error),
    /// A message would not fit in a frame.
    #[error("a message of {len} bytes is above the {MAX_FRAME}-byte frame limit")]
    TooLarge {
        /// Its encoded length.
        len: usize,
    },
}

/// Decodes one frame's body as a request.
///
/// ```
/// use felix_cluster::wire::{decode_request, WireError};
///
/// assert!(matches!(decode_request(&[0xff; 3]), Err(WireError::Malformed { len: 3, .. })));
/// ```
pub fn decode_request(body: &[u8]) -> Result<RequestFrame, WireError> {
    postcard::from_bytes(body).map_err(|source| WireError::Malformed {
        len: body.len(),
        source,
    })
}

/// Decodes one frame's body as a response.
pub fn decode_response(body: &[u8]) -> Result<ResponseFrame, WireError> {
    postcard::from_bytes(body).map_err(|source| WireError::Malformed {
        len: body.len(),
        source,
    })
}

/// The codec of one direction of a connection: it writes `Out` frames and
/// reads `In` frames, bounded by [`MAX_FRAME`].
pub struct FrameCodec<In, Out> {
    frames: LengthDelimitedCodec,
    decode: fn(&[u8]) -> Result<In, WireError>,
    /// The body length of the last frame decoded.
    last_len: usize,
    _out: std::marker::PhantomData<fn(Out)>,
}

impl<In, Out> FrameCodec<In, Out> {
    /// The body length of the frame decoded last (0 before any): what a
    /// reader holds in memory for it.
    pub fn last_frame_len(&self) -> usize {
        self.last_len
    }
}

/// The codec a node serves a connection with: requests in, responses out.
pub type ServerCodec = FrameCodec<RequestFrame, ResponseFrame>;
/// The codec of the side that opened a connection: requests out,
/// responses in.
pub type ClientCodec = FrameCodec<ResponseFrame, RequestFrame>;

fn length_codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .max_frame_length(MAX_FRAME)
        .new_codec()
}

impl ServerCodec {
    /// The server side's codec.
    pub fn server() -> Self {
        Self {
            frames: length_codec(),
            decode: decode_request,
            last_len: 0,
            _out: std::marker::PhantomData,
        }
    }
}

impl ClientCodec {
    /// The connecting side's codec.
    pub fn client() -> Self {
        Self {
            frames: length_codec(),
            decode: decode_response,
            last_len: 0,
            _out: std::marker::PhantomData,
        }
    }
}

impl<In, Out> Decoder for FrameCodec<In, Out> {
    type Item = In;
    type Error = WireError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<In>, WireError> {
        match self.frames.decode(src)? {
            Some(body) => {
                self.last_len = body.len();
                // Records' bytes in the body are shared, not copied.
                let body = body.freeze();
                blob::in_frame(&body, || (self.decode)(&body)).map(Some)
            }
            None => Ok(None),
        }
    }
}

/// Length of a frame's header: a big-endian `u32`, the body's length.
const FRAME_HEADER_LEN: usize = 4;

impl<In, Out: Serialize> Encoder<Out> for FrameCodec<In, Out> {
    type Error = WireError;

    /// Serializes `item` straight into `dst` behind its length: no buffer
    /// of its own, so a response of records costs one copy of their bytes
    /// into the connection's buffer, which is reused.
    fn encode(&mut self, item: Out, dst: &mut BytesMut) -> Result<(), WireError> {
        let start = dst.len();
        dst.extend_from_slice(&[0; FRAME_HEADER_LEN]);
        postcard::serialize_with_flavor(&item, IntoBuffer(dst)).map_err(|source| {
            dst.truncate(start);
            WireError::Encode(source)
        })?;
        let len = dst.len() - start - FRAME_HEADER_LEN;
        // MAX_FRAME fits a u32, so a length within it always converts.
        let Some(header) = u32::try_from(len).ok().filter(|_| len <= MAX_FRAME) else {
            dst.truncate(start);
            return Err(WireError::TooLarge { len });
        };
        if let Some(at) = dst.get_mut(start..start + FRAME_HEADER_LEN) {
            at.copy_from_slice(&header.to_be_bytes());
        }
        Ok(())
    }
}

/// postcard's output into a connection's write buffer.
struct IntoBuffer<'a>(&'a mut BytesMut);

impl postcard::ser_flavors::Flavor for IntoBuffer<'_> {
    /// Nothing: the body is in the buffer.
    type Output = ();

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.extend_from_slice(&[data]);
        Ok(())
    }

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;

mod blob;
mod remote_error;

pub(crate) use remote_error::display_leader;
pub use remote_error::{QuiesceRefusal, RemoteError, SnapshotDefect};
