//! How a store lays out and protects its shards, and the range of every
//! setting (checked at open by [`StoreConfig::validate`]).

use std::time::Duration;

use felix_recovery::RepairPolicy;

mod validate;

pub use validate::{
    ConfigError, ConfigField, MAX_APPENDS_IN_FLIGHT, MAX_INDEX_SPACING_BYTES, MAX_INTERVAL,
    MAX_SEGMENT_SIZE_BYTES, MAX_SYNC_THREADS, MIN_INTERVAL, MIN_SCRUB_BYTES_PER_SECOND,
    MIN_SEGMENT_SIZE_BYTES, MIN_WRITEBACK_BYTES,
};

/// The default of [`StoreConfig::sync_thread_keep_alive`]: ten seconds,
/// as long as tokio's blocking pool keeps an idle thread. Starting a
/// thread costs tens of microseconds, so a pool that shrinks after ten
/// idle seconds pays nothing noticeable when syncs resume.
pub const DEFAULT_SYNC_THREAD_KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The default of [`StoreConfig::max_appends_in_flight`].
pub const DEFAULT_APPENDS_IN_FLIGHT: usize = 4096;

/// The default of [`StoreConfig::sync_threads`]: sixteen times the
/// available parallelism, at least 16 and at most 64. A worker blocked in
/// `fdatasync` uses no CPU, and the device overlaps syncs of different
/// files: on the 2-core development machine threads each syncing a file
/// of their own (`felix-bench shards-commit limit --threads N`) gained
/// up to about 32 in flight, so a pool needs about that many syncs in
/// flight to use the device. Appends spread over 1,000 shards, 64 in
/// flight from one thread (`shards-commit felix --sync-threads N`), were
/// faster with 32 workers than with 16, and no faster with 64 (measured
/// in docs/performance.md, "The run read and many shards"). Workers start
/// only when every one running is busy, so a store whose shards sync one
/// at a time runs one. Asked once per process: the standard library reads the
/// cgroup's files each time, and every `StoreConfig::default()` (each
/// shard's options begin with one) would pay for it.
pub fn default_sync_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        (16 * cores).clamp(16, 64)
    })
}

/// When appended records become durable, and so when a read sees them
/// (see [`ReadBound::Committed`](crate::ReadBound::Committed)).
///
/// ```
/// use std::time::Duration;
/// use felix_storage::{Durability, ReadBound, Record, Shard, StoreConfig};
///
/// let dir = tempfile::tempdir()?;
/// // Page cache only, synced by the shard's own thread every 50 ms.
/// let config = StoreConfig {
///     durability: Durability::Periodic(Duration::from_millis(50)),
///     ..StoreConfig::default()
/// };
/// let shard = Shard::options(dir.path()).config(config).open()?;
/// shard.append(&[Record::now("a")]).wait()?;
/// // Acknowledged, so readable, before any sync:
/// assert_eq!(shard.read(0, 1 << 20, ReadBound::Committed)?.len(), 1);
/// shard.wait_durable(1).wait()?; // or wait for the background sync
/// assert_eq!(shard.offsets().durable, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Records live in the page cache until a segment is sealed, the caller
    /// syncs ([`Shard::sync`](crate::Shard::sync)), or writeback
    /// ([`StoreConfig::writeback_bytes`]) syncs: a power loss may lose
    /// them, a process crash does not. An append is acknowledged once
    /// written.
    None,
    /// As [`Durability::None`], and a background thread syncs the shard at
    /// this interval: the store's thread for a store's shards, the shard's
    /// own for a shard opened alone. The interval is 1 ms to 24 h.
    Periodic(Duration),
    /// `append` returns only once an `fdatasync` covers the batch, and
    /// readers see a record only once it is durable. Concurrent appenders
    /// share writes and syncs (group commit).
    OnCommit,
}

/// When sealed segments are deleted from the head of a shard.
///
/// Retention deletes whole sealed segments only, oldest first, and never
/// the active one. A pass runs when
/// [`Shard::apply_retention`](crate::Shard::apply_retention) is called and,
/// with [`Retention::interval`] set, on a background thread.
///
/// ```
/// use std::time::Duration;
/// use felix_storage::{Retention, StoreConfig};
///
/// // Keep about 10 GiB and at most a week, checked every minute.
/// let config = StoreConfig {
///     retention: Retention {
///         max_bytes: Some(10 << 30),
///         max_age: Some(Duration::from_secs(7 * 24 * 3600)),
///         interval: Some(Duration::from_secs(60)),
///     },
///     ..StoreConfig::default()
/// };
/// assert_eq!(config.validate(), Ok(()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Retention {
    /// Keep the shard at or below this many bytes of segment files (whole
    /// segments only: the active segment is kept even when it alone is
    /// larger). Default `None`: no size limit. At least 1 byte; no maximum.
    pub max_bytes: Option<u64>,
    /// Delete a sealed segment once every record in it is older than this:
    /// once its *largest* record timestamp is, as Kafka's `retention.ms`
    /// measures a segment. Timestamps are the producers' and need not
    /// ascend, so this is the segment's maximum, not its last record's: a
    /// segment whose last record carries an old clock but which holds a
    /// recent record is kept. The maximum comes from the segment's time
    /// index (written when the segment was sealed, or built from its record
    /// headers on first need; see
    /// [`SegmentInfo::max_timestamp_micros`](crate::SegmentInfo::max_timestamp_micros)).
    /// The age is measured on the records' own timestamps
    /// ([`Record::timestamp_micros`](crate::Record::timestamp_micros), the
    /// time the producer stamped, e.g. with
    /// [`Record::now`](crate::Record::now)) against the shard's clock
    /// ([`ShardOptions::clock`](crate::ShardOptions::clock), the wall clock
    /// by default), not on file times; the active segment is never deleted.
    /// Default `None`: no age limit. At least 1 µs; no maximum.
    pub max_age: Option<Duration>,
    /// Run retention at this interval on a background thread: the store's
    /// thread for a store's shards, the shard's own for a shard opened
    /// alone. Requires `max_bytes` or `max_age` (an interval with nothing
    /// to apply is refused). Default `None`: only explicit calls. 1 ms to
    /// 24 h.
    pub interval: Option<Duration>,
}

