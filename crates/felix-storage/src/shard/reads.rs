//! Reading: by record, by run, as a leader reads for its followers, and
//! waiting for the tail. Every read here is the run read (`log/read.rs`),
//! checked and bounded the same way.

use std::time::Duration;

use super::requests::TailWait;
use super::{ReadBound, ReadRecord, RecordRun, ReplicatedRecord, ReplicatedRun, Shard, Tail};
use crate::error::Result;
#[cfg(doc)]
use crate::error::StorageError;
#[cfg(doc)]
use crate::stats::ShardStats;

impl Shard {
    /// Reads acknowledged records from `from` onwards:
    /// [`Shard::read_bounded`] with [`ReadBound::Committed`].
    ///
    /// ```
    /// use felix_storage::{Record, Retention, Shard, StorageError, StoreConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let config = StoreConfig {
    ///     segment_size_bytes: 100,
    ///     retention: Retention { max_bytes: Some(200), ..Retention::default() },
    ///     ..StoreConfig::default()
    /// };
    /// let shard = Shard::options(dir.path()).config(config).open()?;
    /// for i in 0..10 {
    ///     shard.append(&[Record::new(i, vec![0u8; 20])])?;
    /// }
    /// shard.apply_retention()?;
    /// // What retention removed is `Trimmed`, naming where the log now begins.
    /// match shard.read(0, 1 << 20) {
    ///     Err(StorageError::Trimmed { oldest, .. }) => {
    ///         assert_eq!(oldest, shard.base_offset());
    ///         let records = shard.read(oldest, 1 << 20)?;
    ///         assert_eq!(records[0].offset, oldest);
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(&self, from: u64, max_bytes: u64) -> Result<Vec<ReadRecord>> {
        self.read_bounded(from, max_bytes, ReadBound::Committed)
    }

    /// Reads whole records from `from` onwards, across segments, up to
    /// where `bound` ends when the read begins, until about `max_bytes` of
    /// encoded records (header included) — at least one record if any is
    /// readable at `from`.
    ///
    /// Below the base offset is [`StorageError::Trimmed`]; at or past the
    /// bound's end the result is empty. Every record returned passed its
    /// checksums; reads never see a partial record, nor (under any bound) a
    /// record whose write or sync failed.
    ///
    /// A sealed segment's index file is only a hint. A read misled by a
    /// wrong entry (one pointing at bytes that are no record, or at a record
    /// header embedded in a payload) is retried from an index rebuilt from
    /// the segment's records, which then serves the segment's reads; the
    /// stale entry is noted in [`ShardStats::notes`].
    pub fn read_bounded(
        &self,
        from: u64,
        max_bytes: u64,
        bound: ReadBound,
    ) -> Result<Vec<ReadRecord>> {
        self.core.check_open()?;
        self.core.read(from, max_bytes, bound)
    }

