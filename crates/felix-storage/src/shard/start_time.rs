//! The facade's calls about where the log begins and about time: deleting
//! the records before an offset, and finding offsets by timestamp.

use felix_format::log_start::MovedBy;
use felix_segment::TimestampHit;

use super::{ReadBound, Shard};
use crate::error::Result;

impl Shard {
    /// The earliest offset at or above the log start, below where `bound`
    /// ends, whose record's timestamp is at least `timestamp_micros`, with
    /// that timestamp; `None` when no such record is readable (past the
    /// end).
    ///
    /// This is Kafka's ListOffsets by timestamp. Producers' clocks need not
    /// ascend, so the answer is the first record that reaches the bound,
    /// never one after a record that does: a record with an earlier
    /// timestamp after it does not move the answer. Fast on a large shard:
    /// each sealed segment's largest timestamp skips it, its time index
    /// (where the running maximum grows) narrows the search to a few index
    /// entries' worth of record headers, and the records decide.
    ///
    /// The first lookup that needs a sealed segment's time index loads it;
    /// after an open that did not follow a clean close (or for a shard
    /// another implementation wrote), that first lookup walks the segment's
    /// record headers once to build or check it.
    ///
    /// ```
    /// use felix_storage::{ReadBound, Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// // Producer clocks: timestamps need not ascend.
    /// shard.append(&[Record::new(100, "a"), Record::new(300, "b"), Record::new(200, "c")]).wait()?;
    /// let at = |t| shard.offset_for_timestamp(t, ReadBound::Committed).map(|hit| hit.map(|h| h.offset));
    /// assert_eq!(at(150)?, Some(1)); // not 2: offset 1 already reaches 150
    /// assert_eq!(at(300)?, Some(1));
    /// assert_eq!(at(301)?, None); // past the end
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn offset_for_timestamp(
        &self,
        timestamp_micros: u64,
        bound: ReadBound,
    ) -> Result<Option<TimestampHit>> {
        self.core.check_open()?;
        self.core
            .log()
            .offset_for_timestamp(timestamp_micros, bound)
    }

    /// The newest record a committed read returns, with its timestamp
    /// (`None` for an empty log). The newest record need not carry the
    /// largest timestamp; each segment's largest is in
    /// [`Shard::segments`].
    ///
    /// ```
    /// use felix_storage::{Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// assert_eq!(shard.newest_timestamp()?, None);
    /// shard.append(&[Record::new(30, "a"), Record::new(20, "b")]).wait()?;
    /// let newest = shard.newest_timestamp()?.unwrap();
    /// assert_eq!((newest.offset, newest.timestamp_micros), (1, 20));
    /// assert_eq!(shard.segments()[0].max_timestamp_micros, Some(30));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn newest_timestamp(&self) -> Result<Option<TimestampHit>> {
        self.core.check_open()?;
        self.core.log().newest_timestamp(ReadBound::Committed)
    }

    /// Deletes every record below `offset` (Kafka's DeleteRecords; what a
    /// Raft log's purge needs) and returns where the log begins now.
    ///
    /// The new start is durable before this returns: it is recorded in the
    /// shard's `log-start` file (written to a temporary, synced and renamed
    /// over the old one). From then on reads below it are
    /// [`StorageError::Trimmed`](crate::StorageError::Trimmed) exactly as
    /// below the first segment, [`Shard::offsets`] reports it
    /// (its `base`), a truncation below it is
    /// [`StorageError::TruncateBelowBase`](crate::StorageError::TruncateBelowBase),
    /// generation history entries below it are pruned, and retention deletes
    /// the segments wholly below it (their files stay until it runs).
    ///
    /// The start never moves backwards: an `offset` at or below it changes
    /// nothing. One past the readable end (what a committed read returns)
    /// is [`StorageError::DeletePastEnd`](crate::StorageError::DeletePastEnd),
    /// nothing changed. A failure to store the file stops the shard's
    /// writes, as a failed sync does.
    ///
    /// Losing or damaging the file never loses a record: the log then
    /// begins at its first segment again (deleted records reappear).
    ///
    /// ```
    /// use felix_storage::{ReadBound, Record, Shard, StorageError};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// shard.append(&[Record::new(1, "a"), Record::new(2, "b"), Record::new(3, "c")]).wait()?;
    /// assert_eq!(shard.delete_records_before(2)?, 2);
    /// assert!(matches!(shard.read(1, 1 << 20, ReadBound::Committed), Err(StorageError::Trimmed { oldest: 2, .. })));
    /// assert_eq!(shard.delete_records_before(1)?, 2); // never backwards
    /// assert!(matches!(shard.delete_records_before(4), Err(StorageError::DeletePastEnd { .. })));
    /// drop(shard);
    /// let reopened = Shard::options(dir.path()).open()?;
    /// assert_eq!(reopened.offsets().base, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete_records_before(&self, offset: u64) -> Result<u64> {
        self.move_log_start(offset, MovedBy::Deletion)
    }

    /// [`Shard::delete_records_before`], recording in the log-start file
    /// what moved the start: with [`MovedBy::Deletion`] it is that call.
    ///
    /// [`MovedBy::Offload`] is for a tiering layer that deletes local
    /// records only once a durable remote manifest lists every one of them
    /// below `offset`: the record lets it tell, when it opens the shard
    /// again, records that must be in its remote copy (and are lost when
    /// they are not) from records deleted on purpose. Claimed for records
    /// no remote copy holds, it makes that layer refuse the shard.
    ///
    /// The start never moves backwards: at or below it nothing changes, and
    /// the file keeps what moved the start last.
    ///
    /// ```
    /// use felix_storage::{MovedBy, Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// shard.append(&[Record::new(1, "a"), Record::new(2, "b"), Record::new(3, "c")]).wait()?;
    /// // Offsets 0 and 1 are in a durable remote manifest now.
    /// assert_eq!(shard.move_log_start(2, MovedBy::Offload)?, 2);
    /// assert_eq!(shard.offsets().base, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn move_log_start(&self, offset: u64, moved_by: MovedBy) -> Result<u64> {
        self.core.check_open()?;
        self.core.delete_records_before(offset, moved_by)
    }
}
