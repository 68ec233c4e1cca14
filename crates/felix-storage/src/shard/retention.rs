//! Deleting from the head of a shard: whole sealed segments (retention)
//! and the records before an offset (the log start). The log deletes, with
//! the writer lock held; the generation history then drops what lies below
//! the new start, under the same lock. The facade's calls
//! (`Shard::delete_records_before`, `Shard::move_log_start`) are here too.

use std::time::{Duration, UNIX_EPOCH};

use felix_format::log_start::MovedBy;

use super::Shard;
use super::core::Core;
use crate::Retention;
use crate::error::Result;

pub use super::log::RetentionOutcome;

impl Core {
    /// Applies the configured retention now (see `Shard::apply_retention`),
    /// ages measured against the shard's clock.
    pub(crate) fn apply_retention(&self) -> Result<RetentionOutcome> {
        let now = self.now();
        let state = self.log().lock_writer()?;
        let outcome = self.log().delete_segments(&state, now)?;
        if !outcome.deleted_segments.is_empty() {
            self.generations().cut_before(outcome.base_offset)?;
        }
        Ok(outcome)
    }

    /// Where the log would begin if `retention` were applied now (see
    /// `Shard::retention_start`), ages measured against the shard's clock.
    pub(crate) fn retention_start(&self, retention: &Retention) -> Result<u64> {
        let doomed = self.log().doomed_segments(retention, self.now())?;
        let base = self.log().view().base_offset();
        Ok(doomed
            .last()
            .map_or(base, |last| last.extent.next_offset.max(base)))
    }

    /// The shard's clock, since the epoch.
    fn now(&self) -> Duration {
        self.shared()
            .clock
            .now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
    }

    /// Deletes the records before `offset`, recording `moved_by` with the
    /// new start (see `Shard::delete_records_before` and
    /// `Shard::move_log_start`); returns where the log begins.
    pub(crate) fn delete_records_before(&self, offset: u64, moved_by: MovedBy) -> Result<u64> {
        let span =
            tracing::info_span!("delete_records_before", shard = %self.label(), offset, ?moved_by);
        let _entered = span.enter();
        let state = self.log().lock_writer()?;
        let (start, moved) = self.log().move_start(&state, offset, moved_by)?;
        if moved {
            self.generations().cut_before(start)?;
            tracing::info!(
                start_offset = start,
                "records deleted before the new log start"
            );
        }
        Ok(start)
    }
}

impl Shard {
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

    /// Where the log would begin if `retention`'s limits were applied now,
    /// deleting nothing: past the sealed segments
    /// [`Shard::apply_retention`] would delete under them (wholly below
    /// the log start, over `max_bytes`, or older than `max_age` by the
    /// shard's clock), or the current start when it would delete none.
    /// For a replicated shard, whose leader decides where every replica's
    /// log begins and moves it through the log (each replica then calls
    /// [`Shard::delete_records_before`]): the shard's own configured
    /// retention is not consulted.
    ///
    /// ```
    /// use felix_storage::{Record, Retention, Shard, StoreConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let config = StoreConfig { segment_size_bytes: 100, ..StoreConfig::default() };
    /// let shard = Shard::options(dir.path()).config(config).open()?;
    /// for i in 0..10 {
    ///     shard.append(&[Record::new(i, vec![0u8; 40])]).wait()?;
    /// }
    /// let keep_little = Retention { max_bytes: Some(1), ..Retention::default() };
    /// let start = shard.retention_start(&keep_little)?;
    /// assert!(start > 0 && start <= shard.offsets().written);
    /// assert_eq!(shard.offsets().base, 0, "nothing deleted");
    /// assert_eq!(shard.retention_start(&Retention::default())?, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retention_start(&self, retention: &Retention) -> Result<u64> {
        self.core.check_open()?;
        self.core.retention_start(retention)
    }
}
