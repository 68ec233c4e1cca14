//! Why a request failed on the node, as the answer carries it.

use serde::{Deserialize, Serialize};

/// Why a request failed on the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// This node does not lead the shard's group; `leader` is the one it
    /// knows of, with its address.
    #[error("node {node} does not lead shard {shard}; leader: {}", display_leader(.leader))]
    NotLeader {
        /// The node that answered.
        node: u64,
        /// The shard, as `tenant/namespace/stream/shard`.
        shard: String,
        /// The leader's id and address, when known.
        leader: Option<(u64, String)>,
    },
    /// The append reached the leader but the leader changed before it
    /// committed: the records may or may not be committed (retrying may
    /// duplicate them).
    #[error("node {node}: the append to shard {shard} has an unknown outcome: {reason}")]
    OutcomeUnknown {
        /// The node that answered.
        node: u64,
        /// The shard.
        shard: String,
        /// openraft's account.
        reason: String,
    },
    /// The node hosts no group for the shard.
    #[error("node {node} hosts no shard {shard}")]
    UnknownShard {
        /// The node that answered.
        node: u64,
        /// The shard.
        shard: String,
    },
    /// A replica the request needs is not known to this node.
    #[error("node {node} knows no address of node {unknown}")]
    UnknownNode {
        /// The node that answered.
        node: u64,
        /// The node it does not know.
        unknown: u64,
    },
    /// The shard's group stopped on this node (a storage failure, or
    /// shutting down): `reason` says why.
    #[error("shard {shard} is stopped on node {node}: {reason}")]
    Stopped {
        /// The node that answered.
        node: u64,
        /// The shard.
        shard: String,
        /// Why, as the node's error said.
        reason: String,
    },
    /// The node's storage failed the request.
    #[error("storage error on node {node}: {message}")]
    Storage {
        /// The node that answered.
        node: u64,
        /// The storage error as the node rendered it.
        message: String,
    },
    /// The request is not valid (`reason` says which part).
    #[error("invalid request to node {node}: {reason}")]
    Invalid {
        /// The node that answered.
        node: u64,
        /// What is wrong.
        reason: String,
    },
    /// The sender speaks another protocol version.
    #[error("node {node} speaks protocol {expected}, the request {found}")]
    Protocol {
        /// The node that answered.
        node: u64,
        /// Its [`PROTOCOL_VERSION`](super::PROTOCOL_VERSION).
        expected: u32,
        /// The sender's.
        found: u32,
    },
    /// The records asked for are below the shard's log start on this
    /// replica: deleted (`delete_records_before`, retention). Read from
    /// `start`.
    #[error(
        "node {node}: shard {shard} begins at offset {start}; the records before it, {offset} among them, are deleted"
    )]
    Trimmed {
        /// The node that answered.
        node: u64,
        /// The shard.
        shard: String,
        /// The offset asked for.
        offset: u64,
        /// Where the log begins on that replica.
        start: u64,
    },
    /// An append of more records than one append takes: nothing was
    /// appended.
    #[error(
        "node {node}: an append of {records} records to shard {shard} is above the {max}-record limit of one append"
    )]
    TooManyRecords {
        /// The node that answered.
        node: u64,
        /// The shard.
        shard: String,
        /// The records in the append.
        records: usize,
        /// The limit.
        max: usize,
    },
    /// A record larger than a replicated record may be: nothing was
    /// appended.
    #[error(
        "node {node}: record {index} of the append to shard {shard} holds {bytes} bytes, above the {max}-byte limit of a replicated record"
    )]
    RecordTooLarge {
        /// The node that answered.
        node: u64,
        /// The shard.
        shard: String,
        /// Its place in the append, from 0.
        index: usize,
        /// Its length.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A node being added took no entry for the stall bound: it stays a
    /// learner, in no quorum.
    #[error(
        "node {node}: node {learner} at {addr}, added to shard {shard}, took no entry for {stalled_ms} ms ({}; it must reach its membership entry, {target}): it stays a learner, in no quorum; add it again once it is reachable, or remove it",
        matched.map_or_else(|| "it holds no entry".to_owned(), |m| format!("it holds entries up to {m}"))
    )]
    LearnerStalled {
        /// The node that answered (the leader).
        node: u64,
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
        /// How long it took nothing, in milliseconds.
        stalled_ms: u64,
    },
    /// A snapshot no leader following the protocol sends (openraft would
    /// stop the group on it): refused, nothing installed.
    #[error("node {node} refuses a snapshot of shard {shard}: {defect}")]
    ImpossibleSnapshot {
        /// The node that answered.
        node: u64,
        /// The shard.
        shard: String,
        /// What is impossible about it.
        defect: SnapshotDefect,
    },
    /// A follower did not let a quiet group sleep (`Request::Quiesce`):
    /// the leader keeps it awake and asks again at its next look.
    #[error("node {node} keeps shard {shard} awake: {refusal}")]
    StaysAwake {
        /// The node that answered.
        node: u64,
        /// The shard.
        shard: String,
        /// Why.
        refusal: QuiesceRefusal,
    },
}

