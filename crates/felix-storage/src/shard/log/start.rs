//! The log start: deleting the records before an offset (Kafka's
//! DeleteRecords, a Raft log's purge), recorded durably in the shard's
//! `log-start` file before the call returns.
//!
//! The start only moves with the writer lock held, the file first: once it
//! is durable, the readers' view moves (reads below it are `Trimmed`) and
//! the generation history drops what lies below it. Whole segments below
//! the start are left to retention. Losing the file loses no record: the
//! log then begins at its first segment, as before the deletion.

use std::sync::Arc;

use felix_format::log_start::{LogStart, MovedBy};
use felix_recovery::write_log_start;

use super::WriterState;
use crate::error::{Result, StorageError};
use crate::shard::bounds::ReadBound;
use crate::shard::core::Core;

impl Core {
    /// Deletes the records before `offset`, recording `moved_by` with the
    /// new start (see `Shard::delete_records_before` and
    /// `Shard::move_log_start`); returns where the log begins.
    pub(crate) fn delete_records_before(&self, offset: u64, moved_by: MovedBy) -> Result<u64> {
        let span =
            tracing::info_span!("delete_records_before", shard = %self.label, offset, ?moved_by);
        let _entered = span.enter();
        let state = self.lock_writer()?;
        let (start, readable_end) = {
            let view = self.log.view();
            (
                view.base_offset(),
                self.end_for(&view, ReadBound::Committed),
            )
        };
        if offset > readable_end {
            return Err(StorageError::DeletePastEnd {
                shard: Arc::clone(&self.label),
                requested: offset,
                readable_end,
            });
        }
        // It never moves backwards.
        if offset <= start {
            return Ok(start);
        }
        let first_segment_id = self.segment_holding(&state, offset);
        self.record_log_start(LogStart {
            start_offset: offset,
            first_segment_id,
            moved_by,
        })?;
        self.log.view_mut().log_start = offset;
        self.report_layout();
        self.update_history(|history| history.truncate_before(offset) > 0)?;
        tracing::info!(
            start_offset = offset,
            "records deleted before the new log start"
        );
        Ok(offset)
    }

    /// The id of the segment that holds `offset`, or that the next record
    /// goes to when `offset` is the log end.
    fn segment_holding(&self, state: &WriterState, offset: u64) -> u64 {
        let view = self.log.view();
        view.sealed
            .iter()
            .find(|s| offset < s.extent.next_offset)
            .map_or(state.writer.segment().id(), |s| s.extent.id)
    }

    /// Stores `start` in the log-start file, durably. A failure stops the
    /// shard's writes, as a failed store of the epochs file does: the file
    /// may or may not have been replaced, and a failed sync is never
    /// retried.
    pub(crate) fn record_log_start(&self, start: LogStart) -> Result<()> {
        write_log_start(&self.fs, &self.dir, &start)
            .map_err(|e| self.poison_with(StorageError::Recovery(e)))
    }
}
