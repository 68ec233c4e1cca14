//! Appends, rollover and group commit.

use std::sync::Arc;

use felix_format::SegmentExtent;
use felix_format::{MAX_PAYLOAD_BYTES, record_encoded_len};
use felix_recovery::write_clean_shutdown;
use felix_segment::{Record, SegmentWriter};

use super::commit::{Commit, unpark_all};
use super::{Sealed, Shard, WriterState, segment_config};
use crate::config::Durability;
use crate::error::{Result, StorageError};
use crate::stats::Counters;

/// The offsets an append assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendReceipt {
    /// The batch's first offset.
    pub first_offset: u64,
    /// The batch's last offset.
    pub last_offset: u64,
}

impl Shard {
    /// Appends a batch, assigning contiguous offsets, in one `write`.
    ///
    /// With [`Durability::OnCommit`] it returns once an `fdatasync` covers
    /// the batch; concurrent appenders share syncs. An empty batch or an
    /// oversized payload is rejected before anything is written.
    pub fn append(&self, records: &[Record]) -> Result<AppendReceipt> {
        if self.config.durability == Durability::OnCommit {
            // Concurrent on-commit appends share a `write` as well as a sync
            // (see `combine.rs`).
            self.check_batch(records.iter().map(|r| r.payload.len()))?;
            return self.append_combined(records);
        }
        self.append_nowait(records)
    }

    /// Appends a batch without waiting for durability, whatever the policy:
    /// offsets are assigned and the bytes written. Pair with
    /// [`Shard::wait_durable`] to sequence commits yourself.
    pub fn append_nowait(&self, records: &[Record]) -> Result<AppendReceipt> {
        self.check_batch(records.iter().map(|r| r.payload.len()))?;
        let mut state = self.writer_state();
        self.check_poison()?;
        self.append_locked(&mut state, records)
    }

    /// Validates a batch before anything is written.
    pub(crate) fn check_batch(&self, lens: impl ExactSizeIterator<Item = usize>) -> Result<()> {
        if lens.len() == 0 {
            return Err(StorageError::EmptyBatch {
                shard: Arc::clone(&self.label),
            });
        }
        for (index_in_batch, len) in lens.enumerate() {
            if len > MAX_PAYLOAD_BYTES as usize {
                return Err(StorageError::PayloadTooLarge {
                    shard: Arc::clone(&self.label),
                    index_in_batch,
                    len,
                    max: MAX_PAYLOAD_BYTES,
                });
            }
        }
        Ok(())
    }

    /// Writes a validated batch with the writer lock held: roll if needed,
    /// write, publish to readers and to group commit. A batch that would
    /// pass the end of the offset space, or need a segment after the last
    /// id, is refused with nothing written and the shard as it was.
    pub(crate) fn append_locked(
        &self,
        state: &mut WriterState,
        records: &[Record],
    ) -> Result<AppendReceipt> {
        self.check_offsets(state.writer.next_offset(), records.len())?;
        let batch_bytes: u64 = records
            .iter()
            .map(|r| record_encoded_len(r.payload.len() as u32))
            .sum();
        // A batch is never split, so it goes to a new segment when it would
        // take a non-empty one past the size limit; an oversized batch thus
        // gets an otherwise-empty segment of its own.
        if !state.writer.is_empty()
            && state.writer.len() + batch_bytes > self.config.segment_size_bytes
        {
            self.roll(state)?;
        }
        self.write_run(state, records, 1, batch_bytes)
    }

    /// Writes `batches` whole batches (`bytes` encoded) that fit the active
    /// segment in one `write`, and publishes them to readers and to group
    /// commit.
    pub(super) fn write_run(
        &self,
        state: &mut WriterState,
        records: &[Record],
        batches: u64,
        bytes: u64,
    ) -> Result<AppendReceipt> {
        let appended = match state.writer.append(records) {
            Ok(appended) => appended,
            Err(source) => return Err(self.poison_with(self.segment_error(source))),
        };
        let max_ts = records.iter().map(|r| r.timestamp_micros).max();
        state.active_max_timestamp = state.active_max_timestamp.max(max_ts);
        self.publish(&state.writer);
        // The writer lock is held: see `Counters::add_exclusive`.
        Counters::add_exclusive(&self.counters.records_appended, records.len() as u64);
        Counters::add_exclusive(&self.counters.bytes_appended, bytes);
        if let Some(every) = self.config.writeback_bytes
            && self.config.durability != Durability::OnCommit
        {
            state.unsynced_bytes += bytes;
            if state.unsynced_bytes >= every {
                state.unsynced_bytes = 0;
                self.commit.request_writeback()?;
            }
        }
        Counters::add_exclusive(&self.counters.appends, batches);
        Counters::add_exclusive(&self.counters.writes, 1);
        Ok(AppendReceipt {
            first_offset: appended.first_offset,
            last_offset: appended.last_offset,
        })
    }

