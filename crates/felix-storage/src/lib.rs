//! The storage API a Felix broker uses: [`Store`] and [`Shard`].
//!
//! A store is a root directory of shard directories. A shard is one stream
//! shard's log: appends assign contiguous offsets and go to disk one `write`
//! per batch; reads return whole, checksummed records by offset from any
//! thread, concurrently with appends; segments roll over by size, old ones
//! are deleted by retention, and replicas can copy a leader's records with
//! its offsets, truncate a divergent tail, and keep a generation history.
//!
//! A shard is opened one way, [`Shard::options`] (a [`Store`] opens its
//! shards the same way), and its [`StoreConfig`] is checked at open: every
//! field has a documented default and range, and a value outside it is
//! [`StorageError::InvalidConfig`] naming the field.
//!
//! Durability is a per-store policy ([`Durability`]): page cache only, a
//! periodic background sync, or on-commit, where `append` returns once an
//! `fdatasync` covers it and concurrent appenders share syncs (group
//! commit). Reads return only acknowledged records (under on-commit,
//! durable ones), or as far as a [`ReadBound`] says; a consumer follows the
//! tail with [`Shard::wait_readable`], woken by the append or sync that
//! makes records readable. A failed write or sync stops the shard's writes
//! for good: every append it covered gets the I/O error, later calls
//! [`StorageError::Poisoned`]; a failed `fsync` is never retried. The whole
//! contract is in `docs/broker-contract.md`.
//!
//! [`Shard::close`] (or [`Store::close`]) makes everything durable, records
//! the segments in a clean-shutdown file, so the next open checks only the
//! newest segment instead of every sealed one, and releases the shard; a
//! shard dropped without closing is opened as after a crash (every segment
//! inspected).
//!
//! A store manages each shard's life: [`Store::create_shard`] makes one
//! (and records its exact key in the directory), [`Store::open_shard`]
//! opens an existing one and never creates it, [`Store::keys`] lists them,
//! and [`Store::close_shard`], [`Store::reopen_shard`] (recovery again,
//! e.g. after a failed sync poisoned the shard) and [`Store::delete_shard`]
//! act on one shard while the others run. [`Store::close`] — and dropping
//! a store, which does the same and logs a failure — closes every shard:
//! everything durable, clean-shutdown files written, every lock released
//! so the root opens again at once; handles to a shard the store closed
//! fail with [`StorageError::Closed`] from then on.
//!
//! Everything is thread-safe, and every wait has a blocking form and two
//! that hold no thread: a future ([`Shard::append_async`],
//! [`Shard::wait_durable_async`], [`Shard::wait_readable_async`]; any
//! executor polls them, and this crate depends on no runtime) and a
//! callback ([`Shard::append_then`] and its kin, run on the sync pool's
//! dispatch thread). Syncs are made by a pool of threads the [`Store`]
//! owns for all its shards ([`StoreConfig::sync_threads`]); a shard opened
//! alone has a small pool of its own.
//!
//! Invariants this crate keeps:
//!
//! * No record is acknowledged as durable before the sync its policy
//!   requires has succeeded, and `durable_offset` never passes what a
//!   successful sync covered.
//! * No read returns a record that was not acknowledged, or one whose write
//!   or sync failed.
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
//!
//! # Metrics
//!
//! With the optional `metrics` feature, every shard reports through the
//! [`metrics`](https://docs.rs/metrics) facade; the application installs
//! the recorder (an exporter) it wants, and without one nothing is
//! recorded. To use it, enable the feature, add the facade in the version
//! this crate records through (`metrics = "0.24"`: a recorder installed
//! through another 0.x version is not seen) and an exporter, and install
//! the recorder **before any shard opens**: a shard registers its handles
//! when it opens, with the recorder installed then.
//! `crates/felix-storage/examples/metrics.rs` does this with
//! `metrics-util`'s debugging recorder and prints what a store recorded
//! (`cargo run -p felix-storage --features metrics --example metrics`):
//!
//! ```toml
//! felix-storage = { version = "0.1", features = ["metrics"] }
//! metrics = "0.24"
//! metrics-exporter-prometheus = "0.18" # or any recorder
//! ```
//!
//! ```
//! # #[cfg(feature = "metrics")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use felix_storage::{Store, StoreConfig};
//!
//! // Any `metrics::Recorder`: an exporter's, or this one for tests.
//! let recorder = metrics_util::debugging::DebuggingRecorder::new();
//! metrics::set_global_recorder(recorder)?; // first,
//! felix_storage::metrics::describe(); // (units and help text, optional)
//! let root = tempfile::tempdir()?;
//! let store = Store::open(root.path(), StoreConfig::default())?; // then open
//! # store.close()?;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "metrics"))]
//! # fn main() {}
//! ```
//! Every metric carries the label `shard` (the shard's label).
//! See the [`metrics`](mod@metrics) module for each one's exact meaning
//! and how fresh it is (figures that change with every write are published
//! in bulk, at most 64 writes apart).
//!
//! | name | kind | what |
//! |---|---|---|
//! | `felix_storage_fdatasync_seconds` | histogram | each `fdatasync` made for durability |
//! | `felix_storage_append_durable_seconds` | histogram | an on-commit append ([`Shard::append`], [`Shard::append_async`], [`Shard::append_then`]), call to durable |
//! | `felix_storage_append_batch_records` | histogram | records per append call |
//! | `felix_storage_appends_per_sync` | histogram | append calls one durability sync covered |
//! | `felix_storage_open_seconds` | histogram | each open, recovery included |
//! | `felix_storage_appended_bytes_total` | counter | bytes of records appended |
//! | `felix_storage_appended_records_total` | counter | records appended |
//! | `felix_storage_rolls_total` | counter | segments rolled over |
//! | `felix_storage_segments_deleted_total` | counter | segments retention deleted |
//! | `felix_storage_truncations_total` | counter | truncations and resets |
//! | `felix_storage_recovery_actions_total` | counter | actions recovery took on open |
//! | `felix_storage_poisons_total` | counter | failures that stopped writes |
//! | `felix_storage_scrub_damaged_records_total` | counter | damaged records scrubs found |
//! | `felix_storage_scrubbed_bytes_total` | counter | bytes of sealed segments scrubbed |
//! | `felix_storage_shard_bytes` | gauge | bytes of the shard's segment files |
//! | `felix_storage_shard_segments` | gauge | segments, the active one included |
//! | `felix_storage_base_offset` | gauge | oldest offset held |
//! | `felix_storage_readable_offset` | gauge | end of what a committed read returns |
//! | `felix_storage_durable_offset` | gauge | end of what is durable |
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod background_scrub;
mod clock;
mod config;
mod error;
pub mod lock;
mod loom;
pub mod metrics;
mod periodic;
mod pool;
mod shard;
mod stats;
mod store;

