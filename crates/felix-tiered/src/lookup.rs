//! Lookups by time through the tier: the remote segments first (their
//! newest timestamps skip them, their time indexes narrow the walk), then
//! the local shard.

use felix_format::FileKind;
use felix_format::tier_manifest::RemoteSegment;
use felix_format::time_index::decode_time_index;
use felix_storage::{ReadBound, TimestampHit};

use crate::error::TieredError;
use crate::read::check_whole;
use crate::remote::SegmentObject;
use crate::shard::TieredShard;

/// Bytes a lookup walks per fetch.
const LOOKUP_READ_BYTES: u64 = 64 << 10;

impl TieredShard {
    /// The earliest offset at or above the remote start (or, with nothing
    /// offloaded, the local start) whose record's timestamp is at least
    /// `timestamp_micros`, as [`felix_storage::Shard::offset_for_timestamp`]
    /// answers it; `None` past the end. Remote records are walked and
    /// checked as a remote read checks them.
    pub async fn offset_for_timestamp(
        &self,
        timestamp_micros: u64,
    ) -> Result<Option<TimestampHit>, TieredError> {
        let manifest = self.manifest();
        let local_start = self.shard.offsets().base;
        for segment in &manifest.segments {
            // Records the local shard still holds are its to answer for.
            if segment.extent.base_offset >= local_start {
                break;
            }
            if segment
                .max_timestamp_micros
                .is_some_and(|max| max < timestamp_micros)
            {
                continue;
            }
            let from = self
                .time_index_start(segment, timestamp_micros)
                .await?
                .max(manifest.start_offset);
            if let Some(hit) = self.walk_for(segment, from, timestamp_micros).await? {
                return Ok(Some(hit));
            }
        }
        Ok(self
            .shard
            .offset_for_timestamp(timestamp_micros, ReadBound::Committed)?)
    }

    /// Where in `segment` a record reaching `t` can first be: after the
    /// last time index entry below `t` (the segment's base without a time
    /// index).
    async fn time_index_start(&self, segment: &RemoteSegment, t: u64) -> Result<u64, TieredError> {
        if segment.time_index_len == 0 {
            return Ok(segment.extent.base_offset);
        }
        let path = self
            .remote
            .path(SegmentObject::of(segment, FileKind::TimeIndex));
        let bytes = self.remote.get(&path).await?;
        check_whole(
            &path,
            &bytes,
            segment.time_index_len,
            segment.time_index_crc,
        )?;
        let Ok(view) = decode_time_index(&bytes) else {
            // It matched the manifest's CRC, so it was uploaded so: a hint
            // that does not decode is walked around, as locally.
            return Ok(segment.extent.base_offset);
        };
        Ok(view
            .iter()
            .take_while(|e| e.timestamp_micros < t)
            .last()
            .map_or(segment.extent.base_offset, |e| e.offset + 1))
    }

    async fn walk_for(
        &self,
        segment: &RemoteSegment,
        mut at: u64,
        t: u64,
    ) -> Result<Option<TimestampHit>, TieredError> {
        while at < segment.extent.next_offset {
            let records = self.read_remote(segment, at, LOOKUP_READ_BYTES).await?;
            let Some(last) = records.last() else {
                break;
            };
            let next = last.offset + 1;
            if let Some(r) = records.iter().find(|r| r.timestamp_micros >= t) {
                return Ok(Some(TimestampHit {
                    offset: r.offset,
                    timestamp_micros: r.timestamp_micros,
                }));
            }
            at = next;
        }
        Ok(None)
    }
}