    /// The run read: records from `from` onwards as runs, each one
    /// [`Bytes`](bytes::Bytes) holding the records exactly as they lie in a
    /// segment (28-byte headers and payloads, ready for a socket), one run
    /// per segment the read crosses, up to where `bound` ends when the read
    /// begins and until about `max_bytes` of encoded records — at least one
    /// record if any is readable at `from`, and past the first never more
    /// than the budget.
    ///
    /// Every record is checked exactly as [`Shard::read_bounded`] checks it
    /// (header CRC, offset sequence, record CRC), under the same bounds and
    /// with the same errors: [`Shard::read_bounded`] is this read, record by
    /// record. [`RecordRun::iter`] walks a run's records (offset, timestamp,
    /// payload slice) without copying or checking them again.
    ///
    /// A large read (64 KiB or more) fills a buffer the shard (or its
    /// store) reuses once every run read into it has been dropped, so a
    /// consumer that lets go of one read's runs before the next allocates
    /// nothing per read.
    ///
    /// ```
    /// use felix_storage::{ReadBound, Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// shard.append(&[Record::new(1, "a"), Record::new(2, "bc")])?;
    /// let runs = shard.read_runs(0, 1 << 20, ReadBound::Committed)?;
    /// let run = &runs[0];
    /// assert_eq!((run.first_offset(), run.next_offset()), (0, 2));
    /// // What a broker writes to its socket: the records as framed on disk.
    /// assert_eq!(run.bytes().len(), 2 * 28 + 3);
    /// let payloads: Vec<&[u8]> = run.iter().map(|r| r.payload).collect();
    /// assert_eq!(payloads, [&b"a"[..], &b"bc"[..]]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_runs(&self, from: u64, max_bytes: u64, bound: ReadBound) -> Result<Vec<RecordRun>> {
        self.core.check_open()?;
        self.core.read_runs(from, max_bytes, bound)
    }

    /// Waits until a record at `from` (or past it) is readable under
    /// `bound`, at most `timeout`, without polling: the append or sync that
    /// makes it readable wakes the wait. Returns at once when it already
    /// is. A consumer following the tail waits at the offset after the last
    /// record it read, then reads from there: the read returns at least one
    /// record whenever the wait says [`Tail::Readable`].
    ///
    /// A poisoned shard answers [`Tail::Poisoned`] once everything
    /// acknowledged below `from` has been read; a close fails the wait with
    /// [`StorageError::Closed`]. Waiting does not make anything durable:
    /// under [`Durability::OnCommit`](crate::Durability::OnCommit) a
    /// [`ReadBound::Committed`] wait ends with the appender's sync.
    ///
    /// ```
    /// use std::time::Duration;
    /// use felix_storage::{ReadBound, Record, Shard, Tail};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = std::sync::Arc::new(Shard::options(dir.path()).open()?);
    /// let producer = {
    ///     let shard = shard.clone();
    ///     std::thread::spawn(move || shard.append(&[Record::now("first")]))
    /// };
    /// let mut next = 0;
    /// while next < 1 {
    ///     match shard.wait_readable(next, ReadBound::Committed, Duration::from_secs(10))? {
    ///         Tail::Readable { .. } => {
    ///             for record in shard.read(next, 1 << 20)? {
    ///                 next = record.offset + 1;
    ///             }
    ///         }
    ///         Tail::TimedOut { .. } => continue,
    ///         other => panic!("{other:?}"),
    ///     }
    /// }
    /// producer.join().unwrap()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_readable(&self, from: u64, bound: ReadBound, timeout: Duration) -> Result<Tail> {
        TailWait::new(self, from, bound).wait_timeout(timeout)
    }

    /// Reads records from `from` as a leader sends them to a follower, each
    /// with the generation that wrote it (see [`Shard::read_bounded`];
    /// followers usually fetch with [`ReadBound::Written`]).
    pub fn read_replicated(
        &self,
        from: u64,
        max_bytes: u64,
        bound: ReadBound,
    ) -> Result<Vec<ReplicatedRecord>> {
        self.core.check_open()?;
        self.core.read_replicated(from, max_bytes, bound)
    }

    /// The run read ([`Shard::read_runs`]) as a leader sends records to a
    /// follower: each run holds records of one generation, and says which
    /// (a run is split where a generation begins).
    ///
    /// ```
    /// use felix_storage::{ReadBound, Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let leader = Shard::options(dir.path()).open()?;
    /// leader.begin_generation(1)?;
    /// leader.append(&[Record::new(1, "a"), Record::new(2, "b")])?;
    /// leader.begin_generation(2)?;
    /// leader.append(&[Record::new(3, "c")])?;
    /// let runs = leader.read_replicated_runs(0, 1 << 20, ReadBound::Written)?;
    /// let generations: Vec<_> = runs.iter().map(|r| (r.generation, r.run.len())).collect();
    /// assert_eq!(generations, [(Some(1), 2), (Some(2), 1)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_replicated_runs(
        &self,
        from: u64,
        max_bytes: u64,
        bound: ReadBound,
    ) -> Result<Vec<ReplicatedRun>> {
        self.core.check_open()?;
        self.core.read_replicated_runs(from, max_bytes, bound)
    }
}