pub use clock::{Clock, SystemClock};
pub use config::{
    ConfigError, ConfigField, DEFAULT_APPENDS_IN_FLIGHT, DEFAULT_SYNC_THREAD_KEEP_ALIVE,
    Durability, MAX_APPENDS_IN_FLIGHT, MAX_INDEX_SPACING_BYTES, MAX_INTERVAL,
    MAX_SEGMENT_SIZE_BYTES, MAX_SYNC_THREADS, MIN_INTERVAL, MIN_SCRUB_BYTES_PER_SECOND,
    MIN_SEGMENT_SIZE_BYTES, MIN_WRITEBACK_BYTES, Preallocation, Retention, StoreConfig,
    default_sync_threads,
};
pub use error::{CopyProblem, ErrorKind, Result, StorageError};
pub use lock::{LOCK_FILE_NAME, LockError, ShardLock, StoreLock};
pub use shard::{
    Append, AppendFuture, AppendReceipt, DurableFuture, DurableWait, Offsets, ReadBound,
    ReadRecord, RecordRun, ReplicatedRecord, ReplicatedRun, RetentionOutcome, RunIter, RunRecord,
    ScrubReport, SegmentCopy, SegmentInfo, Shard, ShardOptions, Tail, TailFuture, TailWait,
};
pub use stats::ShardStats;
pub use store::{ShardId, Store, StoreOptions};

