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
//!
//! # Example
//!
//! A broker's shard, opened through its [`Store`](felix_storage::Store) by
//! key (so its directory holds the key that names its remote objects, and
//! the operator tool's `felix-store stat DIR --remote URL` finds them),
//! whose sealed segments go to an object store (here in memory;
//! [`stores::local_dir`] and [`stores::s3`] are the others) once more than
//! 4 KiB is local, then read back from offset 0 through the tier:
//!
//! ```
//! use std::sync::Arc;
//! use felix_storage::{Record, ShardKey, StorageError, Store, StoreConfig};
//! use felix_tiered::{TierConfig, TierRetention, TieredShard, stores};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let root = tempfile::tempdir()?;
//! let config = StoreConfig { segment_size_bytes: 1024, ..StoreConfig::default() };
//! let store = Store::options(root.path()).config(config).open()?;
//! let key = ShardKey::new("acme", "default", "orders", 0);
//! let shard = match store.open_shard(&key) {
//!     Err(StorageError::ShardNotFound { .. }) => store.create_shard(&key)?,
//!     other => other?,
//! };
//! for i in 0..200u64 {
//!     shard.append(&[Record::new(i, format!("record {i}"))]).wait()?;
//! }
//! let tier = TierConfig {
//!     local: TierRetention { max_bytes: Some(4096), max_age: None },
//!     ..TierConfig::default()
//! };
//! let tiered = TieredShard::open(Arc::clone(&shard), key, stores::in_memory(), tier).await?;
//!
//! let outcome = tiered.offload().await?;
//! assert!(!outcome.uploaded.is_empty());
//! // The local log now starts past what was offloaded...
//! assert_eq!(shard.offsets().base, outcome.local_start);
//! assert_eq!(tiered.remote_range(), 0..outcome.local_start);
//! // ...and the tier reads it back from the store, every record checked.
//! let first = tiered.read(0, 1).await?;
//! assert_eq!(&first[0].payload[..], b"record 0");
//! // The shard's directory holds its key: what names its remote objects.
//! let dir = root.path().join(tiered.key().dir_name());
//! assert!(dir.join(felix_format::KEY_FILE_NAME).is_file());
//! # Ok(())
//! # }
//! ```
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
pub use error::{RetryPolicyError, StoreSetupError, TieredError};
pub use inspect::{ManifestObject, RemoteFinding, RemoteShard, held_nowhere};
pub use lifecycle::{delete_remote, delete_shard};
pub use offload::OffloadOutcome;
pub use shard::TieredShard;
pub use stores::{RetryPolicy, S3Endpoint, TierStore};

/// The README's Rust samples — felix-storage's API and this crate's — compiled
/// as doc tests here (the one library that can name both), so that a sample
/// that no longer type-checks fails `cargo test`.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeSamples;
