//! Reading: by record, by run, as a leader reads for its followers, and
//! waiting for the tail. Every read here is the run read (`log/read.rs`),
//! checked and bounded the same way.

use super::requests::TailWait;
use super::{ReadBound, ReadRecord, RecordRun, ReplicatedRecord, ReplicatedRun, Shard};
use crate::error::Result;
#[cfg(doc)]
use crate::error::StorageError;
#[cfg(doc)]
use crate::stats::ShardStats;

impl Shard {
    /// Reads whole records from `from` onwards, across segments, up to
    /// where `bound` ends when the read begins ([`ReadBound::Committed`]:
    /// what was acknowledged), until about `max_bytes` of encoded records
    /// (header included) — at least one record if any is readable at
    /// `from`.
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
    ///
    /// ```
    /// use felix_storage::{ReadBound, Record, Retention, Shard, StorageError, StoreConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let config = StoreConfig {
    ///     segment_size_bytes: 100,
    ///     retention: Retention { max_bytes: Some(200), ..Retention::default() },
    ///     ..StoreConfig::default()
    /// };
    /// let shard = Shard::options(dir.path()).config(config).open()?;
    /// for i in 0..10 {
    ///     shard.append(&[Record::new(i, vec![0u8; 20])]).wait()?;
    /// }
    /// shard.apply_retention()?;
    /// // What retention removed is `Trimmed`, naming where the log now begins.
    /// match shard.read(0, 1 << 20, ReadBound::Committed) {
    ///     Err(StorageError::Trimmed { oldest, .. }) => {
    ///         assert_eq!(oldest, shard.offsets().base);
    ///         let records = shard.read(oldest, 1 << 20, ReadBound::Committed)?;
    ///         assert_eq!(records[0].offset, oldest);
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(&self, from: u64, max_bytes: u64, bound: ReadBound) -> Result<Vec<ReadRecord>> {
        self.core.check_open()?;
        self.core.log().read(from, max_bytes, bound)
    }

    /// The run read: records from `from` onwards as runs, each one
    /// [`Bytes`](bytes::Bytes) holding the records exactly as they lie in a
    /// segment (28-byte headers and payloads, ready for a socket), one run
    /// per segment the read crosses, up to where `bound` ends when the read
    /// begins and until about `max_bytes` of encoded records — at least one
    /// record if any is readable at `from`, and past the first never more
    /// than the budget.
    ///
    /// Every record is checked exactly as [`Shard::read`] checks it
    /// (header CRC, offset sequence, record CRC), under the same bounds and
    /// with the same errors: [`Shard::read`] is this read, record by
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
    /// shard.append(&[Record::new(1, "a"), Record::new(2, "bc")]).wait()?;
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
        self.core.log().read_runs(from, max_bytes, bound)
    }

    /// A wait until a record at `from` (or past it) is readable under
    /// `bound`: block at most a timeout with [`TailWait::wait_timeout`],
    /// `.await` it, or pass a callback to [`TailWait::then`]. See
    /// [`TailWait`] for a consumer following the tail.
    ///
    /// ```
    /// use std::time::Duration;
    /// use felix_storage::{ReadBound, Record, Shard, Tail};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// let wait = shard.wait_readable(0, ReadBound::Committed);
    /// assert!(matches!(wait.wait_timeout(Duration::ZERO)?, Tail::TimedOut { .. }));
    /// shard.append(&[Record::now("first")]).wait()?;
    /// let tail = shard.wait_readable(0, ReadBound::Committed).wait_timeout(Duration::from_secs(10))?;
    /// assert_eq!(tail, Tail::Readable { end: 1 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_readable(&self, from: u64, bound: ReadBound) -> TailWait<'_> {
        TailWait::new(self, from, bound)
    }

    /// Reads records from `from` as a leader sends them to a follower, each
    /// with the generation that wrote it (see [`Shard::read`];
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
    /// leader.append(&[Record::new(1, "a"), Record::new(2, "b")]).wait()?;
    /// leader.begin_generation(2)?;
    /// leader.append(&[Record::new(3, "c")]).wait()?;
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
