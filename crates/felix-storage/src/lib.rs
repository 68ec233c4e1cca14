//! The storage API a Felix broker uses: a [`Store`] of [`Shard`]s.
//!
//! A store is a root directory of shard directories, one per [`ShardKey`]
//! (tenant, namespace, stream, shard number). A shard is one stream
//! shard's log: appends assign contiguous offsets and go to disk one `write`
//! per batch; reads return whole, checksummed records by offset from any
//! thread, concurrently with appends; segments roll over by size, old ones
//! are deleted by retention, and replicas can copy a leader's records with
//! its offsets, truncate a divergent tail, and keep a generation history.
//!
//! A broker starts from a store, opened one way
//! ([`Store::options`]`(root).config(..).open()`), and its [`StoreConfig`]
//! is checked at open: every field has a documented default and range, and
//! a value outside it is [`StorageError::InvalidConfig`] naming the field.
//! [`Store::create_shard`] makes a shard (and records its exact key in the
//! directory), [`Store::open_shard`] opens an existing one and never
//! creates it ([`StorageError::ShardNotFound`]):
//!
//! ```
//! use felix_storage::{ReadBound, Record, ShardKey, StorageError, Store, StoreConfig};
//!
//! let root = tempfile::tempdir()?;
//! let key = ShardKey::new("acme", "default", "orders", 0);
//! {
//!     let store = Store::options(root.path()).config(StoreConfig::default()).open()?;
//!     let shard = match store.open_shard(&key) {
//!         Err(StorageError::ShardNotFound { .. }) => store.create_shard(&key)?,
//!         other => other?,
//!     };
//!     shard.append(&[Record::now("a"), Record::now("b")]).wait()?;
//!     store.close()?;
//! }
//! let store = Store::options(root.path()).open()?;
//! let shard = store.open_shard(&key)?;
//! assert_eq!(shard.offsets().written, 2);
//! assert_eq!(shard.read(0, 1 << 20, ReadBound::Committed)?[1].payload, "b");
//! // A store's shard is named by its key, as the broker names it.
//! assert_eq!(shard.label(), "acme/default/orders/0");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A shard directory can also be opened alone with [`Shard::options`] (a
//! tool's, a test's, a Raft log's own directory): the store opens its
//! shards the same way, and everything below holds alike.
//!
//! Each operation exists once, and how to wait for it is chosen on what it
//! returns: [`Shard::append`] returns an [`Append`] to [`wait`](Append::wait)
//! for (blocking), [`submit`](Append::submit) or `.await` (a future, no
//! thread held; any executor polls it, and this crate depends on no
//! runtime), or hand a callback ([`then`](Append::then), run on the sync
//! pool's dispatch thread); [`Shard::wait_durable`] and
//! [`Shard::wait_readable`] return a [`DurableWait`] and a [`TailWait`]
//! that are waited for the same three ways. Syncs are made by a pool of
//! threads the [`Store`] owns for all its shards
//! ([`StoreConfig::sync_threads`]); a shard opened alone has a small pool
//! of its own. Everything is thread-safe.
//!
//! Durability is a per-store policy ([`Durability`]): page cache only, a
//! periodic background sync, or on-commit, where an append is acknowledged
//! once an `fdatasync` covers it and concurrent appenders share syncs (group
//! commit). Reads return only acknowledged records (under on-commit,
//! durable ones), or as far as a [`ReadBound`] says; a consumer follows the
//! tail with [`Shard::wait_readable`], woken by the append or sync that
//! makes records readable. A failed write or sync stops the shard's writes
//! for good: every append it covered gets the I/O error, later calls
//! [`StorageError::Poisoned`]; a failed `fsync` is never retried. Every
//! error says what the caller does next ([`StorageError::kind`],
//! [`ErrorKind`]). The whole contract is in `docs/broker-contract.md`.
//!
//! [`Shard::close`] (or [`Store::close`]) makes everything durable, records
//! the segments in a clean-shutdown file, so the next open checks only the
//! newest segment instead of every sealed one, and releases the shard; a
//! shard dropped without closing is opened as after a crash (every segment
//! inspected).
//!
//! A store manages each shard's life: [`Store::keys`] lists them, and
//! [`Store::close_shard`], [`Store::reopen_shard`] (recovery again, e.g.
//! after a failed sync poisoned the shard) and [`Store::delete_shard`] act
//! on one shard while the others run. [`Store::close`] — and dropping a
//! store, which does the same and logs a failure — closes every shard:
//! everything durable, clean-shutdown files written, every lock released
//! so the root opens again at once; handles to a shard the store closed
//! fail with [`StorageError::ShardClosed`] from then on.
//!
//! Invariants this crate keeps:
//!
//! * No record is acknowledged as durable before the sync its policy
//!   requires has succeeded, and the durable offset never passes what a
//!   successful sync covered.
//! * No read returns a record that was not acknowledged, or one whose write
//!   or sync failed.
//! * A segment's header and directory entry are durable before any record
//!   lives in it; a new segment exists only after the old one is sealed.
//!
//! The names a broker's signatures need are at the top level; the bounds
//! of every setting are in [`limits`], the file-system layer in [`io`],
//! recovery's and scrub's vocabulary in [`recovery`], the generation
//! history in [`epochs`], the directory locks in [`lock`] and the key
//! file's limits in [`key_file`].
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
//! let store = Store::options(root.path()).config(StoreConfig::default()).open()?; // then open
//! # store.close()?;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "metrics"))]
//! # fn main() {}
//! ```
//! Every metric carries the label `shard`: the shard's label, which for a
//! store's shard is its key as the broker names it (`acme/default/orders/0`).
//! See the [`metrics`](mod@metrics) module for each one's exact meaning
//! and how fresh it is (figures that change with every write are published
//! in bulk, at most 64 writes apart).
//!
//! | name | kind | what |
//! |---|---|---|
//! | `felix_storage_fdatasync_seconds` | histogram | each `fdatasync` made for durability |
//! | `felix_storage_append_durable_seconds` | histogram | an on-commit append (waited for, submitted or with a callback: [`Append`]), call to durable |
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
pub use config::{ConfigError, ConfigField, Durability, Preallocation, Retention, StoreConfig};
pub use error::{CopyProblem, ErrorKind, Result, StorageError};
pub use shard::{
    Append, AppendFuture, AppendReceipt, DurableFuture, DurableWait, Offsets, ReadBound,
    ReadRecord, RecordRun, ReplicatedRecord, ReplicatedRun, RetentionOutcome, RunIter, RunRecord,
    ScrubReport, SegmentCopy, SegmentInfo, Shard, ShardOptions, Tail, TailFuture, TailWait,
};
pub use stats::ShardStats;
pub use store::{ShardId, Store, StoreOptions};

