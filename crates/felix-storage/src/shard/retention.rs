//! Deleting from the head of a shard: whole sealed segments (retention)
//! and the records before an offset (the log start). The log deletes, with
//! the writer lock held; the generation history then drops what lies below
//! the new start, under the same lock.

use std::time::{Duration, UNIX_EPOCH};

use felix_format::log_start::MovedBy;

use super::core::Core;
use crate::error::Result;

pub use super::log::RetentionOutcome;

impl Core {
    /// Applies the configured retention now (see `Shard::apply_retention`),
    /// ages measured against the shard's clock.
    pub(crate) fn apply_retention(&self) -> Result<RetentionOutcome> {
        let now = self
            .shared()
            .clock
            .now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let state = self.log().lock_writer()?;
        let outcome = self.log().delete_segments(&state, now)?;
        if !outcome.deleted_segments.is_empty() {
            self.generations().cut_before(outcome.base_offset)?;
        }
        Ok(outcome)
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