    /// Refuses a batch of `records` from `next_offset` whose offsets would
    /// not fit: the last record's must stay below `u64::MAX`, so that the
    /// offset after it (the shard's next offset) can be named.
    pub(crate) fn check_offsets(&self, next_offset: u64, records: usize) -> Result<u64> {
        next_offset
            .checked_add(records as u64)
            .ok_or_else(|| StorageError::OffsetSpaceExhausted {
                shard: Arc::clone(&self.label),
                next_offset,
                records,
            })
    }

    /// Makes the writer's new records visible to readers and to syncers.
    pub(crate) fn publish(&self, writer: &SegmentWriter) {
        // The index is shared with the writer: only the limit moves.
        self.view_mut().active_limit = writer.read_limit();
        self.commit.set_written(writer.next_offset());
    }

    /// Seals the active segment and starts the next one.
    ///
    /// The old segment is synced, its index written and its preallocation
    /// trimmed before the new segment exists; the new segment's header and
    /// directory entry are synced before any record is written to it.
    ///
    /// When the active segment's id is `u64::MAX` no segment can follow it:
    /// the roll is refused with [`StorageError::SegmentIdsExhausted`] before
    /// anything changes (a wrapped id would name segment 0 and break the
    /// offset order every open checks).
    pub(super) fn roll(&self, state: &mut WriterState) -> Result<()> {
        let Some(next_id) = state.next_segment_id else {
            return Err(StorageError::SegmentIdsExhausted {
                shard: Arc::clone(&self.label),
                last_id: state.writer.segment().id(),
            });
        };
        let span = tracing::info_span!("roll", shard = %self.label, segment = next_id);
        let _entered = span.enter();
        let base = state.writer.next_offset();
        // The old segment is durable before the new one exists: recovery
        // only ever repairs the newest segment, so a sealed one must never
        // hold a torn write.
        if let Err(source) = state.writer.finish() {
            return Err(self.poison_with(self.segment_error(source)));
        }
        if !state.writer.index_persisted() {
            // Sealing wrote it, or tried once more and logged why it
            // failed: the segment is sealed without a usable index, which
            // its readers rebuild.
            Counters::add(&self.counters.index_write_failures, 1);
        }
        let next = SegmentWriter::create(
            &self.fs,
            &self.dir,
            next_id,
            base,
            segment_config(&self.config),
            Arc::clone(&self.label),
        );
        let next = match next {
            Ok(next) => next,
            Err(source) => return Err(self.poison_with(self.segment_error(source))),
        };
        if !next.index_persisted() {
            Counters::add(&self.counters.index_write_failures, 1);
        }
        let old = std::mem::replace(&mut state.writer, next);
        // Readers move to the new segment's index first, so the old index
        // is no longer shared and sealing frees it without a copy.
        self.view_mut().active_index = state.writer.active_index();
        let sealed = old.into_sealed();
        state.next_segment_id = next_id.checked_add(1);
        let max_ts = state.active_max_timestamp.take();
        let entry = Arc::new(Sealed {
            extent: sealed.extent,
            max_timestamp_micros: std::sync::Mutex::new(max_ts),
            // Its file and index are opened again on the first read that
            // needs them: keeping the index of every segment sealed by this
            // process would make memory grow with the data written.
            opened: std::sync::Mutex::new(None),
        });
        {
            let mut view = self.view_mut();
            view.sealed.push(entry);
            view.active = Arc::clone(state.writer.segment());
            view.active_limit = state.writer.read_limit();
            view.active_index = state.writer.active_index();
        }
        {
            let mut commit = self.commit_state();
            // Sealing synced everything before the new segment.
            commit.durable = commit.durable.max(base);
            commit.handle = state.writer.sync_handle();
            let covered = Commit::take_covered(&mut commit);
            drop(commit);
            unpark_all(covered);
        }
        Counters::add(&self.counters.rolls, 1);
        tracing::info!(base_offset = base, "rolled to a new segment");
        Ok(())
    }

    /// Waits until every record below `offset` is durable. Offsets beyond
    /// what was written are clamped to it.
    ///
    /// Group commit: the shard's flusher thread syncs back to back while
    /// appends continue, and each sync wakes every waiter it covered, so N
    /// concurrent appenders cost far fewer than N syncs (see `commit.rs`).
    pub fn wait_durable(&self, offset: u64) -> Result<()> {
        self.check_open()?;
        self.commit.wait_durable(offset)
    }

    /// Makes everything written so far durable, and brings the active
    /// segment's index file up to date (it may otherwise lag until the
    /// segment is sealed).
    pub fn sync(&self) -> Result<()> {
        self.check_poison()?;
        self.sync_inner()
    }