// Types that appear in the signatures a broker uses, so that it needs no
// other felix crate to name them; the rest are in the modules below.
pub use bytes::Bytes;
pub use felix_format::ShardKey;
pub use felix_format::log_start::MovedBy;
pub use felix_segment::{Record, TimestampHit};

/// The Rust samples of `docs/broker-contract.md`, compiled as doc tests, so
/// that a sample that no longer type-checks fails `cargo test`.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/broker-contract.md")]
pub struct BrokerContractSamples;

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
/// [`StorageError::Recovery`], and the policy of what an open may repair
/// ([`StoreConfig::repair_policy`]).
///
/// ```
/// use felix_storage::recovery::RepairPolicy;
/// use felix_storage::{Record, Shard, StoreConfig};
///
/// let dir = tempfile::tempdir()?;
/// let config = StoreConfig { repair_policy: RepairPolicy::ChecksumTail, ..StoreConfig::default() };
/// let shard = Shard::options(dir.path()).config(config).open()?;
/// shard.append(&[Record::now("a")]).wait()?;
/// // A fresh shard: nothing found on open, and a clean scrub.
/// assert!(shard.stats().notes.is_empty());
/// assert!(shard.scrub()?.is_clean());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub mod recovery {
    pub use felix_format::time_index::TimeIndexHeader;
    pub use felix_format::{CorruptionKind, CorruptionSite, IndexEntry, SegmentExtent};
    pub use felix_recovery::{
        Action, CleanShutdownUnused, DamageLocation, Finding, FindingContext, IndexProblem, Note,
        RecoveryError, RepairClass, RepairPolicy, ScrubDamage, SegmentScrub, SideFileProblem,
        TemporaryKind, TimeIndexProblem, UnwrittenBlocks,
    };
    // What `IndexProblem::of_load_error` and `TimeIndexProblem::of_load_error` take.
    pub use felix_segment::{IndexLoadError, SegmentError, TimeIndexLoadError};
}

