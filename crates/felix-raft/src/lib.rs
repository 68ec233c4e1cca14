//! felix storage as the log of [openraft]: a Raft log kept in a felix
//! shard.
//!
//! [`FelixLogStore`] implements openraft's `RaftLogStorage` and
//! `RaftLogReader` (openraft 0.9, `storage-v2`) over a felix
//! [`Shard`](felix_storage::Shard):
//!
//! * the Raft index of an entry is its felix offset, and each entry (its
//!   log id and payload, in postcard) is one record;
//! * the entry's term is the record's generation, so felix's divergence
//!   tools and `felix-store` see who led. openraft is built with
//!   `single-term-leader` (standard Raft: one leader per term), so a term
//!   names one leader and is the generation as it is;
//! * entries are readable when `append` returns (reads are bounded by what
//!   is written), and openraft hears that they are durable only from the
//!   felix sync that covered them; a failed sync reaches openraft as the
//!   error;
//! * `truncate` is [`Shard::truncate_to`](felix_storage::Shard::truncate_to);
//!   `purge` moves the log start, or resets the shard when it passes the
//!   last entry;
//! * the vote and the last purged id (term included) live in the shard's
//!   `raft-state` file ([`felix_format::raft_state`]), replaced atomically
//!   and durable before `save_vote` or `purge` returns. A purge stores the
//!   id first and moves the log start second; an open finishes a purge a
//!   crash interrupted.
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

use std::io::Cursor;

pub use error::RaftLogError;
pub use log_store::{FelixLogStore, LogOptions};

/// A request of the example type configuration: opaque bytes.
pub type Request = Vec<u8>;

openraft::declare_raft_types!(
    /// A type configuration for a log of opaque byte requests, node ids
    /// `u64` and nodes known by address ([`openraft::BasicNode`]).
    pub TypeConfig:
        D = Request,
        R = u64,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
);
