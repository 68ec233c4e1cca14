//! Offload: upload the sealed segments local retention would delete,
//! record them in a new manifest, and only then delete them locally.

use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

use felix_format::FileKind;
use felix_format::tier_manifest::RemoteSegment;
use felix_storage::SegmentInfo;

use crate::config::TierRetention;
use crate::error::TieredError;
use crate::remote::SegmentObject;
use crate::shard::TieredShard;

/// What an offload pass did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffloadOutcome {
    /// Ids of the segments uploaded and recorded in this pass.
    pub uploaded: Vec<u64>,
    /// The local log start afterwards.
    pub local_start: u64,
    /// The manifest version in force afterwards (0: none yet).
    pub manifest_seq: u64,
}

/// The sealed segments, oldest first, that `retention` would delete now:
/// as felix-storage's retention chooses (size over the limit, or newest
/// record older than the age), stopping at the first it would keep.
pub(crate) fn doomed(
    segments: &[SegmentInfo],
    retention: &TierRetention,
    now: SystemTime,
) -> Vec<SegmentInfo> {
    let now = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let cutoff = retention
        .max_age
        .map(|age| now.saturating_sub(age).as_micros());
    let mut total: u64 = segments.iter().map(|s| s.extent.len).sum();
    let mut out = Vec::new();
    for s in segments.iter().filter(|s| !s.active) {
        let over_size = retention.max_bytes.is_some_and(|max| total > max);
        let too_old = cutoff.is_some_and(|cutoff| {
            s.max_timestamp_micros
                .is_some_and(|ts| u128::from(ts) < cutoff)
        });
        if !(over_size || too_old) {
            break;
        }
        total -= s.extent.len;
        out.push(*s);
    }
    out
}

/// A fresh upload id: 64 random bits from the standard library's hasher
/// keys (per-process random), the clock and a counter.
fn upload_id() -> u64 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish()
}

impl TieredShard {
    /// Uploads one sealed segment's three files under a fresh upload id.
    async fn upload_segment(&self, info: &SegmentInfo) -> Result<RemoteSegment, TieredError> {
        let upload = upload_id();
        // Data first, then its indexes: an object a manifest lists is
        // complete, and a crash leaves only unlisted orphans.
        let log = self.upload_file(info, upload, FileKind::Segment).await?;
        let index = self.upload_file(info, upload, FileKind::Index).await?;
        let time_index = self.upload_file(info, upload, FileKind::TimeIndex).await?;
        let entry = RemoteSegment {
            extent: info.extent,
            index_len: index.len,
            time_index_len: time_index.len,
            max_timestamp_micros: info.max_timestamp_micros,
            upload,
            segment_crc: log.crc,
            index_crc: index.crc,
            time_index_crc: time_index.crc,
        };
        Ok(entry)
    }

    /// One offload pass: uploads every sealed segment local retention
    /// would delete, writes the manifest listing them (put-if-absent), and
    /// only then deletes them locally. A failure before the manifest leaves
    /// the segments local (their objects are orphans a sweep removes); a
    /// failure after it leaves them in both places, and the next pass
    /// deletes them locally without uploading again.
    pub async fn offload(&self) -> Result<OffloadOutcome, TieredError> {
        let mut manifest = self.manifest.lock().await;
        let segments = self.shard.segments();
        let candidates = doomed(&segments, &self.config.local, SystemTime::now());
        let mut uploaded = Vec::new();
        let mut next = manifest.clone();
        for info in &candidates {
            if !next.segments.is_empty() && info.extent.next_offset <= next.next_offset() {
                continue; // listed already (a pass stopped after its manifest)
            }
            if next.segments.is_empty() {
                next.start_offset = self.shard.base_offset().max(info.extent.base_offset);
            } else if info.extent.base_offset != next.next_offset() {
                return Err(TieredError::Gap {
                    remote_end: next.next_offset(),
                    local_start: info.extent.base_offset,
                });
            }
            let entry = self.upload_segment(info).await?;
            next.segments.push(entry);
            uploaded.push(info.extent.id);
        }
        if !uploaded.is_empty() {
            next.seq = self.next_seq(manifest.seq);
            self.remote.put_manifest(&next).await?;
            *manifest = next;
            self.publish(&manifest);
        }
        // The manifest listing them is durable: now, and only now, the
        // local copies may go.
        if !manifest.segments.is_empty() {
            let end = manifest.next_offset();
            let local_end = segments
                .iter()
                .filter(|s| !s.active)
                .map(|s| s.extent.next_offset)
                .filter(|&n| n <= end)
                .max();
            if let Some(upto) = local_end
                && self.shard.base_offset() < upto
            {
                self.shard.delete_records_before(upto)?;
                self.shard.apply_retention()?;
            }
        }
        if !uploaded.is_empty() {
            let (_, versions) = self.remote.load_manifest(&self.key).await?;
            self.remote.prune_manifests(versions, manifest.seq).await;
        }
        Ok(OffloadOutcome {
            uploaded,
            local_start: self.shard.base_offset(),
            manifest_seq: manifest.seq,
        })
    }
}

impl TieredShard {
    /// Deletes the objects under the shard's prefix that the newest
    /// manifest does not list: segments of uploads that never reached their
    /// manifest (a crash, a failed put) and of remote retention passes
    /// interrupted after their manifest. Returns how many were deleted.
    ///
    /// Run it with no offload in flight on this shard (it holds the
    /// manifest lock, so an offload of this `TieredShard` waits); a second
    /// process offloading the same shard is a configuration error the
    /// manifest's put-if-absent fences.
    pub async fn sweep(&self) -> Result<usize, TieredError> {
        let manifest = self.manifest.lock().await;
        let listed: std::collections::HashSet<(u64, u64)> = manifest
            .segments
            .iter()
            .map(|s| (s.extent.id, s.upload))
            .collect();
        let mut deleted = 0;
        for object in self.remote.list().await? {
            if let felix_format::tier_manifest::RemoteObjectName::Segment { id, upload, kind } =
                object.name
                && !listed.contains(&(id, upload))
            {
                self.remote.delete(&object.path).await?;
                self.cache.forget(SegmentObject { id, upload, kind });
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}
