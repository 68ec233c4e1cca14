//! One stream shard: a directory of segments with one writer and any number
//! of concurrent readers.
//!
//! [`Shard`] is a thin facade; the parts behind it are:
//!
//! - `log/` — the log: its writer (appends, rollover, cuts, retention,
//!   replacements, sync and close), write combining (`combine.rs`) and the
//!   view readers share (reads by offset, bounded by `bounds.rs`; scrubs);
//! - `commit/` — group commit (`mod.rs`), where its syncs stand
//!   (`state.rs`), the waiter list (`waiters.rs`), durability waits
//!   (`durable.rs`) and tail waits (`tail.rs`);
//! - `generations.rs` — the generation history and its epochs file;
//! - `replica.rs`, `retention.rs` — what replication and deletions from
//!   the head do with the log and the generations together;
//! - `core.rs` — the parts put together, and the lock order; `shared.rs`
//!   — the settings, counters, metrics and notes they all read;
//! - `options.rs` — the one way to open; `recover.rs` — what an open does
//!   once the directory is locked, in named steps;
//! - `requests.rs` — what appends and waits return: a request the caller
//!   waits on by blocking, `.await` or a callback;
//! - `fetch.rs` — what consumers and followers fetch: the reads and the
//!   tail wait, as the facade offers them; `time_lookup.rs` — finding
//!   records by time.

mod bounds;
mod commit;
mod core;
mod fetch;
mod generations;
mod log;
mod options;
mod recover;
mod replica;
mod requests;
mod retention;
mod shared;
mod time_lookup;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use felix_epochs::{Divergence, EpochHistory, LeaderAnswer, Recorded};
use felix_io::FileSystem;
use felix_segment::Record;

use crate::background_scrub::Scrubber;
use crate::config::StoreConfig;
use crate::error::{Result, StorageError};
use crate::periodic::Maintenance;
use crate::pool::SyncPool;
use crate::stats::ShardStats;

pub(crate) use self::core::Core;

pub use bounds::{Offsets, ReadBound, Tail};
pub use commit::{AppendFuture, DurableFuture, TailFuture};
pub use felix_segment::{RecordRun, RunIter, RunRecord};
pub use log::{ReadRecord, ScrubReport, SegmentCopy, SegmentInfo};
pub(crate) use options::Known;
pub use options::ShardOptions;
pub use replica::{ReplicatedRecord, ReplicatedRun};
pub use requests::{Append, DurableWait, TailWait};
pub use retention::RetentionOutcome;

/// The offsets an append assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendReceipt {
    /// The batch's first offset.
    pub first_offset: u64,
    /// The batch's last offset.
    pub last_offset: u64,
}

/// One stream shard. Thread-safe: share it in an `Arc` (as [`crate::Store`]
/// does) and call it from any thread.
///
/// A broker gets its shards from a store, [`Store::open_shard`](crate::Store::open_shard)
/// and [`Store::create_shard`](crate::Store::create_shard); a shard directory
/// opened alone with [`Shard::options`], as here, is the special case.
///
/// ```
/// use felix_storage::{ReadBound, Record, Shard};
///
/// let dir = tempfile::tempdir()?;
/// let shard = Shard::options(dir.path()).open()?;
/// let receipt = shard.append(&[Record::new(1, "hello"), Record::new(2, "world")]).wait()?;
/// assert_eq!((receipt.first_offset, receipt.last_offset), (0, 1));
/// assert_eq!(shard.offsets().durable, 2);
/// let records = shard.read(0, 1 << 20, ReadBound::Committed)?;
/// assert_eq!(records[1].payload, "world");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// After [`Shard::close`] every call that can fail fails with
/// [`StorageError::ShardClosed`]. Dropping a shard without closing it stops its
/// threads and releases its lock without syncing: the next open runs
/// recovery as after a crash (nothing acknowledged is lost).
#[derive(Debug)]
pub struct Shard {
    core: Arc<Core>,
    /// The shard's own thread for periodic syncs and retention, when it
    /// has one (a store's shards use the store's).
    maintenance: Option<Maintenance>,
    /// The shard's own background scrub, when configured (a store's
    /// shards use the store's).
    scrubber: Option<Scrubber>,
    /// The shard's own sync pool, when opened alone (a store's shards use
    /// the store's).
    own_pool: Option<SyncPool>,
}

impl Drop for Shard {
    /// Stops the shard's threads; nothing is synced here (call
    /// [`Shard::close`] or [`Shard::sync`], or close the store, for that).
    /// Every completion still pending fails with [`StorageError::ShardClosed`].
    fn drop(&mut self) {
        self.stop_threads();
        self.core.commit().stop();
        if let Some(pool) = &self.own_pool {
            pool.shutdown();
        }
    }
}