/// The file-system layer every shard's file goes through: [`FileSystem`](io::FileSystem)
/// (the operating system's, or a [`Vfs`](io::Vfs) of one's own, e.g. for fault
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
///
/// ```
/// use felix_storage::epochs::{EpochEntry, LeaderAnswer};
/// use felix_storage::{Record, Shard};
///
/// let dir = tempfile::tempdir()?;
/// let leader = Shard::options(dir.path()).open()?;
/// leader.begin_generation(1)?;
/// leader.append(&[Record::now("a"), Record::now("b")]).wait()?;
/// leader.begin_generation(2)?;
/// assert_eq!(
///     leader.generations().latest(),
///     Some(EpochEntry { generation: 2, start_offset: 2 })
/// );
/// // What a follower whose latest generation is 1 is told.
/// assert!(matches!(
///     leader.end_offset_for(1),
///     Some(LeaderAnswer { generation: 1, end_offset: 2 })
/// ));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub mod epochs {
    pub use felix_epochs::{
        Divergence, EpochEntry, EpochHistory, HistoryError, LeaderAnswer, MAX_EPOCH_ENTRIES,
        Recorded,
    };
}

/// The key file a store writes in each shard directory: its limits, and
/// the error ([`StorageError::KeyTooLong`]'s) that names which part of a
/// key does not fit. That error is the one every side file reports (the
/// key, log-start, clean-shutdown and time index files that recovery's
/// notes name), so what it holds is here too, down to the layout each
/// [`SideFileKind`](key_file::SideFileKind) names.
///
/// ```
/// use felix_storage::key_file::{KeyPart, MAX_KEY_PART_BYTES, SideFileDefect};
/// use felix_storage::{ShardKey, StorageError, Store};
///
/// let root = tempfile::tempdir()?;
/// let store = Store::options(root.path()).open()?;
/// let key = ShardKey::new("acme", "n".repeat(MAX_KEY_PART_BYTES + 1), "orders", 0);
/// match store.create_shard(&key) {
///     Err(StorageError::KeyTooLong { problem, .. }) => assert!(matches!(
///         &problem.defect,
///         SideFileDefect::KeyPart { part: KeyPart::Namespace, .. }
///     )),
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub mod key_file {
    pub use felix_format::clean::CleanEntryProblem;
    pub use felix_format::key_file::{
        KeyPart, KeyPartProblem, MAX_KEY_FILE_BODY_LEN, MAX_KEY_PART_BYTES,
    };
    pub use felix_format::side_file::{
        EmbeddedError, SideFileDefect, SideFileError, SideFileKind, SideFileUnread,
    };
    // The layout a `SideFileKind` names (`SideFileKind::layout`), and what
    // its methods speak in.
    pub use felix_format::side_file::{
        SideFileBody, SideFileChecksum, SideFileFrame, SideFileHeader, SideFileLayout,
        SideFileVersion,
    };
}
