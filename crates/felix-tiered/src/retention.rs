//! Remote retention: the oldest remote segments leave the manifest first,
//! and only then are their objects deleted.

use std::time::{SystemTime, UNIX_EPOCH};

use felix_format::FileKind;
use felix_format::tier_manifest::RemoteSegment;

use crate::config::TierRetention;
use crate::error::TieredError;
use crate::remote::SegmentObject;
use crate::shard::TieredShard;

/// How many of the oldest `segments` `retention` deletes now: while the
/// total is over the size limit or the segment's newest record is older
/// than the age limit, stopping at the first it keeps.
fn doomed_count(segments: &[RemoteSegment], retention: &TierRetention, now: SystemTime) -> usize {
    let now = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let cutoff = retention
        .max_age
        .map(|age| now.saturating_sub(age).as_micros());
    let mut total: u64 = segments.iter().map(|s| s.extent.len).sum();
    let mut count = 0;
    for s in segments {
        let over_size = retention.max_bytes.is_some_and(|max| total > max);
        let too_old =
            cutoff.is_some_and(|c| s.max_timestamp_micros.is_some_and(|ts| u128::from(ts) < c));
        if !(over_size || too_old) {
            break;
        }
        total -= s.extent.len;
        count += 1;
    }
    count
}

impl TieredShard {
    /// Applies the remote retention now: writes the manifest without the
    /// oldest remote segments it removes (reads below the new remote start
    /// are then [`TieredError::Trimmed`]), and only after that deletes
    /// their objects. Returns the ids removed. A failed delete is logged
    /// and left to [`TieredShard::sweep`]: the objects are unlisted already.
    pub async fn apply_remote_retention(&self) -> Result<Vec<u64>, TieredError> {
        self.apply_remote_retention_at(SystemTime::now()).await
    }

    /// [`TieredShard::apply_remote_retention`] with ages measured at `now`.
    pub async fn apply_remote_retention_at(
        &self,
        now: SystemTime,
    ) -> Result<Vec<u64>, TieredError> {
        let mut manifest = self.manifest.lock().await;
        let count = doomed_count(&manifest.segments, &self.config.remote, now);
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut next = manifest.clone();
        let removed: Vec<RemoteSegment> = next.segments.drain(..count).collect();
        next.seq = self.next_seq(manifest.seq);
        next.start_offset = next
            .segments
            .first()
            .map_or(manifest.next_offset(), |s| s.extent.base_offset);
        self.remote.put_manifest(&next).await?;
        *manifest = next;
        self.publish(&manifest);
        for s in &removed {
            for kind in [FileKind::Segment, FileKind::Index, FileKind::TimeIndex] {
                let object = SegmentObject::of(s, kind);
                self.cache.forget(object);
                let path = self.remote.path(object);
                if let Err(e) = self.remote.delete(&path).await {
                    tracing::warn!(object = %path, error = %e, "unlisted remote object not deleted; a sweep removes it");
                }
            }
        }
        let (_, versions) = self.remote.load_manifest(&self.key).await?;
        self.remote.prune_manifests(versions, manifest.seq).await;
        Ok(removed.iter().map(|s| s.extent.id).collect())
    }
}
