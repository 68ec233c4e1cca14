//! Replicated felix shards: one [openraft] group per shard, kept on felix
//! storage, served by a node over one connection per peer, and a client.
//!
//! * A [`Node`] hosts many replicated shards on one felix
//!   [`Store`](felix_storage::Store) (one sync pool, one open-shard
//!   budget) and one tokio runtime. Each shard is a Raft group whose log
//!   is a felix shard ([`felix_raft::FelixLogStore`]): the Raft index of
//!   an entry is its offset, its term the record's generation, so the
//!   replicated log *is* the stream and every replica's shard holds the
//!   same records at the same offsets.
//! * The state machine is the stream itself: applied means committed, and
//!   a snapshot is the last applied log id and the membership, nothing
//!   more.
//! * Every group's messages to a node share this node's one connection to
//!   it (length-prefixed frames bounded by [`wire::MAX_FRAME`], requests
//!   answered out of order by id; see [`wire`]).
//! * [`Client`] appends through the leader (found from the nodes' hints,
//!   retried within a deadline), reads committed records from any replica,
//!   and creates shards and changes their members.
//!
//! # Metrics
//!
//! Each node records, per shard (labels `node` and `shard`), through the `metrics`
//! facade (nothing is recorded without an installed recorder;
//! [`serve_prometheus`] installs one and serves it):
//!
//! | name | kind | what |
//! | --- | --- | --- |
//! | `felix_cluster_term` | gauge | the current term |
//! | `felix_cluster_commit_index` | gauge | the index of the last entry known committed |
//! | `felix_cluster_last_applied` | gauge | the index of the last entry applied here |
//! | `felix_cluster_is_leader` | gauge | 1 on the shard's leader, 0 elsewhere |
//! | `felix_cluster_follower_lag` | gauge | on the leader, per `follower`: entries behind its last |
//! | `felix_cluster_elections_total` | counter | elections this node stood in |
//!
//! A record is acknowledged ([`Client::append`] returns its offset) only
//! once a majority of the shard's replicas has it durably: felix-raft
//! reports an entry durable to openraft only after the felix sync that
//! covers it.
//!
//! ```no_run
//! use felix_cluster::{Client, Node, NodeConfig};
//! use felix_storage::ShardKey;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let node = Node::start(NodeConfig::new(1, "/var/lib/felix/n1", "127.0.0.1:7101")).await?;
//! let client = Client::new(["127.0.0.1:7101"]);
//! let key = ShardKey::new("acme", "default", "orders", 0);
//! client.create_shard(&key, vec![1]).await?;
//! let offsets = client.append(&key, vec![b"hello".to_vec()]).await?;
//! assert_eq!(offsets.len(), 1);
//! node.shutdown().await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod batch;
mod client;
mod error;
mod handle;
mod log_start;
mod network;
mod node;
pub mod peer;
mod prometheus;
mod quiesce;
mod reader;
mod server;
mod shard;
mod state_machine;
mod status;
mod tls;
pub mod wire;

pub use batch::{BatchDefect, BatchRecord, ReadBatch};
pub use client::{Client, ClientOptions};
pub use error::{ClientError, NodeError, ShardError};
pub use handle::{MAX_READ_BYTES, MAX_READ_WAIT};
pub use node::{Node, NodeConfig, RaftTimings};
pub use prometheus::serve_prometheus;
pub use reader::ShardReader;
pub use server::MAX_IN_FLIGHT_BYTES;
pub use shard::{MAX_APPEND_RECORDS, MAX_RECORD_BYTES, ReplicatedShard};
pub use tls::{ClientTls, TlsError, TlsFiles, node_certificate_name};
