//! The log start: deleting the records before an offset (Kafka's
//! DeleteRecords, a Raft log's purge), recorded durably in the shard's
//! `log-start` file before the call returns.
//!
//! The start only moves with the writer lock held, the file first: once it
//! is durable, the readers' view moves (reads below it are `Trimmed`), and
//! the shard (`retention.rs`) has the generation history drop what lies
//! below it. Whole segments below
//! the start are left to retention. Losing the file loses no record: the
//! log then begins at its first segment, as before the deletion.

use std::sync::Arc;

use felix_format::log_start::{LogStart, MovedBy};
use felix_recovery::write_log_start;

use super::{Log, WriterState};
use crate::error::{Result, StorageError};
use crate::shard::bounds::ReadBound;

impl Log {
    /// Moves the log start up to `offset` with the writer lock held
    /// (`state`), recording `moved_by` with it (see
    /// `Shard::delete_records_before` and `Shard::move_log_start`): the
    /// file first, durably, then the readers' view. Returns where the log
    /// begins, and whether the start moved (it never moves backwards).
    pub(crate) fn move_start(
        &self,
        state: &WriterState,
        offset: u64,
        moved_by: MovedBy,
    ) -> Result<(u64, bool)> {
        let (start, readable_end) = {
            let view = self.view();
            (
                view.base_offset(),
                self.end_for(&view, ReadBound::Committed),
            )
        };
        if offset > readable_end {
            return Err(StorageError::DeletePastEnd {
                shard: Arc::clone(&self.shared.label),
                requested: offset,
                readable_end,
            });
        }
        if offset <= start {
            return Ok((start, false));
        }
        let first_segment_id = self.segment_holding(state, offset);
        self.record_log_start(LogStart {
            start_offset: offset,
            first_segment_id,
            moved_by,
        })?;
        self.view_mut().log_start = offset;
        self.report_layout();
        Ok((offset, true))
    }

    /// The id of the segment that holds `offset`, or that the next record
    /// goes to when `offset` is the log end.
    fn segment_holding(&self, state: &WriterState, offset: u64) -> u64 {
        let view = self.view();
        view.sealed
            .iter()
            .find(|s| offset < s.extent.next_offset)
            .map_or(state.writer.segment().id(), |s| s.extent.id)
    }

    /// Stores `start` in the log-start file, durably. A failure stops the
    /// shard's writes, as a failed store of the epochs file does: the file
    /// may or may not have been replaced, and a failed sync is never
    /// retried.
    pub(super) fn record_log_start(&self, start: LogStart) -> Result<()> {
        write_log_start(&self.shared.fs, &self.shared.dir, &start)
            .map_err(|e| self.poison_with(StorageError::Recovery(e)))
    }
}