/// What makes a snapshot one no leader sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotDefect {
    /// Its last entry is of a term after the sender's vote: no leader
    /// holds an entry of a later term.
    #[error("it ends at entry {index} of term {term}, after the sender's term {vote_term}")]
    LaterTerm {
        /// The last entry's index.
        index: u64,
        /// The last entry's term.
        term: u64,
        /// The sender's term.
        vote_term: u64,
    },
    /// It ends after the entry committed here by term but not by index:
    /// two committed entries at one index.
    #[error(
        "it ends at entry {index} of term {term}, which contradicts entry {committed_index} of term {committed_term} committed here"
    )]
    ContradictsCommitted {
        /// The last entry's index.
        index: u64,
        /// The last entry's term.
        term: u64,
        /// The entry committed here.
        committed_index: u64,
        /// Its term.
        committed_term: u64,
    },
    /// The sender's vote is not a leader's (not committed).
    #[error("the sender's vote in term {vote_term} for node {vote_node} is not a leader's")]
    VoteNotCommitted {
        /// The vote's term.
        vote_term: u64,
        /// The node it is for.
        vote_node: u64,
    },
    /// The sender's vote names this node as the leader.
    #[error("the sender's vote in term {vote_term} names this node as the leader")]
    VoteForThisNode {
        /// The vote's term.
        vote_term: u64,
    },
}

/// Why a follower keeps a group awake that its leader asked to quiet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[non_exhaustive]
pub enum QuiesceRefusal {
    /// The asker does not lead the group in that term here.
    #[error(
        "node {asked_by} does not lead term {term} here (leader here: {}, term {term_here})",
        leader_here.map_or_else(|| "none".to_owned(), |id| format!("node {id}"))
    )]
    NotLeader {
        /// The node that asked.
        asked_by: u64,
        /// The term it asked in.
        term: u64,
        /// The leader this replica knows of.
        leader_here: Option<u64>,
        /// This replica's term.
        term_here: u64,
    },
    /// The group stopped on this replica (its storage failed, or the node
    /// is shutting down).
    #[error("the group stopped here")]
    Stopped,
    /// This replica has not applied the leader's last entry yet: it learns
    /// that the entry committed from the leader's next message, and asleep
    /// it would serve reads without it until the next write.
    #[error("entries applied up to {} here, the leader's last is {wanted}", applied.map_or_else(|| "none".to_owned(), |a| a.to_string()))]
    Behind {
        /// The leader's last entry.
        wanted: u64,
        /// The last entry applied here.
        applied: Option<u64>,
    },
}

pub(crate) fn display_leader(leader: &Option<(u64, String)>) -> String {
    match leader {
        Some((id, addr)) => format!("node {id} at {addr}"),
        None => "unknown".to_owned(),
    }
}
