//! The writer's time index: what its appends built, and the file sealing
//! writes.

use felix_format::SegmentExtent;

use super::SegmentWriter;
use crate::time_index::{ActiveTimeIndex, TimeIndex};

impl SegmentWriter {
    /// The segment's extent as written so far.
    pub fn extent(&self) -> SegmentExtent {
        SegmentExtent {
            id: self.segment.id(),
            base_offset: self.segment.base_offset(),
            next_offset: self.next_offset,
            len: self.len,
        }
    }

    /// The time index as the appends have built it (not sealed).
    pub fn time_index_so_far(&self) -> TimeIndex {
        TimeIndex::from_parts(
            self.time_index.entries(),
            self.max_timestamp,
            (!self.is_empty()).then(|| self.next_offset - 1),
        )
    }

    /// Writes the sealed segment's time index file; a failure is logged and
    /// never stops the seal (the index is built from the records when it is
    /// next needed).
    pub(super) fn write_time_index(&self) -> bool {
        let path = self.segment.time_index_path();
        let index = self.time_index_so_far();
        match index.write_file(self.segment.fs(), &path, &self.extent()) {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(shard = %self.segment.shard(), segment = self.segment.id(), %error, "time index not written; it is built from the records when needed");
                false
            }
        }
    }

    /// Whether sealing wrote the time index file (see [`Self::finish`]).
    pub fn time_index_persisted(&self) -> bool {
        self.time_index_written
    }

    /// The largest timestamp appended to the segment, if any.
    pub fn max_timestamp_micros(&self) -> Option<u64> {
        self.max_timestamp
    }

    /// A handle on the segment's time index, shared with the writer.
    pub fn active_time_index(&self) -> ActiveTimeIndex {
        self.time_index.clone()
    }
}
