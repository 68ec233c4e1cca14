//! Tiered storage for felix shards: sealed segments that local retention
//! would delete are offloaded to an object store, recorded in the shard's
//! remote manifest, and only then deleted locally; reads below the local log
//! start are served back from the object store.
//!
//! The object store is the Rust ecosystem's standard interface, the
//! [`object_store`] crate: S3 and S3-compatible servers, the local file
//! system, memory. `object_store` is async, so this crate runs on tokio;
//! nothing below it (felix-storage and the crates under it) gains a runtime.
//!
//! The invariant this crate keeps: **a record is deleted locally only after
//! the manifest that lists its remote copy is durable.** A crash or an
//! object-store failure at any point therefore leaves every record in the
//! local shard, the remote store, or both.
#![forbid(unsafe_code)]
// Bytes come back from a remote store: nothing here may panic on them.
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod cache;
mod config;
mod error;
mod inspect;
mod lifecycle;
mod lookup;
mod offload;
mod read;
mod remote;
mod retention;
mod shard;
pub mod stores;
mod upload;
mod walk;

pub use config::{TierConfig, TierConfigError, TierRetention};
pub use error::{StoreSetupError, TieredError};
pub use inspect::{ManifestObject, RemoteFinding, RemoteShard};
pub use lifecycle::{delete_remote, delete_shard};
pub use offload::OffloadOutcome;
pub use shard::TieredShard;
pub use stores::{S3Endpoint, TierStore};