impl Shard {
    /// Options for opening (or creating) the shard directory `dir`; see
    /// [`ShardOptions`] for each option and its default, and
    /// [`ShardOptions::open`] for what opening does.
    ///
    /// This opens a shard directory alone (a tool, a test, a Raft log's own
    /// directory), the special case: a broker gets its shards from a store,
    /// [`Store::open_shard`](crate::Store::open_shard) and
    /// [`Store::create_shard`](crate::Store::create_shard).
    ///
    /// ```
    /// use felix_storage::Shard;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// assert_eq!(shard.offsets().written, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn options(dir: impl Into<PathBuf>) -> ShardOptions {
        ShardOptions::new(dir.into())
    }

    fn from_parts(
        core: Arc<Core>,
        maintenance: Option<Maintenance>,
        scrubber: Option<Scrubber>,
        own_pool: Option<SyncPool>,
    ) -> Self {
        Self {
            core,
            maintenance,
            scrubber,
            own_pool,
        }
    }

    /// The shard's state, for the store's background threads.
    pub(crate) fn shared_core(&self) -> &Arc<Core> {
        &self.core
    }

    /// Stops the shard's own background threads (outside every lock: they
    /// may be waiting for one).
    fn stop_threads(&self) {
        if let Some(maintenance) = &self.maintenance {
            maintenance.stop();
        }
        if let Some(scrubber) = &self.scrubber {
            scrubber.stop();
        }
    }

    #[cfg(test)]
    pub(crate) fn core(&self) -> &Core {
        &self.core
    }

    /// The shard's label, which its errors, metrics and log lines carry: a
    /// store's shard is labelled by its key as the broker names it
    /// ([`ShardKey`](crate::ShardKey)'s `Display`, e.g.
    /// `acme/default/orders/0`); a shard opened alone by its directory's
    /// name, unless opened with another ([`ShardOptions::label`]).
    ///
    /// ```
    /// use felix_storage::{Record, ShardKey, StorageError, Store};
    ///
    /// let root = tempfile::tempdir()?;
    /// let store = Store::options(root.path()).open()?;
    /// let shard = store.create_shard(&ShardKey::new("acme", "default", "orders", 0))?;
    /// assert_eq!(shard.label(), "acme/default/orders/0");
    /// let err = shard.append(&[]).wait().unwrap_err();
    /// assert_eq!(err.to_string(), "shard acme/default/orders/0: an append needs at least one record");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn label(&self) -> &str {
        self.core.label()
    }

    /// The shard directory.
    pub fn dir(&self) -> &Path {
        self.core.dir()
    }

    /// The configuration the shard was opened with (a store's shards have
    /// the store's).
    ///
    /// ```
    /// use felix_storage::{Durability, Shard, StoreConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let config = StoreConfig { durability: Durability::None, ..StoreConfig::default() };
    /// let shard = Shard::options(dir.path()).config(config).open()?;
    /// assert_eq!(shard.config().durability, Durability::None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn config(&self) -> &StoreConfig {
        self.core.config()
    }

    /// The file system the shard's files are on, for a layer above that
    /// keeps a file of its own in the shard directory (as felix-raft does).
    pub fn file_system(&self) -> &FileSystem {
        self.core.fs()
    }

    /// The base, readable, written and durable offsets, as one consistent
    /// snapshot.
    ///
    /// ```
    /// use felix_storage::{Durability, Offsets, Record, Shard, StoreConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let config = StoreConfig { durability: Durability::OnCommit, ..StoreConfig::default() };
    /// let shard = Shard::options(dir.path()).config(config).open()?;
    /// shard.append(&[Record::new(1, "not yet durable")]).written()?;
    /// // Written, but under OnCommit readable only once durable.
    /// assert_eq!(shard.offsets(), Offsets { base: 0, readable: 0, written: 1, durable: 0 });
    /// shard.wait_durable(1).wait()?;
    /// assert_eq!(shard.offsets(), Offsets { base: 0, readable: 1, written: 1, durable: 1 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn offsets(&self) -> Offsets {
        self.core.offsets()
    }

    /// The failure that stopped writes, if any.
    pub fn poisoned(&self) -> Option<&Arc<StorageError>> {
        self.core.commit().poisoned()
    }

    /// The shard's segments in offset order, the active one last.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        self.core.segments()
    }

    /// A snapshot of the shard's counters.
    pub fn stats(&self) -> ShardStats {
        self.core.stats()
    }

    /// An append of `records`, a batch given contiguous offsets and written
    /// in one `write`: nothing happens until the caller picks how to wait
    /// for it — [`Append::wait`] blocks until it is acknowledged (under
    /// [`Durability::OnCommit`](crate::Durability::OnCommit), once an
    /// `fdatasync` covers it), [`Append::written`] only until it is
    /// written, [`Append::submit`] (or `.await`) returns a future at once,
    /// [`Append::then`] runs a callback; [`Append::fail_fast`] fails
    /// instead of waiting when the appends in flight are at their bound.
    /// See [`Append`] for what each guarantees.
    ///
    /// ```
    /// use felix_storage::{Record, Shard, StorageError};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// let receipt = shard.append(&[Record::new(1, "a"), Record::new(2, "b")]).wait()?;
    /// assert_eq!((receipt.first_offset, receipt.last_offset), (0, 1));
    /// let err = shard.append(&[]).wait().unwrap_err();
    /// assert!(matches!(err, StorageError::EmptyBatch { .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append<'a>(&'a self, records: &'a [Record]) -> Append<'a> {
        Append::new(self, records)
    }

    /// A wait until every record below `offset` is durable (offsets beyond
    /// what was appended are clamped to it): block with
    /// [`DurableWait::wait`], `.await` it, or pass a callback to
    /// [`DurableWait::then`].
    ///
    /// Group commit: the sync pool syncs the shard back to back while
    /// appends continue, and each sync wakes every waiter it covered, so N
    /// concurrent appenders cost far fewer than N syncs.
    ///
    /// ```
    /// use felix_storage::{Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// let receipt = shard.append(&[Record::now("a")]).written()?;
    /// shard.wait_durable(receipt.last_offset + 1).wait()?;
    /// assert_eq!(shard.offsets().durable, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_durable(&self, offset: u64) -> DurableWait<'_> {
        DurableWait::new(self, offset)
    }

    /// Makes everything written so far durable, and brings the active
    /// segment's index file up to date (it may otherwise lag until the
    /// segment is sealed).
    pub fn sync(&self) -> Result<()> {
        self.core.sync()
    }

    /// Closes the shard: everything written becomes durable, the active
    /// segment's index is brought up to date, a clean-shutdown file records
    /// the segments (so that the next open takes the sealed ones as listed
    /// instead of opening each: a shard of 10,000 segments opens in a few
    /// milliseconds; see docs/performance.md), the shard's threads stop and
    /// the directory's lock is released, so the directory can be opened
    /// again at once, in this process or another.
    ///
    /// Afterwards every call that can fail, on any handle to this shard,
    /// fails with [`StorageError::ShardClosed`], and waiters (appenders, tail
    /// followers) wake to it. The shard is closed even when this fails
    /// (when it was poisoned, or the sync or the clean-shutdown file
    /// failed): the failure is returned, and the next open runs recovery.
    ///
    /// ```
    /// use felix_storage::{ReadBound, Record, Shard, StorageError};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// shard.append(&[Record::new(1, "kept")]).wait()?;
    /// shard.close()?;
    /// assert!(matches!(shard.append(&[Record::new(2, "late")]).wait(), Err(StorageError::ShardClosed { .. })));
    /// let reopened = Shard::options(dir.path()).open()?;
    /// assert_eq!(reopened.read(0, 1 << 20, ReadBound::Committed)?[0].payload, "kept");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn close(&self) -> Result<()> {
        // First, and outside every lock: the thread may be waiting for one.
        self.stop_threads();
        let closed = self.core.close();
        // Pending callbacks run before this returns.
        if let Some(pool) = &self.own_pool {
            pool.shutdown();
        }
        closed
    }

    /// [`Shard::close`] as a store closes its shards: a shard already closed
    /// is left as it is.
    pub(crate) fn close_for_store(&self) -> Result<()> {
        self.stop_threads();
        self.core.close_for_store()
    }

    /// Applies the configured retention now: deletes sealed segments from
    /// the head, oldest first, while they lie wholly below the log start,
    /// the shard is over
    /// [`Retention::max_bytes`](crate::Retention::max_bytes), or the
    /// segment's largest record timestamp is older than
    /// [`Retention::max_age`](crate::Retention::max_age) by the shard's
    /// clock. The active segment is never deleted. The directory is synced
    /// after unlinking and the generation history pruned; reads below the
    /// new base are [`StorageError::Trimmed`].
    pub fn apply_retention(&self) -> Result<RetentionOutcome> {
        self.core.check_open()?;
        self.core.apply_retention()
    }

    /// Reads every sealed segment in full, checking every record checksum,
    /// and reports each damaged record with its site (see [`ScrubReport`]):
    /// the rot an open does not look for (an open checks sealed segments'
    /// headers, indexes and tails, not their payloads), found before a
    /// reader needs the records.
    ///
    /// Never modifies a file and never blocks appends or reads: it takes no
    /// writer lock and reads through descriptors of its own, at full speed
    /// (a store's background scrub, [`StoreConfig::scrub_bytes_per_second`],
    /// paces itself). The active segment is not scrubbed: an open scans the
    /// newest segment in full. Scrubbed bytes and damage are counted in
    /// [`ShardStats`]. What to do with damage:
    /// [`Shard::replace_sealed_segment`] with a replica's copy.
    ///
    /// [`StoreConfig::scrub_bytes_per_second`]: crate::StoreConfig::scrub_bytes_per_second
    ///
    /// ```
    /// use felix_storage::{Record, Shard, StoreConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let config = StoreConfig { segment_size_bytes: 100, ..StoreConfig::default() };
    /// let shard = Shard::options(dir.path()).config(config).open()?;
    /// for i in 0..10 {
    ///     shard.append(&[Record::new(i, vec![7u8; 20])]).wait()?;
    /// }
    /// let report = shard.scrub()?;
    /// assert!(report.is_clean() && report.finished);
    /// assert_eq!(report.segments.len(), shard.segments().len() - 1);
    /// assert_eq!(shard.stats().scrubbed_bytes, report.bytes());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scrub(&self) -> Result<ScrubReport> {
        self.core.check_open()?;
        self.core
            .log()
            .scrub(&mut |_| std::ops::ControlFlow::Continue(()))
    }

    /// Replaces sealed segment `id` with `copy`, a verified copy of its
    /// records (fetched from a replica): what a broker does with a segment
    /// a scrub or a read found damaged. Returns the segment's new extent.
    ///
    /// The copy is written to a temporary beside the segment and synced,
    /// then read back and checked in full — its header, every record's
    /// checksums, the same base offset and next offset as the segment —
    /// and refused with [`StorageError::CopyRejected`] (the segment left as
    /// it was, the temporary removed) when anything differs. Only then is it
    /// renamed over the segment (under the writer lock, held for the rename
    /// and the directory sync, not for the copy's check) and its index
    /// rebuilt. A power loss leaves the old segment or the new one; readers
    /// see one or the other whole, never a mix. A failed sync of the
    /// directory after the rename stops the shard for writes, as any failed
    /// sync does (it is never retried); reads go on. A segment that is not
    /// sealed (the active one, or one retention deleted) is
    /// [`StorageError::NotSealed`]. A segment a truncation made active
    /// again while its copy was checked (and a roll may have sealed anew
    /// with other records) is not replaced:
    /// [`CopyProblem::SegmentChanged`](crate::CopyProblem::SegmentChanged).
    /// Replacements of one shard run one at a time.
    pub fn replace_sealed_segment(
        &self,
        id: u64,
        copy: &SegmentCopy,
    ) -> Result<felix_format::SegmentExtent> {
        self.core.check_open()?;
        self.core.log().replace_sealed_segment(id, copy)
    }

    /// Appends records copied from a leader. The first must have exactly
    /// the next offset ([`Offsets::written`]) and the rest follow contiguously, and their
    /// generations must not go backwards (from the history's latest, or
    /// within the batch); anything else is rejected before a byte is
    /// written. Where a record's generation differs from the latest one
    /// recorded, the boundary is recorded (and the epochs file stored)
    /// before the record is written, so the follower's history answers
    /// [`Shard::end_offset_for`] as the leader's would. Durability follows
    /// the policy, as for [`Shard::append`].
    ///
    /// ```
    /// use felix_storage::{ReadBound, Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let leader = Shard::options(dir.path().join("leader")).open()?;
    /// let follower = Shard::options(dir.path().join("follower")).open()?;
    /// leader.begin_generation(1)?;
    /// leader.append(&[Record::new(1, "a")]).wait()?;
    /// leader.begin_generation(2)?;
    /// leader.append(&[Record::new(2, "b")]).wait()?;
    ///
    /// let fetched = leader.read_replicated(follower.offsets().written, 1 << 20, ReadBound::Written)?;
    /// follower.append_replicated(&fetched)?;
    /// assert_eq!(follower.generations(), leader.generations());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append_replicated(&self, records: &[ReplicatedRecord]) -> Result<AppendReceipt> {
        self.core.check_open()?;
        self.core.append_replicated(records)
    }

    /// One step of a follower's reconciliation with a new leader, under the
    /// writer lock so it cannot race appends: from the leader's answer about
    /// this shard's latest generation (the leader's
    /// [`Shard::end_offset_for`]), finds where the logs part
    /// (where the two generation histories first disagree), truncates the log there and cuts
    /// the generation history to match. Returns where it truncated; on
    /// [`Divergence::AskAgain`] ask the leader about the new latest
    /// generation and call again. A divergence below the base offset is
    /// [`StorageError::TruncateBelowBase`] with nothing changed (the
    /// follower must [`Shard::reset_to`] the leader's log start).
    ///
    /// ```
    /// use felix_storage::epochs::Divergence;
    /// use felix_storage::{ReadBound, Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let leader = Shard::options(dir.path().join("leader")).open()?;
    /// let follower = Shard::options(dir.path().join("follower")).open()?;
    /// leader.begin_generation(1)?;
    /// leader.append(&[Record::new(1, "a")]).wait()?;
    /// follower.append_replicated(&leader.read_replicated(0, 1 << 20, ReadBound::Written)?)?;
    /// // The follower leads generation 2 briefly, writing what nobody copies...
    /// follower.begin_generation(2)?;
    /// follower.append(&[Record::new(2, "lost")]).wait()?;
    /// // ...while the leader goes on in generation 3.
    /// leader.begin_generation(3)?;
    /// leader.append(&[Record::new(3, "b")]).wait()?;
    ///
    /// loop {
    ///     let latest = follower.generations().latest().expect("a history").generation;
    ///     let answer = leader.end_offset_for(latest).expect("the leader has a history");
    ///     match follower.reconcile(answer)? {
    ///         Divergence::AskAgain { .. } => continue,
    ///         done => {
    ///             assert_eq!(done.truncate_to(), 1);
    ///             break;
    ///         }
    ///     }
    /// }
    /// let missing = leader.read_replicated(follower.offsets().written, 1 << 20, ReadBound::Written)?;
    /// follower.append_replicated(&missing)?;
    /// assert_eq!(follower.read(1, 1 << 20, ReadBound::Committed)?[0].payload, "b");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reconcile(&self, answer: LeaderAnswer) -> Result<Divergence> {
        self.core.check_open()?;
        self.core.reconcile(answer)
    }

    /// Drops every record at or above `offset` (a follower's log diverged
    /// from its new leader's), across segments.
    ///
    /// Segments wholly above `offset` are removed newest first, then the
    /// segment holding `offset` is cut and synced, so a crash midway leaves
    /// a prefix of the old log that opens cleanly. Indexes, the epochs file
    /// and the durable offset follow. Below the base offset (the log start) is
    /// [`StorageError::TruncateBelowBase`]; at or past the next offset
    /// nothing happens.
    pub fn truncate_to(&self, offset: u64) -> Result<()> {
        self.core.check_open()?;
        self.core.truncate_to(offset)
    }

    /// Discards the whole log and begins again at `offset`: a replica told
    /// to start over from the leader's log start, or a Raft log that purges
    /// past its last entry or installs a snapshot. The next append gets
    /// `offset`, and [`Shard::offsets`]' `base` is `offset`.
    ///
    /// The new start is recorded durably first, in the `log-start` file
    /// (naming the id of the fresh segment to come); then the segments are
    /// removed and a fresh one is created at `offset`. An open after a
    /// crash anywhere in between finishes the reset, so a crash leaves the
    /// old log or the new one. The generation history is emptied.
    pub fn reset_to(&self, offset: u64) -> Result<()> {
        self.core.check_open()?;
        self.core.reset_to(offset)
    }

    /// Records that `generation` begins at the current next offset (a new
    /// leader's term begins at its log end) and stores the epochs file.
    pub fn begin_generation(&self, generation: u64) -> Result<Recorded> {
        self.core.check_open()?;
        self.core.begin_generation(generation)
    }

    /// A copy of the generation history.
    pub fn generations(&self) -> EpochHistory {
        self.core.generations().history()
    }

    /// Which generation wrote the record at `offset`, if the history says.
    pub fn generation_at(&self, offset: u64) -> Option<u64> {
        self.core.generations().generation_at(offset)
    }

    /// The leader's answer to a follower asking where `generation` ended
    /// (see [`EpochHistory::end_offset_for`]), to be passed to the
    /// follower's [`Shard::reconcile`].
    pub fn end_offset_for(&self, generation: u64) -> Option<LeaderAnswer> {
        self.core.end_offset_for(generation)
    }
}