// Types that appear in this crate's signatures, so that a user needs no
// other felix crate to name them.
pub use bytes::Bytes;
pub use felix_epochs::{
    Divergence, EpochEntry, EpochHistory, HistoryError, LeaderAnswer, MAX_EPOCH_ENTRIES, Recorded,
};
pub use felix_format::key_file::{MAX_KEY_FILE_BODY_LEN, MAX_KEY_PART_BYTES};
pub use felix_format::side_file::SideFileError;
pub use felix_format::log_start::MovedBy;
pub use felix_format::{
    CorruptionKind, CorruptionSite, MAX_PAYLOAD_BYTES, SegmentExtent, ShardKey,
};
pub use felix_io::{
    DirEntry, FileSystem, FileType, IoError, LockGuard, NotRegularFile, OpenMode, OsFs, Vfs,
    VfsFile, not_regular_file, remove_dir_all,
};
pub use felix_recovery::{
    Action, Note, RecoveryError, RepairClass, RepairPolicy, ScrubDamage, SegmentScrub,
};
pub use felix_segment::{DEFAULT_INDEX_SPACING_BYTES, Record, SegmentError, TimestampHit};

/// Every bound and default of a [`StoreConfig`] setting and of the format,
/// by name: what [`StorageError::InvalidConfig`] checks a value against.
///
/// ```
/// use felix_storage::{StoreConfig, limits};
///
/// let config = StoreConfig { segment_size_bytes: limits::MIN_SEGMENT_SIZE_BYTES, ..StoreConfig::default() };
/// assert!(config.validate().is_ok());
/// assert!(limits::MAX_PAYLOAD_BYTES > 0);
/// ```
pub mod limits {
    pub use crate::config::{
        DEFAULT_APPENDS_IN_FLIGHT, DEFAULT_SYNC_THREAD_KEEP_ALIVE, MAX_APPENDS_IN_FLIGHT,
        MAX_INDEX_SPACING_BYTES, MAX_INTERVAL, MAX_SEGMENT_SIZE_BYTES, MAX_SYNC_THREADS,
        MIN_INTERVAL, MIN_SCRUB_BYTES_PER_SECOND, MIN_SEGMENT_SIZE_BYTES, MIN_WRITEBACK_BYTES,
        default_sync_threads,
    };
    pub use felix_format::MAX_PAYLOAD_BYTES;
    pub use felix_segment::DEFAULT_INDEX_SPACING_BYTES;
}

/// What an open's recovery found and did, and what a scrub reports: the
/// vocabulary of [`ShardStats::notes`], [`ScrubReport`] and
/// [`StorageError::Recovery`].
pub mod recovery {
    pub use felix_format::{CorruptionKind, CorruptionSite, SegmentExtent};
    pub use felix_recovery::{
        Action, Note, RecoveryError, RepairClass, RepairPolicy, ScrubDamage, SegmentScrub,
    };
    pub use felix_segment::SegmentError;
}

/// The file-system layer every shard's file goes through: [`FileSystem`]
/// (the operating system's, or a [`Vfs`] of one's own, e.g. for fault
/// injection) and the types its methods name.
///
/// ```
/// use felix_storage::io::FileSystem;
/// use felix_storage::Shard;
///
/// let dir = tempfile::tempdir()?;
/// let shard = Shard::options(dir.path()).file_system(FileSystem::os()).open()?;
/// assert_eq!(shard.offsets().written, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub mod io {
    pub use felix_io::{
        DirEntry, FileSystem, FileType, IoError, LockGuard, NotRegularFile, OpenMode, OsFs, Vfs,
        VfsFile, not_regular_file, remove_dir_all,
    };
}

/// A shard's generation history (the epochs a replicated log keeps):
/// what [`Shard::generations`], [`Shard::end_offset_for`] and
/// [`Shard::reconcile`] speak in.
pub mod epochs {
    pub use felix_epochs::{
        Divergence, EpochEntry, EpochHistory, HistoryError, LeaderAnswer, MAX_EPOCH_ENTRIES,
        Recorded,
    };
}

/// The key file a store writes in each shard directory: its limits and
/// the error that names which part of a key does not fit.
pub mod key_file {
    pub use felix_format::key_file::{MAX_KEY_FILE_BODY_LEN, MAX_KEY_PART_BYTES};
    pub use felix_format::side_file::{SideFileDefect, SideFileError};
}
