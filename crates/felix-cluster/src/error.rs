//! The errors of a node and of a client.

use std::path::PathBuf;
use std::time::Duration;

use crate::peer::CallError;
use crate::wire::RemoteError;

/// Why a node could not start, or a local group could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// The node's store failed to open or to open a shard.
    #[error("node {node}: store at {}: {source}", dir.display())]
    Store {
        /// The node.
        node: u64,
        /// The store's directory.
        dir: PathBuf,
        /// The storage error.
        #[source]
        source: felix_storage::StorageError,
    },
    /// A shard's Raft log failed to open.
    #[error("node {node}: the Raft log of shard {shard}: {source}")]
    Log {
        /// The node.
        node: u64,
        /// The shard.
        shard: String,
        /// felix-raft's error.
        #[source]
        source: felix_raft::RaftLogError,
    },
    /// openraft refused to start the group (its configuration or its
    /// stored state).
    #[error("node {node}: shard {shard}'s group did not start: {reason}")]
    Raft {
        /// The node.
        node: u64,
        /// The shard.
        shard: String,
        /// openraft's error, as it renders it.
        reason: String,
    },
    /// The listen address could not be bound.
    #[error("node {node}: listening on {addr}: {source}")]
    Listen {
        /// The node.
        node: u64,
        /// The address.
        addr: String,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// The node is shutting down: no group opens.
    #[error("node {node} is shutting down")]
    Stopping {
        /// The node.
        node: u64,
    },
    /// The store's configuration asks for retention, which would delete
    /// Raft log segments behind openraft's back: a replicated shard's
    /// start moves only through its log (the node's own retention,
    /// [`NodeConfig::retention`](crate::NodeConfig::retention)).
    #[error(
        "node {node}: store retention {found:?} would delete Raft log segments on this node alone; a node's retention moves every replica's log start through the log"
    )]
    Retention {
        /// The node.
        node: u64,
        /// The retention asked for.
        found: felix_storage::Retention,
    },
    /// The node's TLS material could not be loaded.
    #[error("node {node}: {source}")]
    Tls {
        /// The node.
        node: u64,
        /// What failed.
        #[source]
        source: crate::tls::TlsError,
    },
    /// The node's retention is not usable (the same rules as a store's).
    #[error("node {node}: {source}")]
    RetentionConfig {
        /// The node.
        node: u64,
        /// What is wrong with it.
        #[source]
        source: felix_storage::ConfigError,
    },
    /// The Raft timings are not usable (openraft's check says why).
    #[error("node {node}: Raft timings: {reason}")]
    Timings {
        /// The node.
        node: u64,
        /// What is wrong with them.
        reason: String,
    },
}

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// A node answered with an error that retrying elsewhere does not
    /// cure.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// No node gave an answer before the deadline; `last` is the last
    /// failure seen.
    #[error("no answer within {deadline:?} from {nodes}; last: {last}")]
    Timeout {
        /// The call's deadline.
        deadline: Duration,
        /// The addresses tried, comma-separated.
        nodes: String,
        /// The last failure.
        last: String,
    },
    /// The append reached a leader but its outcome is unknown (the leader
    /// changed or the connection failed after it was sent): the records
    /// may or may not be committed. Retrying may duplicate them.
    #[error("the append's outcome is unknown: {reason}")]
    OutcomeUnknown {
        /// What happened.
        reason: String,
    },
    /// The call could not reach the node asked for.
    #[error(transparent)]
    Call(#[from] CallError),
    /// A node's records are not what they claim to be (a record damaged
    /// on the way or on its disk): nothing of the read is handed out.
    #[error("records of shard {shard} from {addr}: {defect}")]
    Damaged {
        /// The node's address.
        addr: String,
        /// The shard read.
        shard: String,
        /// What is wrong.
        #[source]
        defect: crate::batch::BatchDefect,
    },
    /// A node answered with something this client did not ask for.
    #[error("unexpected answer from {addr}: {answer}")]
    Unexpected {
        /// The node's address.
        addr: String,
        /// The answer, as debug text.
        answer: String,
    },
}

