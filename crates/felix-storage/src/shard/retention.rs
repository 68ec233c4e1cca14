//! Deleting whole sealed segments from the head of a shard.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use felix_segment::ReadLimit;

use super::core::Core;
use super::log::Sealed;
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

impl Core {
    /// Applies the configured retention now (see `Shard::apply_retention`),
    /// ages measured against the shard's clock.
    pub(crate) fn apply_retention(&self) -> Result<RetentionOutcome> {
        let now = self
            .clock
            .now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let retention = self.config.retention;
        let _state = self.lock_writer()?;
        let (sealed, active_len) = {
            let view = self.view();
            (view.sealed.clone(), view.active_limit.end_position)
        };
        let mut total: u64 = sealed.iter().map(|s| s.extent.len).sum::<u64>() + active_len;
        let cutoff = retention
            .max_age
            .map(|age| now.saturating_sub(age).as_micros());
        let mut doomed = Vec::new();
        for segment in &sealed {
            let over_size = retention.max_bytes.is_some_and(|max| total > max);
            let too_old = match cutoff {
                Some(cutoff) => self
                    .newest_timestamp(segment)?
                    .is_some_and(|ts| u128::from(ts) < cutoff),
                None => false,
            };
            if !(over_size || too_old) {
                break;
            }
            total -= segment.extent.len;
            doomed.push(Arc::clone(segment));
        }
        if doomed.is_empty() {
            return Ok(RetentionOutcome {
                deleted_segments: Vec::new(),
                base_offset: self.view().base_offset(),
            });
        }
        let span = tracing::info_span!("retention", shard = %self.label, segments = doomed.len());
        let _entered = span.enter();
        self.forget_clean_shutdown()?;
        // Readers stop choosing the segments before their files go.
        {
            let mut view = self.view_mut();
            view.sealed.drain(..doomed.len());
        }
        for segment in &doomed {
            self.remove_segment_files(segment.extent.id)
                .map_err(|e| self.poison_with(e))?;
        }
        Counters::add(&self.counters.segments_deleted, doomed.len() as u64);
        self.metrics.segments_deleted(doomed.len());
        self.report_layout();
        let base_offset = self.view().base_offset();
        self.update_history(|history| history.truncate_before(base_offset) > 0)?;
        tracing::info!(base_offset, "retention deleted segments");
        Ok(RetentionOutcome {
            deleted_segments: doomed.iter().map(|s| s.extent.id).collect(),
            base_offset,
        })
    }

    /// The newest record's timestamp in a sealed segment: known for segments
    /// this process sealed; otherwise the last record's, read once.
    fn newest_timestamp(&self, segment: &Sealed) -> Result<Option<u64>> {
        let mut known = segment
            .max_timestamp_micros
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if known.is_some() || segment.extent.next_offset == segment.extent.base_offset {
            return Ok(*known);
        }
        let last = segment.extent.next_offset - 1;
        let opened = self.open_sealed(segment, last)?;
        let limit = ReadLimit {
            end_position: segment.extent.len,
            next_offset: segment.extent.next_offset,
        };
        let records = opened
            .file
            .read(opened.index.seek(last), last, limit, 0)
            .map_err(|e| self.segment_error(e))?;
        *known = records.first().map(|r| r.timestamp_micros);
        Ok(*known)
    }
}
