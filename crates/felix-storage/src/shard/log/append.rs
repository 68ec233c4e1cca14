//! Appends and rollover.

use std::sync::Arc;

use felix_format::{MAX_PAYLOAD_BYTES, record_encoded_len};
use felix_segment::{Record, SegmentWriter};

use super::{Log, Sealed, WriterState, next_reservation, segment_config};
use crate::config::Preallocation;
use crate::error::{Result, StorageError};
use crate::metrics::Wrote;
use crate::shard::AppendReceipt;
use crate::stats::Counters;

/// Whether the caller of a write makes it durable itself (an on-commit
/// append waits for a sync), or leaves it to writeback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Synced {
    /// The appender waits for a sync of it.
    ByCaller,
    /// Nobody waits: background writeback counts it.
    Later,
}

impl Log {
    /// Appends a batch without waiting for durability: offsets are
    /// assigned and the bytes written.
    pub(crate) fn append_written(
        &self,
        records: &[Record],
        synced: Synced,
    ) -> Result<AppendReceipt> {
        self.check_batch(records.iter().map(|r| r.payload.len()))?;
        let mut state = self.lock_writer()?;
        self.append_locked(&mut state, records, synced)
    }

    /// Validates a batch before anything is written.
    pub(crate) fn check_batch(&self, lens: impl ExactSizeIterator<Item = usize>) -> Result<()> {
        let records = lens.len();
        if records == 0 {
            return Err(StorageError::EmptyBatch {
                shard: Arc::clone(&self.shared.label),
            });
        }
        for (index_in_batch, len) in lens.enumerate() {
            if len > MAX_PAYLOAD_BYTES as usize {
                return Err(StorageError::PayloadTooLarge {
                    shard: Arc::clone(&self.shared.label),
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
        synced: Synced,
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
            && state.writer.len() + batch_bytes > self.shared.config.segment_size_bytes
        {
            self.roll(state)?;
        }
        self.shared.metrics.batch(records.len());
        self.write_run(state, records, 1, batch_bytes, synced)
    }

    /// Writes `batches` whole batches (`bytes` encoded) that fit the active
    /// segment in one `write`, and publishes them to readers and to group
    /// commit. Nothing after the publication can fail: once readers may see
    /// the records, the append is acknowledged.
    pub(crate) fn write_run(
        &self,
        state: &mut WriterState,
        records: &[Record],
        batches: u64,
        bytes: u64,
        synced: Synced,
    ) -> Result<AppendReceipt> {
        // A sync on a pool worker may have failed since the caller took the
        // writer lock: nothing is written after a failure.
        self.check_poison()?;
        self.reserve_ahead(&mut state.writer, bytes);
        let appended = match state.writer.append(records) {
            Ok(appended) => appended,
            Err(source) => return Err(self.poison_with(self.shared.segment_error(source))),
        };
        self.publish(&state.writer);
        // The writer lock is held: see `Counters::add_exclusive`.
        Counters::add_exclusive(&self.shared.counters.records_appended, records.len() as u64);
        Counters::add_exclusive(&self.shared.counters.bytes_appended, bytes);
        if let Some(every) = self.shared.config.writeback_bytes
            && synced == Synced::Later
        {
            state.unsynced_bytes += bytes;
            if state.unsynced_bytes >= every {
                state.unsynced_bytes = 0;
                self.commit.request_writeback();
            }
        }
        Counters::add_exclusive(&self.shared.counters.appends, batches);
        Counters::add_exclusive(&self.shared.counters.writes, 1);
        self.shared.metrics.wrote(Wrote {
            appends: batches,
            records: records.len() as u64,
            bytes,
            active_len: state.writer.len(),
            written: appended.last_offset + 1,
            by_caller: synced == Synced::ByCaller,
        });
        Ok(AppendReceipt {
            first_offset: appended.first_offset,
            last_offset: appended.last_offset,
        })
    }

    /// Reserves disk ahead of a write of `bytes` under
    /// [`Preallocation::Stepped`]. Failing to is logged and otherwise
    /// ignored: a write that really finds no space fails on its own.
    fn reserve_ahead(&self, writer: &mut SegmentWriter, bytes: u64) {
        if self.shared.config.preallocate != Preallocation::Stepped {
            return;
        }
        let end = writer.len() + bytes;
        if let Some(to) = next_reservation(
            end,
            writer.reserved_end(),
            self.shared.config.segment_size_bytes,
        ) && let Err(err) = writer.reserve(to)
        {
            tracing::debug!(shard = %self.shared.label, error = %err, "could not reserve disk ahead of a write");
        }
    }

    /// Refuses a batch of `records` from `next_offset` whose offsets would
    /// not fit: the last record's must stay below `u64::MAX`, so that the
    /// offset after it (the shard's next offset) can be named.
    pub(crate) fn check_offsets(&self, next_offset: u64, records: usize) -> Result<u64> {
        next_offset
            .checked_add(records as u64)
            .ok_or_else(|| StorageError::OffsetSpaceExhausted {
                shard: Arc::clone(&self.shared.label),
                next_offset,
                records,
            })
    }

    /// Makes the writer's new records visible to readers and to syncers.
    pub(crate) fn publish(&self, writer: &SegmentWriter) {
        // The index is shared with the writer: only the limit moves.
        let limit = writer.read_limit();
        debug_assert_eq!(
            limit.next_offset,
            writer.next_offset(),
            "the readers' limit is the writer's end"
        );
        {
            let mut view = self.view_mut();
            view.active_limit = limit;
            view.active_max_timestamp = writer.max_timestamp_micros();
        }
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
    pub(crate) fn roll(&self, state: &mut WriterState) -> Result<()> {
        // No sync of the shard runs while it rolls: one in flight finishes
        // first (and a failure of it stops the roll below), and none begins
        // until the new segment is in place, so the seal, the creation and
        // a background sync never interleave.
        self.commit.pause_syncs();
        let rolled = self.roll_paused(state);
        self.commit.resume_syncs();
        rolled
    }

    fn roll_paused(&self, state: &mut WriterState) -> Result<()> {
        let Some(next_id) = state.next_segment_id else {
            return Err(StorageError::SegmentIdsExhausted {
                shard: Arc::clone(&self.shared.label),
                last_id: state.writer.segment().id(),
            });
        };
        let span = tracing::info_span!("roll", shard = %self.shared.label, segment = next_id);
        let _entered = span.enter();
        // A kept clean-shutdown record would not list the new segment.
        self.forget_clean_shutdown()?;
        let base = state.writer.next_offset();
        // The old segment is durable before the new one exists: recovery
        // only ever repairs the newest segment, so a sealed one must never
        // hold a torn write.
        if let Err(source) = state.writer.finish() {
            return Err(self.poison_with(self.shared.segment_error(source)));
        }
        // A background sync that failed before the pause stops the roll
        // before the next segment is created.
        self.check_poison()?;
        if !state.writer.index_persisted() {
            // Sealing wrote it, or tried once more and logged why it
            // failed: the segment is sealed without a usable index, which
            // its readers rebuild.
            Counters::add(&self.shared.counters.index_write_failures, 1);
        }
        if !state.writer.time_index_persisted() {
            // Logged by the writer: built from the records when needed.
            Counters::add(&self.shared.counters.index_write_failures, 1);
        }
        let next = SegmentWriter::create(
            &self.shared.fs,
            &self.shared.dir,
            next_id,
            base,
            segment_config(&self.shared.config),
            Arc::clone(&self.shared.label),
        );
        let next = match next {
            Ok(next) => next,
            Err(source) => return Err(self.poison_with(self.shared.segment_error(source))),
        };
        if !next.index_persisted() {
            Counters::add(&self.shared.counters.index_write_failures, 1);
        }
        let old_time_written = state.writer.time_index_persisted();
        let old = std::mem::replace(&mut state.writer, next);
        // Readers move to the new segment's index first, so the old index
        // is no longer shared and sealing frees it without a copy.
        self.view_mut().active_index = state.writer.active_index();
        let sealed = old.into_sealed();
        debug_assert_eq!(
            sealed.extent.next_offset, base,
            "a sealed segment ends where the next begins"
        );
        state.next_segment_id = next_id.checked_add(1);
        // Its file and indexes are opened again on the first read that needs
        // them: keeping the indexes of every segment sealed by this process
        // would make memory grow with the data written. Its time index file
        // is this process's own, written from its appends.
        let entry = Sealed::new(sealed.extent, old_time_written);
        *entry
            .max_timestamp_micros
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(sealed.time_index.max_timestamp_micros());
        {
            let mut view = self.view_mut();
            view.sealed.push(Arc::new(entry));
            view.follow(&state.writer);
        }
        self.commit.set_handle(state.writer.sync_handle());
        // Sealing synced everything before the new segment.
        self.commit.advance_durable(base);
        Counters::add(&self.shared.counters.rolls, 1);
        self.shared.metrics.rolled();
        self.report_layout();
        tracing::info!(base_offset = base, "rolled to a new segment");
        Ok(())
    }
}
