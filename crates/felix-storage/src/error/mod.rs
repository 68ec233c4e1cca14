//! Errors of the storage API.

use std::path::PathBuf;
use std::sync::Arc;

use felix_epochs::HistoryError;
use felix_format::ShardKey;
use felix_format::side_file::SideFileError;
use felix_io::IoError;
use felix_recovery::RecoveryError;
use felix_segment::SegmentError;

use crate::config::ConfigError;

mod kind;

pub use kind::ErrorKind;

/// What went wrong in a store or shard operation.
///
/// `Clone`, so that one failure can be both the failing call's error, the
/// error of every other append it covered, and a stopped shard's reason.
///
/// A consumer tells the cases it handles apart by variant:
///
/// ```
/// use felix_storage::{ReadBound, Shard, StorageError};
///
/// fn consume(shard: &Shard, from: u64) -> Result<u64, StorageError> {
///     match shard.read(from, 1 << 20, ReadBound::Committed) {
///         Ok(records) => Ok(records.last().map_or(from, |r| r.offset + 1)),
///         // Retention removed it: resume where the log now begins.
///         Err(StorageError::Trimmed { oldest, .. }) => Ok(oldest),
///         // The shard was closed (by its owner, or its store): stop.
///         Err(err @ StorageError::ShardClosed { .. }) => Err(err),
///         Err(other) => Err(other),
///     }
/// }
///
/// let dir = tempfile::tempdir()?;
/// let shard = Shard::options(dir.path()).open()?;
/// assert_eq!(consume(&shard, 0)?, 0);
/// shard.close()?;
/// assert!(matches!(consume(&shard, 0), Err(StorageError::ShardClosed { .. })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, thiserror::Error)]
pub enum StorageError {
    /// An append was given no records.
    #[error("shard {shard}: an append needs at least one record")]
    EmptyBatch {
        /// The shard.
        shard: Arc<str>,
    },
    /// A payload is over the format's limit; nothing was written.
    #[error(
        "shard {shard}: record {index_in_batch} of the batch has a {len}-byte payload, over the limit of {max} bytes; nothing was written"
    )]
    PayloadTooLarge {
        /// The shard.
        shard: Arc<str>,
        /// Position in the batch.
        index_in_batch: usize,
        /// Its length.
        len: usize,
        /// The limit.
        max: u32,
    },
    /// Appending the batch would give a record an offset past the last one
    /// the format can hold: a record's offset is below `u64::MAX`, so that
    /// the offset after it can be named. Nothing was written.
    #[error(
        "shard {shard}: a batch of {records} record(s) from offset {next_offset} would pass the last offset a record can have ({}); nothing was written",
        u64::MAX - 1
    )]
    OffsetSpaceExhausted {
        /// The shard.
        shard: Arc<str>,
        /// The offset the batch would begin at.
        next_offset: u64,
        /// Records in the batch.
        records: usize,
    },
    /// The active segment is full and its id is the last a segment file can
    /// be named with (`u64::MAX`): no segment can follow it. The roll was
    /// refused before anything changed, so the shard stays as it was and
    /// reopens; appends that fit the active segment still work.
    #[error(
        "shard {shard}: segment {last_id} is full and is the last segment id there is; no segment can follow it, so the append that needed one was refused and nothing was written"
    )]
    SegmentIdsExhausted {
        /// The shard.
        shard: Arc<str>,
        /// The active segment's id.
        last_id: u64,
    },
    /// A read asked for an offset retention (or a replica's start) removed.
    #[error("shard {shard}: offset {requested} is trimmed; the oldest offset is {oldest}")]
    Trimmed {
        /// The shard.
        shard: Arc<str>,
        /// The offset asked for.
        requested: u64,
        /// The oldest offset still held.
        oldest: u64,
    },
    /// A replicated batch does not continue the log exactly.
    #[error(
        "shard {shard}: replicated record {index_in_batch} has offset {found}, expected {expected}"
    )]
    ReplicaOffsetMismatch {
        /// The shard.
        shard: Arc<str>,
        /// Position in the batch.
        index_in_batch: usize,
        /// The offset required there.
        expected: u64,
        /// The offset given.
        found: u64,
    },
    /// A truncation point below the shard's first offset (its log start,
    /// which records deleted before it moved up).
    #[error("shard {shard}: cannot truncate to {requested}, below the oldest offset {oldest}")]
    TruncateBelowBase {
        /// The shard.
        shard: Arc<str>,
        /// The offset asked for.
        requested: u64,
        /// The oldest offset held.
        oldest: u64,
    },
    /// Records were to be deleted before an offset past the end of what a
    /// reader may read (as Kafka refuses a DeleteRecords past the high
    /// watermark). Nothing changed.
    #[error(
        "shard {shard}: cannot delete records before {requested}, past the readable end {readable_end}; nothing changed"
    )]
    DeletePastEnd {
        /// The shard.
        shard: Arc<str>,
        /// The offset asked for.
        requested: u64,
        /// One past the last record a committed read returns.
        readable_end: u64,
    },
    /// [`Shard::replace_sealed_segment`](crate::Shard::replace_sealed_segment)
    /// named a segment that is not one of the shard's sealed segments (the
    /// active segment is never replaced; retention may have deleted it).
    #[error(
        "shard {shard}: segment {segment} is not a sealed segment of the shard; only a sealed segment can be replaced"
    )]
    NotSealed {
        /// The shard.
        shard: Arc<str>,
        /// The segment id asked for.
        segment: u64,
    },
    /// A copy handed to
    /// [`Shard::replace_sealed_segment`](crate::Shard::replace_sealed_segment)
    /// did not verify; the damaged segment was left as it was.
    #[error(
        "shard {shard}: the copy of segment {segment} was refused ({problem}); the segment was left as it was"
    )]
    CopyRejected {
        /// The shard.
        shard: Arc<str>,
        /// The segment the copy was for.
        segment: u64,
        /// What is wrong with the copy.
        problem: CopyProblem,
    },
    /// Another process (or another store in this process) holds the shard.
    #[error("shard directory {} is locked by another writer", dir.display())]
    ShardLocked {
        /// The shard directory.
        dir: PathBuf,
    },
    /// Another store (in this process or another) holds the root: one
    /// store per root, even while all its shards are closed.
    #[error("the store root {} is held by another store", root.display())]
    StoreLocked {
        /// The store's root directory.
        root: PathBuf,
    },
    /// The shard stopped accepting writes after a write or sync failure.
    ///
    /// Every append the failed write or sync covered (one sync may cover
    /// many appends) gets that failure itself, with its operation and path;
    /// every call made after it gets this, whose
    /// [`source`](std::error::Error::source) is that failure, so a reporter
    /// reaches the `io::Error` underneath. Reads still serve every record
    /// that was acknowledged; reopening the shard runs recovery.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use std::error::Error;
    /// use felix_storage::StorageError;
    ///
    /// fn root_os_error(err: &StorageError) -> Option<i32> {
    ///     let mut source: Option<&(dyn Error + 'static)> = Some(err);
    ///     while let Some(e) = source {
    ///         if let Some(io) = e.downcast_ref::<std::io::Error>() {
    ///             return io.raw_os_error();
    ///         }
    ///         source = e.source();
    ///     }
    ///     None
    /// }
    /// # let _ = root_os_error;
    /// ```
    #[error(
        "shard {shard} accepts no more writes: {}; reopening the shard recovers what is durable",
        original.reason()
    )]
    Poisoned {
        /// The shard.
        shard: Arc<str>,
        /// The failure that stopped it.
        #[source]
        original: Arc<StorageError>,
    },
    /// A panic interrupted a write to the shard (in code the shard ran
    /// while it held its writer lock), so what that write left may be half
    /// done: the shard stopped accepting writes. The cause a
    /// [`StorageError::Poisoned`] names; reopening the shard recovers what
    /// is durable.
    #[error("shard {shard}: a panic interrupted a write")]
    WriteInterrupted {
        /// The shard.
        shard: Arc<str>,
    },
    /// The shard was closed for good ([`Shard::close`](crate::Shard::close),
    /// or its store's [`Store::close`], [`Store::close_shard`],
    /// [`Store::reopen_shard`] or [`Store::delete_shard`]): every call on
    /// any of its handles gets this. Open it again (or ask the store for it
    /// again) to go on. An append under way when the close began is not
    /// told this when the close made its records durable (a close syncs
    /// everything written first): it returns its receipt, so an append
    /// told `ShardClosed` was not acknowledged.
    ///
    /// [`Store::close`]: crate::Store::close
    /// [`Store::close_shard`]: crate::Store::close_shard
    /// [`Store::reopen_shard`]: crate::Store::reopen_shard
    /// [`Store::delete_shard`]: crate::Store::delete_shard
    #[error("shard {shard} is closed")]
    ShardClosed {
        /// The shard.
        shard: Arc<str>,
    },
    /// An append that does not wait for room found the shard's appends in
    /// flight at their bound
    /// ([`StoreConfig::max_appends_in_flight`](crate::StoreConfig::max_appends_in_flight)):
    /// nothing was written. Await (or wait for) an earlier completion and
    /// try again.
    #[error(
        "shard {shard}: {limit} appends are already waiting for durability, the most allowed; nothing was written"
    )]
    InFlightFull {
        /// The shard.
        shard: Arc<str>,
        /// The bound.
        limit: usize,
    },
    /// The shard does not exist: [`Store::open_shard`](crate::Store::open_shard)
    /// (or [`Store::delete_shard`](crate::Store::delete_shard)) of a key that
    /// has no shard directory, or a shard directory opened alone that does
    /// not exist while the open was told not to create it
    /// ([`ShardOptions::create_if_missing`](crate::ShardOptions::create_if_missing)).
    /// Nothing was created: a store makes a new shard only by
    /// [`Store::create_shard`](crate::Store::create_shard).
    #[error("shard {shard} does not exist (no directory {})", dir.display())]
    ShardNotFound {
        /// The shard: the key asked for (as [`ShardKey`] displays it), or
        /// the label of a shard opened alone.
        shard: Arc<str>,
        /// The key asked for, when a store looked the shard up by key
        /// (`None` for a shard directory opened alone); boxed, like the
        /// keys below, to keep every `Result` of this crate small.
        key: Option<Box<ShardKey>>,
        /// The directory it would have.
        dir: PathBuf,
    },
    /// A setting is out of its range; nothing was opened or created.
    ///
    /// The message is the [`ConfigError`]'s own, after "invalid
    /// configuration", and there is no [`source`](std::error::Error::source):
    /// the setting's error is a leaf, so a reporter that prints the chain
    /// shows it once.
    #[error("invalid configuration: {0}")]
    InvalidConfig(ConfigError),
    /// A segment operation failed.
    #[error("shard {shard}: {source}")]
    Segment {
        /// The shard.
        shard: Arc<str>,
        /// What failed.
        #[source]
        source: SegmentError,
    },
    /// Opening the shard found damage it may not repair, or failed to read it.
    #[error(transparent)]
    Recovery(#[from] RecoveryError),
    /// The generation history refused a change. The refusal is a leaf
    /// (no I/O underneath): its text is in this message, and it is not
    /// repeated as a [`source`](std::error::Error::source).
    #[error("shard {shard}: {refusal}")]
    Generation {
        /// The shard.
        shard: Arc<str>,
        /// Why.
        refusal: HistoryError,
    },
    /// Writing the epochs file failed.
    #[error("shard {shard}: {source}")]
    Epochs {
        /// The shard.
        shard: Arc<str>,
        /// Why.
        #[source]
        source: IoError,
    },
    /// A store-level file-system call failed, outside any one shard:
    /// creating or listing the store's root, removing a deleted shard's
    /// tombstone, or starting the store's thread.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The store was closed: it opens, creates and deletes no more shards.
    #[error("the store at {} is closed", root.display())]
    StoreClosed {
        /// The store's root.
        root: PathBuf,
    },
    /// [`Store::create_shard`](crate::Store::create_shard) of a key whose
    /// shard directory already exists. Nothing was changed; open it with
    /// [`Store::open_shard`](crate::Store::open_shard).
    #[error("shard {key} already exists ({})", dir.display())]
    AlreadyExists {
        /// The key asked for.
        key: ShardKey,
        /// Its directory.
        dir: PathBuf,
    },
    /// The key file in the directory of the key asked for names another
    /// key: two keys whose directory names collide, or a directory moved
    /// by hand. The shard was not opened (nor deleted).
    #[error(
        "shard directory {} holds the key file of shard {found}, not of {requested}; it was left alone",
        dir.display()
    )]
    KeyFileDisagrees {
        /// The directory.
        dir: PathBuf,
        /// The key asked for (boxed, like the next, to keep every
        /// `Result` of this crate small).
        requested: Box<ShardKey>,
        /// The key its key file names.
        found: Box<ShardKey>,
    },
    /// A text part of the key is longer than a shard's key file can hold
    /// ([`MAX_KEY_PART_BYTES`](crate::key_file::MAX_KEY_PART_BYTES)).
    /// Nothing was created. Which part is too long is in this message, not
    /// repeated as a [`source`](std::error::Error::source).
    #[error("shard {key} cannot be created: {problem}")]
    KeyTooLong {
        /// The key.
        key: ShardKey,
        /// Which part, and its length (boxed, like the keys above, to keep
        /// every `Result` of this crate small).
        problem: Box<SideFileError>,
    },
}