    fn sync_inner(&self) -> Result<()> {
        if let Err(err) = self.writer_state().writer.flush_index() {
            // An index is an accelerator: failing to extend it is logged and
            // counted (the writer keeps it in memory and writes it whole at
            // the next roll or close), and the data's sync below decides the
            // outcome.
            tracing::warn!(shard = %self.label, error = %err, "could not flush the index");
            Counters::add(&self.counters.index_write_failures, 1);
        }
        self.commit.wait_durable(u64::MAX)
    }

    /// Closes the shard cleanly: everything written becomes durable, the
    /// active segment's index is brought up to date, and a clean-shutdown
    /// file records the segments, so that the next open takes the sealed
    /// ones as listed instead of opening each (a shard of 10,000 segments
    /// opens in a few milliseconds; see docs/performance.md).
    ///
    /// The shard stays usable: writing after `close` leaves a record that
    /// the next open recognises as stale (the segment files changed) or
    /// that still describes the sealed segments exactly, because sealed
    /// segment files never change while their names exist. A failure
    /// stops writes, like any failed sync.
    ///
    /// ```
    /// use felix_storage::{Record, Shard, StoreConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::open(dir.path(), "doc", StoreConfig::default())?;
    /// shard.append(&[Record::new(1, "kept")])?;
    /// shard.close()?;
    /// drop(shard);
    /// let shard = Shard::open(dir.path(), "doc", StoreConfig::default())?;
    /// assert_eq!(shard.read(0, 1 << 20)?[0].payload, "kept");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn close(&self) -> Result<()> {
        self.check_poison()?;
        self.close_inner()
    }

    /// [`Shard::close`] without the check that the shard is open.
    fn close_inner(&self) -> Result<()> {
        self.commit.check_poison()?;
        self.sync_inner()?;
        // The writer lock keeps appends and rolls out while the segments
        // are listed and recorded.
        let mut state = self.writer_state();
        self.commit.check_poison()?;
        if !state.writer.index_persisted()
            && let Err(err) = state.writer.persist_index()
        {
            // Still in memory only; the next open rebuilds it from the scan
            // of the newest segment it always makes.
            tracing::warn!(shard = %self.label, error = %err, "could not write the active segment's index");
            Counters::add(&self.counters.index_write_failures, 1);
        }
        let segments: Vec<SegmentExtent> = self.segments().into_iter().map(|s| s.extent).collect();
        // Not written (`Ok(false)`, logged) when the name is not a regular
        // file: everything is durable all the same; only the quick next
        // open is lost.
        write_clean_shutdown(&self.fs, &self.dir, &segments)
            .map(drop)
            .map_err(|e| self.poison_with(StorageError::Recovery(e)))
    }

    /// Closes the shard for good, as a store does at [`Store::close`],
    /// [`Store::close_shard`], [`Store::reopen_shard`] and
    /// [`Store::delete_shard`]: no write starts after it begins, everything
    /// written becomes durable, the clean-shutdown file is written (as by
    /// [`Shard::close`]), the flusher stops and the writer's lock is
    /// released, so the directory can be opened again (or removed) at once.
    /// Every later call on any handle fails with [`StorageError::Closed`].
    ///
    /// The shard is closed and its lock released even when making it
    /// durable fails (a poisoned shard): the error is returned, and a
    /// reopen runs recovery. Closing a closed shard does nothing.
    ///
    /// [`Store::close`]: crate::Store::close
    /// [`Store::close_shard`]: crate::Store::close_shard
    /// [`Store::reopen_shard`]: crate::Store::reopen_shard
    /// [`Store::delete_shard`]: crate::Store::delete_shard
    pub(crate) fn close_for_store(&self) -> Result<()> {
        {
            // Under the writer lock (taking it writes any queued on-commit
            // batch first, whose appender then waits for the sync below)
            // and the queue, so no write can start once it is set.
            let _state = self.writer_state();
            if self.closed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Ok(());
            }
        }
        let result = self.close_inner();
        // Every waiter was covered by the sync above, or woken by the
        // poison that failed it.
        self.commit.stop();
        drop(
            self.lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
        tracing::info!(shard = %self.label, "shard closed");
        result
    }

    /// Fails with [`StorageError::Closed`] once the shard is closed.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StorageError::Closed {
                shard: Arc::clone(&self.label),
            });
        }
        Ok(())
    }

    /// Fails once the shard is closed or poisoned: what every write checks
    /// under the writer lock (or the queue) before it starts.
    pub(crate) fn check_poison(&self) -> Result<()> {
        self.check_open()?;
        self.commit.check_poison()
    }

    /// Stops writes for good, keeping the first failure as the reason.
    pub(crate) fn poison_with(&self, err: StorageError) -> StorageError {
        self.commit.poison_with(err)
    }
}