/// How disk space is reserved for a segment ahead of its writes.
///
/// Reserving (`fallocate` with `FALLOC_FL_KEEP_SIZE`) keeps a segment's
/// blocks together and takes block allocation off the append path; sealing
/// a segment gives back whatever was reserved past its last record. Where
/// the file system cannot reserve, files simply grow as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Preallocation {
    /// Nothing reserved: the file grows with every write.
    Off,
    /// Reserve ahead of the write position in steps that grow with the
    /// segment: 32 KiB past the end to begin with, then as much again as
    /// the segment holds, at most 64 MiB at a time, and never past
    /// `segment_size_bytes` (a batch larger than that gets what it needs).
    /// An idle shard holding one small record thus occupies about 50 KiB,
    /// so ten thousand of them fit in well under 1 GiB of disk. The default.
    #[default]
    Stepped,
    /// Reserve the whole `segment_size_bytes` when a segment is created:
    /// each shard occupies a whole segment of disk from its first record
    /// on (1,000 shards of 1 GiB segments: 1 TB). Kept for comparison.
    WholeSegment,
}

/// Configuration of every shard a store (or [`Shard::options`]) opens.
///
/// Every field is checked at open ([`StoreConfig::validate`]); each field's
/// documentation states its default and its range.
///
/// ```
/// use felix_storage::{Durability, StoreConfig};
/// let config = StoreConfig { durability: Durability::OnCommit, ..StoreConfig::default() };
/// assert_eq!(config.segment_size_bytes, 1 << 30);
/// assert_eq!(config.validate(), Ok(()));
/// ```
///
/// [`Shard::options`]: crate::Shard::options
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreConfig {
    /// A batch that would take the active segment past this size goes to a
    /// new segment. A batch is never split, so a batch (or a record) larger
    /// than this goes into a segment of its own, which is then larger than
    /// this. Default 1 GiB. At least
    /// [`MIN_SEGMENT_SIZE_BYTES`](crate::limits::MIN_SEGMENT_SIZE_BYTES) (the
    /// segment header plus one record header); at most
    /// [`MAX_SEGMENT_SIZE_BYTES`](crate::limits::MAX_SEGMENT_SIZE_BYTES), and no
    /// more than the file system holding the shard can store.
    pub segment_size_bytes: u64,
    /// Spacing of sparse index entries: one for a segment's first record,
    /// then one every this many bytes of records. Smaller makes point reads
    /// cheaper and indexes larger. Default
    /// [`DEFAULT_INDEX_SPACING_BYTES`](crate::limits::DEFAULT_INDEX_SPACING_BYTES)
    /// (2 KiB). 1 byte to
    /// [`MAX_INDEX_SPACING_BYTES`](crate::limits::MAX_INDEX_SPACING_BYTES) (1 GiB).
    pub index_spacing_bytes: u64,
    /// How disk is reserved ahead of writes. Default
    /// [`Preallocation::Stepped`].
    pub preallocate: Preallocation,
    /// When appends become durable. Default [`Durability::OnCommit`].
    pub durability: Durability,
    /// Sync in the background after every this many bytes appended without
    /// a sync of their own (every append under [`Durability::None`] and
    /// [`Durability::Periodic`]; [`Append::written`] under
    /// [`Durability::OnCommit`]), so dirty data does not pile up: a roll
    /// must make the whole segment durable before the next one exists, and
    /// without this a 1 GiB segment's seal stalls appends for the time it
    /// takes to write 1 GiB. Default 64 MiB. `None`: never. At least 4 KiB;
    /// no maximum.
    ///
    /// [`Append::written`]: crate::Append::written
    pub writeback_bytes: Option<u64>,
    /// When old segments are deleted. Default: never ([`Retention::default`]).
    pub retention: Retention,
    /// Which damage an open may repair. Default [`RepairPolicy::Default`]:
    /// only what is provably an unfinished write; with
    /// [`RepairPolicy::ChecksumTail`] an open also truncates damage that
    /// may be rot of an acknowledged record when it is confined to the
    /// newest segment's tail.
    pub repair_policy: RepairPolicy,
    /// Scrub the sealed segments in the background at this many bytes a
    /// second: one thread (the store's for a store's shards, the shard's
    /// own for a shard opened alone) reads every sealed segment of every
    /// shard in turn with [`Shard::scrub`]'s checks, sleeping between
    /// 1 MiB chunks to hold the rate, and begins again when it is through
    /// (at most one pass a second). Damage is logged and counted in
    /// [`ShardStats`](crate::ShardStats) (and the metrics). Default `None`:
    /// no background scrub. At least
    /// [`MIN_SCRUB_BYTES_PER_SECOND`](crate::limits::MIN_SCRUB_BYTES_PER_SECOND)
    /// (4 KiB/s); no maximum.
    ///
    /// [`Shard::scrub`]: crate::Shard::scrub
    pub scrub_bytes_per_second: Option<u64>,
    /// The most threads that run `fdatasync`s for durability. A
    /// [`Store`](crate::Store) runs one pool of them for all its shards
    /// (threads start as syncs are needed, up to this many); a shard
    /// opened alone has a pool of its own with the same bound, of which it
    /// starts one thread, since a shard has one sync in flight at a time.
    /// Completion callbacks run on one more thread of the pool, started on
    /// the first callback. Default [`default_sync_threads`]: sixteen
    /// times the available parallelism, at least 16 and at most 64 (its
    /// doc says why, with the figures). 1 to
    /// [`MAX_SYNC_THREADS`].
    ///
    /// A worker starts only when a sync is queued with no worker idle and
    /// none about to come back for it (the worker finishing the same
    /// shard's last sync), so the pool holds about as many workers as
    /// syncs are in flight; an idle worker retires after
    /// [`StoreConfig::sync_thread_keep_alive`].
    pub sync_threads: usize,
    /// How long a sync worker waits idle for a sync before it retires:
    /// the pool shrinks back to what the load needs, down to no worker,
    /// and starts workers again as syncs are needed. Default
    /// [`DEFAULT_SYNC_THREAD_KEEP_ALIVE`] (10 s).
    /// [`MIN_INTERVAL`] (1 ms) to [`MAX_INTERVAL`] (24 h).
    pub sync_thread_keep_alive: Duration,
    /// The most appends of one shard whose completion (a future or a
    /// callback: [`Append::submit`], `.await`, [`Append::then`]) may be
    /// pending at once. Past it, those wait for a completion to free a
    /// place, and after [`Append::fail_fast`] they fail at once with
    /// [`StorageError::InFlightFull`], having written nothing.
    /// A completion gives its place back before it is seen (the future is
    /// ready, the callback runs), so an append made after it finds that
    /// place free. Blocking appends are not counted: each holds its thread. Default
    /// [`DEFAULT_APPENDS_IN_FLIGHT`] (4,096). 1 to
    /// [`MAX_APPENDS_IN_FLIGHT`].
    ///
    /// [`Append::submit`]: crate::Append::submit
    /// [`Append::then`]: crate::Append::then
    /// [`Append::fail_fast`]: crate::Append::fail_fast
    /// [`StorageError::InFlightFull`]: crate::StorageError::InFlightFull
    pub max_appends_in_flight: usize,
    /// A [`Store`](crate::Store) keeps at most this many shards open: to
    /// open one more it first closes the least recently used shard that no
    /// caller holds a handle to (as [`Store::close_shard`] does: durable,
    /// its clean-shutdown record left true, its descriptors and lock
    /// released), and [`Store::open_shard`] opens it again when asked.
    /// Shards callers hold are never closed this way, so the store holds
    /// more while callers hold more. An open shard holds 4 descriptors (its
    /// directory's lock, the older releases' lock file, the active segment
    /// and its index), plus one per sealed segment a read has opened and
    /// while a sync or roll runs a few more. Callers opening shards at once
    /// stay within the budget together (each closes the idle shards it
    /// makes room by before it opens its own, and a shard being closed
    /// counts until its close returns) as long as they are fewer than it:
    /// no open waits for room. Ignored by a shard opened on its own.
    /// Default 1,024. At least 1; no maximum.
    ///
    /// [`Store::close_shard`]: crate::Store::close_shard
    /// [`Store::open_shard`]: crate::Store::open_shard
    pub max_open_shards: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            segment_size_bytes: 1 << 30,
            index_spacing_bytes: felix_segment::DEFAULT_INDEX_SPACING_BYTES,
            preallocate: Preallocation::Stepped,
            durability: Durability::OnCommit,
            writeback_bytes: Some(64 << 20),
            retention: Retention::default(),
            repair_policy: RepairPolicy::Default,
            scrub_bytes_per_second: None,
            sync_threads: default_sync_threads(),
            sync_thread_keep_alive: DEFAULT_SYNC_THREAD_KEEP_ALIVE,
            max_appends_in_flight: DEFAULT_APPENDS_IN_FLIGHT,
            max_open_shards: 1_024,
        }
    }
}
