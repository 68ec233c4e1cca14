//! Finding records by time, as the facade offers it: the first offset at
//! or after a timestamp, and the newest timestamp.

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
        self.offset_for_timestamp_from(timestamp_micros, 0, bound)
    }

    /// [`Shard::offset_for_timestamp`] from `from` on: the earliest offset
    /// at or above both `from` and the log start, below where `bound` ends,
    /// whose record's timestamp is at least `timestamp_micros`. For a
    /// caller whose log begins above the shard's own start — a replicated
    /// shard whose new start is committed before its records' files go —
    /// and searched as fast: the time indexes narrow the search from
    /// `from` as from the start.
    ///
    /// ```
    /// use felix_storage::{ReadBound, Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// shard.append(&[Record::new(100, "a"), Record::new(200, "b"), Record::new(300, "c")]).wait()?;
    /// let from = |t, from| {
    ///     shard
    ///         .offset_for_timestamp_from(t, from, ReadBound::Committed)
    ///         .map(|hit| hit.map(|h| h.offset))
    /// };
    /// assert_eq!(from(100, 0)?, Some(0));
    /// assert_eq!(from(100, 2)?, Some(2)); // the first from offset 2 that reaches 100
    /// assert_eq!(from(100, 3)?, None); // nothing from there
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn offset_for_timestamp_from(
        &self,
        timestamp_micros: u64,
        from: u64,
        bound: ReadBound,
    ) -> Result<Option<TimestampHit>> {
        self.core.check_open()?;
        self.core
            .log()
            .offset_for_timestamp(timestamp_micros, from, bound)
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
}
