//! The storage API a Felix broker uses: [`Store`] and [`Shard`].
//!
//! A store is a root directory of shard directories. A shard is one stream
//! shard's log: appends assign contiguous offsets and go to disk one `write`
//! per batch; reads return whole, checksummed records by offset from any
//! thread, concurrently with appends; segments roll over by size, old ones
//! are deleted by retention, and replicas can copy a leader's records with
//! its offsets, truncate a divergent tail, and keep a generation history.
//!
//! Durability is a per-store policy ([`Durability`]): page cache only, a
//! periodic background sync, or on-commit, where `append` returns once an
//! `fdatasync` covers it and concurrent appenders share syncs (group
//! commit). A failed write or sync stops the shard's writes for good with
//! the original error: a failed `fsync` is never retried.
//!
//! [`Shard::close`] (or [`Store::close`]) makes everything durable and
//! records the segments in a clean-shutdown file, so the next open checks
//! only the newest segment instead of every sealed one; a shard dropped
//! without closing is opened as after a crash (every segment inspected).
//!
//! Everything is synchronous and thread-safe; no async runtime is needed (a
//! broker on tokio calls it from blocking tasks).
//!
//! Invariants this crate keeps:
//!
//! * No record is acknowledged as durable before the sync its policy
//!   requires has succeeded, and `durable_offset` never passes what a
//!   successful sync covered.
//! * A segment's header and directory entry are durable before any record
//!   lives in it; a new segment exists only after the old one is sealed.
//!
//! ```
//! use felix_storage::{Record, Shard};
//!
//! let dir = tempfile::tempdir()?;
//! {
//!     let shard = Shard::options(dir.path()).open()?;
//!     shard.append(&[Record::now("a"), Record::now("b")])?;
//!     shard.close()?;
//! }
//! let reopened = Shard::options(dir.path()).open()?;
//! assert_eq!(reopened.next_offset(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod clock;
mod config;
mod error;
mod lock;
mod maintenance;
mod shard;
mod stats;
mod store;

pub use clock::{Clock, SystemClock};
pub use config::{
    ConfigError, ConfigField, Durability, MAX_INDEX_SPACING_BYTES, MAX_INTERVAL,
    MAX_SEGMENT_SIZE_BYTES, MIN_INTERVAL, MIN_SEGMENT_SIZE_BYTES, MIN_WRITEBACK_BYTES,
    Preallocation, Retention, StoreConfig,
};
pub use error::{Result, StorageError};
pub use lock::{LOCK_FILE_NAME, LockError, ShardLock};
pub use shard::{
    AppendReceipt, Offsets, ReadBound, ReadRecord, ReplicatedRecord, RetentionOutcome, SegmentInfo,
    Shard, ShardOptions, Tail,
};
pub use stats::ShardStats;
pub use store::Store;

// Types that appear in this crate's signatures, so that a user needs no
// other felix crate to name them.
pub use felix_epochs::{
    Divergence, EpochEntry, EpochHistory, HistoryError, LeaderAnswer, Recorded,
};
pub use felix_format::{MAX_PAYLOAD_BYTES, SegmentExtent, ShardKey};
pub use felix_io::{FileSystem, IoError};
pub use felix_recovery::{Action, Note, RecoveryError, RepairPolicy};
pub use felix_segment::{DEFAULT_INDEX_SPACING_BYTES, Record, SegmentError};