impl StorageError {
    /// What went wrong, without the shard's name in front: how
    /// [`StorageError::Poisoned`] names its cause without repeating itself.
    fn reason(&self) -> String {
        match self {
            Self::Segment { source, .. } => source.to_string(),
            Self::Generation { refusal, .. } => refusal.to_string(),
            Self::Epochs { source, .. } => source.to_string(),
            Self::WriteInterrupted { .. } => "a panic interrupted a write".to_owned(),
            other => other.to_string(),
        }
    }

    /// The I/O error kind at the root of this error, if any (following a
    /// poisoned shard to its original failure), e.g. to recognise a full disk.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            Self::Segment { source, .. } => source.io_kind(),
            Self::Poisoned { original, .. } => original.io_kind(),
            Self::Epochs { source, .. } | Self::Io(source) => Some(source.kind()),
            _ => None,
        }
    }
}

impl From<ConfigError> for StorageError {
    fn from(err: ConfigError) -> Self {
        Self::InvalidConfig(err)
    }
}

/// Shorthand used across this crate.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// Why a copy of a sealed segment was refused (see
/// [`StorageError::CopyRejected`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CopyProblem {
    /// The segment changed while its copy was checked (a truncation made
    /// it active again, and it may have been sealed anew with other
    /// records): the copy, checked against what it was, is not put in.
    #[error("segment {segment} changed while its copy was checked")]
    SegmentChanged {
        /// The segment.
        segment: u64,
    },
    /// The copy's segment header does not decode.
    #[error("its segment header is damaged: {kind}")]
    Header {
        /// What is wrong with it.
        kind: felix_format::CorruptionKind,
    },
    /// The copy begins at another offset than the segment it replaces.
    #[error("it begins at offset {found}, the segment at {expected}")]
    BaseOffset {
        /// The segment's base offset.
        expected: u64,
        /// The copy's.
        found: u64,
    },
    /// The copy's records end at another offset than the segment's.
    #[error("its records end before offset {found}, the segment's before {expected}")]
    NextOffset {
        /// The segment's next offset.
        expected: u64,
        /// The copy's.
        found: u64,
    },
    /// A record of the copy failed a check.
    #[error("{kind} at byte {position}")]
    Damaged {
        /// What is wrong.
        kind: felix_format::CorruptionKind,
        /// Where the damaged record begins in the copy.
        position: u64,
    },
}
