//! Syncing and closing.

use felix_format::SegmentExtent;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use felix_recovery::{remove_clean_shutdown, write_clean_shutdown, write_clean_shutdown_unsynced};

use super::core::Core;
use crate::error::{Result, StorageError};
use crate::stats::Counters;

impl Core {
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
                tracing::warn!(shard = %self.label, error = %err, "could not flush the index");
                Counters::add(&self.counters.index_write_failures, 1);
            }
            // An explicit sync brings the metrics up to date too.
            self.metrics.catch_up_exclusive(self.commit.written());
        }
        self.commit.wait_durable(u64::MAX)
    }

    /// Closes the shard: everything written becomes durable, the active
    /// segment's index is brought up to date, a clean-shutdown file records
    /// the segments, no more syncs are queued and the directory's lock is
    /// released. From then on every call fails with
    /// [`StorageError::Closed`].
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
                    tracing::warn!(shard = %self.label, error = %err, "could not flush the index");
                    Counters::add(&self.counters.index_write_failures, 1);
                }
                // Nothing waits for the writer lock here: the pool (or
                // this thread) syncs without it.
                self.commit.wait_durable(u64::MAX)
            })
            .and_then(|()| self.record_clean_shutdown(&mut state));
        self.metrics.catch_up_exclusive(self.commit.written());
        self.commit.close();
        drop(state);
        self.release_lock();
        tracing::info!(shard = %self.label, clean = recorded.is_ok(), "shard closed");
        recorded
    }

    /// [`Core::close`] as a store closes its shards (at its own close, and
    /// when it closes, reopens or deletes one): a shard already closed is
    /// left as it is.
    pub(crate) fn close_for_store(&self) -> Result<()> {
        match self.close() {
            Err(StorageError::Closed { .. }) => Ok(()),
            other => other,
        }
    }

    /// Removes the clean-shutdown file the open kept, durably, before the
    /// set of segments or a sealed one changes; the caller holds the writer
    /// lock. Nothing to do when none was kept or it is gone already.
    ///
    /// Until then the kept record stays true of the directory: it lists the
    /// segments there are, and the sealed ones unchanged; only the newest,
    /// which every open scans in full, has grown.
    pub(crate) fn forget_clean_shutdown(&self) -> Result<()> {
        if !self.clean_shutdown_kept.load(Ordering::Acquire) {
            return Ok(());
        }
        let lock = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(lock) = lock.as_ref() else {
            return self.check_open();
        };
        // A failed directory sync may lose the removal later even if a retry
        // succeeds: the shard stops writing instead.
        remove_clean_shutdown(&self.fs, &self.dir, lock)
            .map_err(|e| self.poison_with(StorageError::Recovery(e)))?;
        self.clean_shutdown_kept.store(false, Ordering::Release);
        Ok(())
    }

    /// Writes the active segment's index and the clean-shutdown file, with
    /// the writer lock held; a kept one without syncs, so the close needs
    /// none beyond the data's.
    fn record_clean_shutdown(&self, state: &mut super::log::WriterGuard<'_>) -> Result<()> {
        if !state.writer.index_persisted()
            && let Err(err) = state.writer.persist_index()
        {
            // Still in memory only; the next open rebuilds it from the scan
            // of the newest segment it always makes.
            tracing::warn!(shard = %self.label, error = %err, "could not write the active segment's index");
            Counters::add(&self.counters.index_write_failures, 1);
        }
        let segments = self.extents();
        let kept = self.clean_shutdown_kept.load(Ordering::Acquire);
        if kept
            && *self
                .clean_record_newest
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                == segments.last().copied()
        {
            // The kept record says exactly this already.
            return Ok(());
        }
        // Not written (`Ok(false)`, logged) when the name is not a regular
        // file: everything is durable all the same; only the quick next
        // open is lost. A kept record is rewritten without syncs: only the
        // newest segment's end has changed, and the next open trusts the
        // new end (and skips its sync) only if the record reached the disk.
        let write = if kept {
            write_clean_shutdown_unsynced
        } else {
            write_clean_shutdown
        };
        write(&self.fs, &self.dir, &segments)
            .map(drop)
            .map_err(|e| self.poison_with(StorageError::Recovery(e)))
    }

    /// The shard's segments' extents in offset order, the active one last.
    pub(crate) fn extents(&self) -> Vec<SegmentExtent> {
        let view = self.log.view();
        let mut out: Vec<SegmentExtent> = view.sealed.iter().map(|s| s.extent).collect();
        out.push(view.active_extent());
        out
    }

    /// The shard's segments in offset order, the active one last, each with
    /// its largest timestamp (a sealed segment's from its time index,
    /// loaded on first need).
    pub(crate) fn segments(&self) -> Vec<super::SegmentInfo> {
        let (sealed, active) = {
            let view = self.log.view();
            let active = super::SegmentInfo {
                extent: view.active_extent(),
                active: true,
                max_timestamp_micros: view.active_max_timestamp,
            };
            (view.sealed.clone(), active)
        };
        // Outside the view's lock: a time index may have to be read.
        let mut out: Vec<super::SegmentInfo> = sealed
            .iter()
            .map(|s| super::SegmentInfo {
                extent: s.extent,
                active: false,
                max_timestamp_micros: self.max_timestamp_or_log(s),
            })
            .collect();
        out.push(active);
        out
    }
}
