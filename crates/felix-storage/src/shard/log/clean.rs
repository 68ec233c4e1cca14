//! The directory's lock and the clean-shutdown record: written at a close,
//! kept by an open that trusts it (a store's shards), and removed before
//! anything makes it untrue.
//!
//! A kept record stays true of the directory while the log only grows its
//! newest segment (which every open scans in full); a roll, a cut, a reset,
//! retention or a replacement first removes it, durably, with the writer
//! lock held. The record is written only while the directory's lock is
//! held, so the lock lives here too and is released at the close.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use felix_format::SegmentExtent;
use felix_recovery::{remove_clean_shutdown, write_clean_shutdown, write_clean_shutdown_unsynced};

use super::{Log, WriterState};
use crate::error::{Result, StorageError};
use crate::lock::ShardLock;
use crate::stats::Counters;

/// The directory's lock and what the log knows of its clean-shutdown file.
#[derive(Debug)]
pub(crate) struct CleanShutdown {
    /// Held from open until close (or drop).
    lock: Mutex<Option<ShardLock>>,
    /// Whether the clean-shutdown file the open found is still in the
    /// directory (a store's shards keep it: `ShardOptions::keep_clean_shutdown`),
    /// still true of the sealed segments; cleared, with the file removed,
    /// before any roll, truncation or retention changes them.
    kept: AtomicBool,
    /// The newest segment as the kept record lists it, when known to be so
    /// (the open found it so).
    newest: Mutex<Option<SegmentExtent>>,
}

impl CleanShutdown {
    /// The directory's `lock`, and whether the open `kept` a record whose
    /// newest segment is `newest` (when known).
    pub(crate) fn new(lock: ShardLock, kept: bool, newest: Option<SegmentExtent>) -> Self {
        Self {
            lock: Mutex::new(Some(lock)),
            kept: AtomicBool::new(kept),
            newest: Mutex::new(newest),
        }
    }
}

impl Log {
    /// Removes the clean-shutdown file the open kept, durably, before the
    /// set of segments or a sealed one changes; the caller holds the writer
    /// lock. Nothing to do when none was kept or it is gone already.
    ///
    /// Until then the kept record stays true of the directory: it lists the
    /// segments there are, and the sealed ones unchanged; only the newest,
    /// which every open scans in full, has grown.
    pub(crate) fn forget_clean_shutdown(&self) -> Result<()> {
        if !self.clean.kept.load(Ordering::Acquire) {
            return Ok(());
        }
        let lock = self
            .clean
            .lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(lock) = lock.as_ref() else {
            return self.check_open();
        };
        // A failed directory sync may lose the removal later even if a retry
        // succeeds: the shard stops writing instead.
        remove_clean_shutdown(&self.shared.fs, &self.shared.dir, lock)
            .map_err(|e| self.poison_with(StorageError::Recovery(e)))?;
        self.clean.kept.store(false, Ordering::Release);
        Ok(())
    }

    /// Writes the active segment's index and the clean-shutdown file, with
    /// the writer lock held; a kept one without syncs, so the close needs
    /// none beyond the data's.
    pub(crate) fn record_clean_shutdown(&self, state: &mut WriterState) -> Result<()> {
        if !state.writer.index_persisted()
            && let Err(err) = state.writer.persist_index()
        {
            // Still in memory only; the next open rebuilds it from the scan
            // of the newest segment it always makes.
            tracing::warn!(shard = %self.shared.label, error = %err, "could not write the active segment's index");
            Counters::add(&self.shared.counters.index_write_failures, 1);
        }
        let segments = self.extents();
        let kept = self.clean.kept.load(Ordering::Acquire);
        if kept
            && *self
                .clean
                .newest
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
        write(&self.shared.fs, &self.shared.dir, &segments)
            .map(drop)
            .map_err(|e| self.poison_with(StorageError::Recovery(e)))
    }

    /// Releases the shard directory's lock (at close), so the directory
    /// can be opened again while handles to this shard still exist.
    pub(crate) fn release_lock(&self) {
        self.clean
            .lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}
