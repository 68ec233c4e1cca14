//! Syncing and closing: the writer lock taken to bring the index up to
//! date, group commit asked for the rest.

use super::{Log, SegmentInfo};
use crate::error::{Result, StorageError};
use crate::stats::Counters;

impl Log {
    /// Makes everything written so far durable, and brings the active
    /// segment's index file up to date (it may otherwise lag until the
    /// segment is sealed).
    pub(crate) fn sync(&self) -> Result<()> {
        {
            let mut state = self.lock_writer()?;
            if let Err(err) = state.writer.flush_index() {
                // An index is an accelerator: failing to extend it is logged
                // and counted (the writer keeps it in memory and writes it
                // whole at the next roll or close), and the data's sync
                // below decides the outcome.
                tracing::warn!(shard = %self.shared.label, error = %err, "could not flush the index");
                Counters::add(&self.shared.counters.index_write_failures, 1);
            }
            // An explicit sync brings the metrics up to date too.
            self.shared
                .metrics
                .catch_up_exclusive(self.commit.written());
        }
        self.commit.wait_durable(u64::MAX)
    }

    /// Closes the shard: everything written becomes durable, the active
    /// segment's index is brought up to date, a clean-shutdown file records
    /// the segments, no more syncs are queued and the directory's lock is
    /// released. From then on every call fails with
    /// [`StorageError::ShardClosed`].
    ///
    /// The writer lock and the queue are held from the start (taking them
    /// writes any queued on-commit batch first), so no write starts once
    /// the close has begun and the sync below covers everything written.
    ///
    /// The shard is closed whatever happens; when it could not be made
    /// durable or recorded (it was poisoned, or the sync or the
    /// clean-shutdown file failed), that failure is returned and the next
    /// open runs recovery as after a crash.
    pub(crate) fn close(&self) -> Result<()> {
        let mut state = self.writer_state();
        // Another close may have got here first.
        self.check_open()?;
        let recorded = self
            .check_poison()
            .and_then(|()| {
                if let Err(err) = state.writer.flush_index() {
                    // Only an accelerator: written whole below, or rebuilt
                    // by the next open's scan of the newest segment.
                    tracing::warn!(shard = %self.shared.label, error = %err, "could not flush the index");
                    Counters::add(&self.shared.counters.index_write_failures, 1);
                }
                // Nothing waits for the writer lock here: the pool (or
                // this thread) syncs without it.
                self.commit.wait_durable(u64::MAX)
            })
            .and_then(|()| self.record_clean_shutdown(&mut state));
        self.shared
            .metrics
            .catch_up_exclusive(self.commit.written());
        self.commit.close();
        drop(state);
        self.release_lock();
        tracing::info!(shard = %self.shared.label, clean = recorded.is_ok(), "shard closed");
        recorded
    }

    /// [`Log::close`] as a store closes its shards (at its own close, and
    /// when it closes, reopens or deletes one): a shard already closed is
    /// left as it is.
    pub(crate) fn close_for_store(&self) -> Result<()> {
        match self.close() {
            Err(StorageError::ShardClosed { .. }) => Ok(()),
            other => other,
        }
    }

    /// The shard's segments in offset order, the active one last, each with
    /// its largest timestamp (a sealed segment's from its time index,
    /// loaded on first need).
    pub(crate) fn segments(&self) -> Vec<SegmentInfo> {
        let (sealed, active) = {
            let view = self.view();
            let active = SegmentInfo {
                extent: view.active_extent(),
                active: true,
                max_timestamp_micros: view.active_max_timestamp,
            };
            (view.sealed.clone(), active)
        };
        // Outside the view's lock: a time index may have to be read.
        let mut out: Vec<SegmentInfo> = sealed
            .iter()
            .map(|s| SegmentInfo {
                extent: s.extent,
                active: false,
                max_timestamp_micros: self.max_timestamp_or_log(s),
            })
            .collect();
        out.push(active);
        out
    }
}
