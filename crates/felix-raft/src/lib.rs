//! felix storage as the log of [openraft]: a Raft log kept in a felix
//! shard.
//!
//! [`FelixLogStore`] implements openraft's `RaftLogStorage` and
//! `RaftLogReader` (openraft 0.10) over a felix
//! [`Shard`](felix_storage::Shard):
//!
//! * the Raft index of an entry is its felix offset, and each entry (its
//!   log id and payload, in postcard) is one record;
//! * the entry's term is the record's generation, so felix's divergence
//!   tools and `felix-store` see who led. The log takes type
//!   configurations with one leader per term (standard Raft, openraft's
//!   `leader_id_std`: [`LogConfig`]), so a term names one leader and is the
//!   generation as it is;
//! * `append` writes the entries and returns: they are readable then
//!   (reads are bounded by what is written), and openraft goes on while
//!   they are synced, so the appends in flight meanwhile share one
//!   `fdatasync` (felix's group commit). openraft hears that they are
//!   durable only from the felix sync that covered them, reported by the
//!   shard's sync pool; a failed sync reaches openraft as the error, and
//!   every later append fails (the shard is poisoned);
//! * `truncate_after` is [`Shard::truncate_to`](felix_storage::Shard::truncate_to)
//!   just past the entry kept; `purge` moves the log start, or resets the
//!   shard when it passes the last entry;
//! * the vote and the last purged id (term included) live in the shard's
//!   `raft-state` file ([`felix_format::raft_state`]), replaced atomically
//!   and durable before `save_vote` or `purge` returns. A purge stores the
//!   id first and moves the log start second; an open finishes a purge a
//!   crash interrupted;
//! * the committed log id is not stored (`save_committed` is openraft's
//!   default, which keeps nothing): a restarted node's state machine comes
//!   back from its snapshot and catches up once it hears of a commit.
//!
//! The invariant: **an entry is reported durable to openraft only after
//! the felix sync that covers it succeeded.**
//!
//! ```
//! use felix_raft::{FelixLogStore, TypeConfig};
//! use openraft::storage::RaftLogStorage;
//!
//! let dir = tempfile::tempdir()?;
//! let mut log: FelixLogStore<TypeConfig> = FelixLogStore::options(dir.path()).open()?;
//! let runtime = tokio::runtime::Builder::new_current_thread().build()?;
//! let state = runtime.block_on(log.get_log_state())?;
//! assert_eq!(state.last_log_id, None);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod codec;
mod error;
mod log_store;
mod state_file;

pub use error::RaftLogError;
pub use log_store::{FelixLogStore, LogConfig, LogOptions};

/// A request of the example type configuration: opaque bytes.
///
/// Encoded as the bytes alone (serde-transparent). openraft asks a request
/// to display itself (in its logs): as its length.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Request(pub Vec<u8>);

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes", self.0.len())
    }
}

impl From<Vec<u8>> for Request {
    fn from(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }
}

impl From<&[u8]> for Request {
    fn from(bytes: &[u8]) -> Self {
        Self(bytes.to_vec())
    }
}

/// The log id of an entry of a felix Raft log: the term of the leader
/// that wrote it (one leader per term) and its index.
pub type LogId = openraft::LogId<openraft::vote::leader_id_std::CommittedLeaderId<u64>>;

/// A vote of [`TypeConfig`] (one leader per term).
pub type Vote = openraft::Vote<openraft::vote::leader_id_std::LeaderId<u64, u64>>;

/// An entry of [`TypeConfig`].
pub type Entry = <TypeConfig as openraft::RaftTypeConfig>::Entry;

openraft::declare_raft_types!(
    /// A type configuration for a log of opaque byte requests, node ids
    /// `u64`, nodes known by address ([`openraft::BasicNode`]) and one
    /// leader per term ([`leader_id_std`](openraft::vote::leader_id_std)).
    pub TypeConfig:
        D = Request,
        R = u64,
        NodeId = u64,
        Node = openraft::BasicNode,
        Term = u64,
        LeaderId = openraft::vote::leader_id_std::LeaderId<u64, u64>,
);