/// Why an operation on a [`ReplicatedShard`](crate::ReplicatedShard)
/// failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShardError {
    /// This replica does not lead the shard: nothing was appended or
    /// changed. `leader` is the one it knows of, with its address.
    #[error("not the leader of shard {shard}; leader: {}", crate::wire::display_leader(.leader))]
    NotLeader {
        /// The shard.
        shard: String,
        /// The leader's id and address, when known.
        leader: Option<(u64, String)>,
    },
    /// Leadership was lost after the records were appended here: they may
    /// or may not be committed (retrying may duplicate them).
    #[error("the append to shard {shard} has an unknown outcome: {reason}")]
    OutcomeUnknown {
        /// The shard.
        shard: String,
        /// openraft's account.
        reason: String,
    },
    /// The shard's group stopped here (its storage failed, or the node is
    /// shutting down).
    #[error("shard {shard} is stopped: {reason}")]
    Stopped {
        /// The shard.
        shard: String,
        /// openraft's account of why.
        reason: String,
    },
    /// openraft refused the request (e.g. a membership change while
    /// another is in progress).
    #[error("shard {shard} refused the request: {reason}")]
    Refused {
        /// The shard.
        shard: String,
        /// openraft's account of why.
        reason: String,
    },
    /// The records asked for are below this replica's log start: deleted
    /// (`delete_records_before`, retention). Read from `start`.
    #[error(
        "shard {shard} begins at offset {start}; the records before it, {offset} among them, are deleted"
    )]
    Trimmed {
        /// The shard.
        shard: String,
        /// The offset asked for.
        offset: u64,
        /// Where the log begins on this replica.
        start: u64,
    },
    /// `delete_records_before` asked for a start past the committed end:
    /// nothing was appended.
    #[error(
        "cannot delete the records of shard {shard} before offset {offset}: only those before {committed} are committed"
    )]
    DeletePastEnd {
        /// The shard.
        shard: String,
        /// The start asked for.
        offset: u64,
        /// One past the last committed entry.
        committed: u64,
    },
    /// An append of more records than one append takes
    /// ([`MAX_APPEND_RECORDS`](crate::MAX_APPEND_RECORDS)): nothing was
    /// appended.
    #[error(
        "an append of {records} records to shard {shard} is above the {max}-record limit of one append"
    )]
    TooManyRecords {
        /// The shard.
        shard: String,
        /// The records in the append.
        records: usize,
        /// The limit.
        max: usize,
    },
    /// A record larger than a replicated record may be
    /// ([`MAX_RECORD_BYTES`](crate::MAX_RECORD_BYTES)): nothing was
    /// appended.
    #[error(
        "record {index} of the append to shard {shard} holds {bytes} bytes, above the {max}-byte limit of a replicated record"
    )]
    RecordTooLarge {
        /// The shard.
        shard: String,
        /// Its place in the append, from 0.
        index: usize,
        /// Its length.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A node being added took no entry for the stall bound
    /// (`add_node`): it stays a learner, in no quorum.
    #[error(
        "node {learner} at {addr}, added to shard {shard}, took no entry for {stalled:?} ({}; it must reach its membership entry, {target}): it stays a learner, in no quorum; add it again once it is reachable, or remove it",
        matched.map_or_else(|| "it holds no entry".to_owned(), |m| format!("it holds entries up to {m}"))
    )]
    LearnerStalled {
        /// The shard.
        shard: String,
        /// The node being added.
        learner: u64,
        /// Its address.
        addr: String,
        /// The last entry it holds, if any.
        matched: Option<u64>,
        /// The entry that made it a learner, which it must hold.
        target: u64,
        /// How long it took nothing.
        stalled: Duration,
    },
    /// This replica's storage failed the read.
    #[error("shard {shard}: {source}")]
    Storage {
        /// The shard.
        shard: String,
        /// The storage error.
        #[source]
        source: Box<felix_storage::StorageError>,
    },
}

impl ShardError {
    /// The error as node `node` sends it to a client.
    pub(crate) fn to_remote(&self, node: u64) -> RemoteError {
        match self {
            Self::NotLeader { shard, leader } => RemoteError::NotLeader {
                node,
                shard: shard.clone(),
                leader: leader.clone(),
            },
            Self::OutcomeUnknown { shard, reason } => RemoteError::OutcomeUnknown {
                node,
                shard: shard.clone(),
                reason: reason.clone(),
            },
            Self::Stopped { shard, reason } => RemoteError::Stopped {
                node,
                shard: shard.clone(),
                reason: reason.clone(),
            },
            Self::Refused { reason, .. } => RemoteError::Invalid {
                node,
                reason: reason.clone(),
            },
            Self::Trimmed {
                shard,
                offset,
                start,
            } => RemoteError::Trimmed {
                node,
                shard: shard.clone(),
                offset: *offset,
                start: *start,
            },
            Self::TooManyRecords {
                shard,
                records,
                max,
            } => RemoteError::TooManyRecords {
                node,
                shard: shard.clone(),
                records: *records,
                max: *max,
            },
            Self::RecordTooLarge {
                shard,
                index,
                bytes,
                max,
            } => RemoteError::RecordTooLarge {
                node,
                shard: shard.clone(),
                index: *index,
                bytes: *bytes,
                max: *max,
            },
            Self::LearnerStalled {
                shard,
                learner,
                addr,
                matched,
                target,
                stalled,
            } => RemoteError::LearnerStalled {
                node,
                shard: shard.clone(),
                learner: *learner,
                addr: addr.clone(),
                matched: *matched,
                target: *target,
                stalled_ms: u64::try_from(stalled.as_millis()).unwrap_or(u64::MAX),
            },
            Self::DeletePastEnd { .. } => RemoteError::Invalid {
                node,
                reason: self.to_string(),
            },
            Self::Storage { .. } => RemoteError::Storage {
                node,
                message: self.to_string(),
            },
        }
    }
}
