//! felix storage as the log of [openraft]: a Raft log kept in a felix
//! shard.
//!
//! [`FelixLogStore`] implements openraft's `RaftLogStorage` and
//! `RaftLogReader` (openraft 0.10) over a felix
//! [`Shard`](felix_storage::Shard):
//!
//! * the Raft log is the stream: the Raft index of an entry is its felix
//!   offset, and each entry is one record whose payload is one kind byte
//!   ([`ENTRY_NORMAL`], [`ENTRY_BLANK`], [`ENTRY_MEMBERSHIP`],
//!   [`ENTRY_LOG_START`]) then, for a normal entry, the producer's bytes
//!   as given (a read slices them out of the read's buffer), for a
//!   membership entry the membership in postcard, for a log-start entry
//!   the new start (8 bytes, big-endian). A normal entry's record
//!   timestamp is its request's, set by the leader and replicated
//!   ([`EntryData`], [`Request::new`]); the others' is 0. Every replica holds the same records, so
//!   `felix-store dump` and time lookups see what was produced, on any
//!   node;
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
//! * the committed log id is stored in the raft-state file too, lazily
//!   (openraft allows it): only once the entry it names is durable here,
//!   and at most about once a second or every 1,024 entries, so a restarted
//!   node re-applies its state machine up to it (perhaps behind the true
//!   one, never ahead);
//! * the raft-state file records the log encoding (2, above); a log whose
//!   file records another, as felix-raft on openraft 0.9 left them
//!   (version-1 files, postcard entries), is refused at open
//!   ([`RaftLogError::LogEncoding`]), changing nothing.
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
mod log_ids;
mod log_store;
mod snapshot_file;
mod state_file;

pub use codec::{ENTRY_BLANK, ENTRY_LOG_START, ENTRY_MEMBERSHIP, ENTRY_NORMAL};
pub use error::RaftLogError;
pub use log_store::{FelixLogStore, LogConfig, LogOptions};

use bytes::Bytes;

/// A request of the example type configuration: records, or a new log
/// start.
///
/// A [`Record`](Request::Record) is one normal entry, stored as a record
/// whose payload is the producer's bytes behind one kind byte
/// ([`ENTRY_NORMAL`]) and whose timestamp is the request's: set once,
/// where the request enters the cluster (whoever calls `client_write` on
/// the leader, see [`Request::new`]), and replicated with the entry, so
/// every replica holds the same record and answers a time lookup the same
/// way.
///
/// A [`LogStart`](Request::LogStart) asks every replica to delete the
/// records before an offset (Kafka's DeleteRecords, or retention, through
/// the log): stored as a record of kind [`ENTRY_LOG_START`], timestamp 0,
/// the start in its body. A state machine that applies it moves the log
/// start (a snapshot at the entry before the start, then a purge up to
/// it).
///
/// openraft asks a request to display itself (in its logs): as its length
/// and time, or the start.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Request {
    /// One record.
    Record {
        /// The publish time, microseconds since the Unix epoch: the
        /// record's timestamp on every replica.
        timestamp_micros: u64,
        /// The producer's bytes: the record's payload after its kind byte.
        #[serde(with = "codec::serde_bytes")]
        payload: Bytes,
    },
    /// Delete every record before `start`: the log begins there on every
    /// replica once this entry is applied.
    LogStart {
        /// The new log start (a start at or below the current one changes
        /// nothing).
        start: u64,
    },
}

impl Request {
    /// A request of `payload` stamped with the current time (the system
    /// clock, microseconds since the Unix epoch): what a leader's caller of
    /// `client_write` builds.
    pub fn new(payload: impl Into<Bytes>) -> Self {
        Self::at(now_micros(), payload)
    }

    /// A request of `payload` with the given publish time.
    pub fn at(timestamp_micros: u64, payload: impl Into<Bytes>) -> Self {
        Self::Record {
            timestamp_micros,
            payload: payload.into(),
        }
    }
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Record {
                timestamp_micros,
                payload,
            } => write!(f, "{} bytes at {timestamp_micros} µs", payload.len()),
            Self::LogStart { start } => write!(f, "log start {start}"),
        }
    }
}

/// The payload of an entry that holds none.
static NO_PAYLOAD: Bytes = Bytes::new();

impl EntryData for Request {
    fn timestamp_micros(&self) -> u64 {
        match self {
            Self::Record {
                timestamp_micros, ..
            } => *timestamp_micros,
            Self::LogStart { .. } => 0,
        }
    }

    fn payload(&self) -> &Bytes {
        match self {
            Self::Record { payload, .. } => payload,
            Self::LogStart { .. } => &NO_PAYLOAD,
        }
    }

    fn from_record(timestamp_micros: u64, payload: Bytes) -> Self {
        Self::at(timestamp_micros, payload)
    }

    fn log_start(&self) -> Option<u64> {
        match self {
            Self::Record { .. } => None,
            Self::LogStart { start } => Some(*start),
        }
    }

    fn from_log_start(start: u64) -> Option<Self> {
        Some(Self::LogStart { start })
    }
}

/// The application data of a [`LogConfig`]: what a normal entry's record
/// holds, its timestamp and its payload, and back; and, for data that can
/// say so, a new log start ([`ENTRY_LOG_START`]).
pub trait EntryData: Sized {
    /// The record's timestamp, the same on every replica (the leader's
    /// publish time, carried in the entry).
    fn timestamp_micros(&self) -> u64;
    /// The record's payload after its kind byte.
    fn payload(&self) -> &Bytes;
    /// The data a record holds; `payload` is a slice of the read's buffer.
    fn from_record(timestamp_micros: u64, payload: Bytes) -> Self;
    /// The log start this entry asks for, when it is a log-start entry
    /// (stored as [`ENTRY_LOG_START`], its timestamp and payload unused).
    /// Default: `None`, every entry is a record.
    fn log_start(&self) -> Option<u64> {
        None
    }
    /// The data of a log-start entry read back, or `None` when this data
    /// has none (the default): such a record is then refused as
    /// [`RaftLogError::EntryKind`].
    fn from_log_start(start: u64) -> Option<Self> {
        let _ = start;
        None
    }
}

/// The current time in microseconds since the Unix epoch (0 before it).
fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
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
