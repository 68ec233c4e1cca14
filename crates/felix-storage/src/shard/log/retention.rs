//! Deleting whole sealed segments from the head of the log, as the
//! configured retention says.

use std::sync::Arc;
use std::time::Duration;

use super::{Log, Sealed, WriterState};
use crate::Retention;
use crate::error::Result;
use crate::stats::Counters;

/// What a retention pass did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RetentionOutcome {
    /// Ids of the segments deleted, oldest first.
    pub deleted_segments: Vec<u64>,
    /// The shard's base offset afterwards.
    pub base_offset: u64,
}

impl Log {
    /// The sealed segments `retention` no longer keeps, ages measured
    /// against `now` (since the epoch), oldest first: while they lie
    /// wholly below the log start, the shard is over `max_bytes`, or the
    /// segment's largest record timestamp is older than `max_age`. The
    /// active segment is never among them.
    pub(crate) fn doomed_segments(
        &self,
        retention: &Retention,
        now: Duration,
    ) -> Result<Vec<Arc<Sealed>>> {
        let (sealed, active_len, start) = {
            let view = self.view();
            (
                view.sealed.clone(),
                view.active_limit.end_position,
                view.base_offset(),
            )
        };
        let mut total: u64 = sealed.iter().map(|s| s.extent.len).sum::<u64>() + active_len;
        let cutoff = retention
            .max_age
            .map(|age| now.saturating_sub(age).as_micros());
        let mut doomed = Vec::new();
        for segment in &sealed {
            let over_size = retention.max_bytes.is_some_and(|max| total > max);
            // Deleted records (below the log start) are gone already; the
            // files of segments wholly below it only wait for this pass.
            let below_start = segment.extent.next_offset <= start;
            let too_old = match cutoff {
                Some(cutoff) if !(over_size || below_start) => self
                    .sealed_max_timestamp(segment)?
                    .is_some_and(|ts| u128::from(ts) < cutoff),
                _ => false,
            };
            if !(over_size || below_start || too_old) {
                break;
            }
            total -= segment.extent.len;
            doomed.push(Arc::clone(segment));
        }
        Ok(doomed)
    }

    /// Deletes the sealed segments the configured retention no longer
    /// keeps, ages measured against `now` (since the epoch), with the
    /// writer lock held (`_state`): oldest first, each removed durably
    /// before the next, after readers stop choosing them.
    pub(crate) fn delete_segments(
        &self,
        _state: &WriterState,
        now: Duration,
    ) -> Result<RetentionOutcome> {
        let doomed = self.doomed_segments(&self.shared.config.retention, now)?;
        if doomed.is_empty() {
            return Ok(RetentionOutcome {
                deleted_segments: Vec::new(),
                base_offset: self.view().base_offset(),
            });
        }
        let span =
            tracing::info_span!("retention", shard = %self.shared.label, segments = doomed.len());
        let _entered = span.enter();
        self.forget_clean_shutdown()?;
        // Readers stop choosing the segments before their files go.
        {
            let mut view = self.view_mut();
            view.sealed.drain(..doomed.len());
        }
        for segment in &doomed {
            self.remove_segment_files(segment.extent.id)
                .map_err(|e| self.commit.poison_with(e))?;
        }
        Counters::add(&self.shared.counters.segments_deleted, doomed.len() as u64);
        self.shared.metrics.segments_deleted(doomed.len());
        self.report_layout();
        let base_offset = self.view().base_offset();
        tracing::info!(base_offset, "retention deleted segments");
        Ok(RetentionOutcome {
            deleted_segments: doomed.iter().map(|s| s.extent.id).collect(),
            base_offset,
        })
    }
}
