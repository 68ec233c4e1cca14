//! Offload: upload the sealed segments local retention would delete,
//! record them in a new manifest, and only then delete them locally.

use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

use felix_format::FileKind;
use felix_format::tier_manifest::{Manifest, RemoteObjectName, RemoteSegment};
use felix_storage::SegmentInfo;
use futures::StreamExt;

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

/// The `candidates` (oldest first) that `listed` does not cover yet, which
/// must follow on from its end without a gap.
fn to_upload(
    candidates: &[SegmentInfo],
    listed: &Manifest,
) -> Result<Vec<SegmentInfo>, TieredError> {
    let mut end = (!listed.segments.is_empty()).then(|| listed.next_offset());
    let mut out = Vec::new();
    for info in candidates {
        match end {
            // Listed already (a pass stopped after its manifest).
            Some(end) if info.extent.next_offset <= end => continue,
            Some(end) if info.extent.base_offset != end => {
                return Err(TieredError::Gap {
                    remote_end: end,
                    local_start: info.extent.base_offset,
                });
            }
            _ => {}
        }
        end = Some(info.extent.next_offset);
        out.push(*info);
    }
    Ok(out)
}

impl TieredShard {
    /// Uploads `todo` (contiguous, oldest first), up to
    /// `offload_concurrency` segments at once, and returns their manifest
    /// entries in the same order. On a failure no further segment is
    /// started, the uploads in flight are let finish (a multipart upload
    /// dropped midway would neither complete nor abort), and the first
    /// error is returned.
    async fn upload_all(&self, todo: &[SegmentInfo]) -> Result<Vec<RemoteSegment>, TieredError> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let failed = &AtomicBool::new(false);
        // `buffered` starts the next upload only when one finishes, and
        // yields the results in `todo`'s order whatever order they finish in.
        let mut uploads = futures::stream::iter(todo)
            .take_while(move |_| std::future::ready(!failed.load(Ordering::Relaxed)))
            .map(move |info| async move {
                let result = self.upload_segment(info).await;
                if result.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                result
            })
            .buffered(self.config.offload_concurrency);
        let mut entries = Vec::with_capacity(todo.len());
        let mut first_error = None;
        while let Some(result) = uploads.next().await {
            match result {
                Ok(entry) if first_error.is_none() => entries.push(entry),
                Ok(_) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(entries),
        }
    }

    /// Uploads one sealed segment's three files under a fresh upload id.
    async fn upload_segment(&self, info: &SegmentInfo) -> Result<RemoteSegment, TieredError> {
        let upload = upload_id();
        // Data first, then its indexes: an object a manifest lists is
        // complete, and a crash leaves only unlisted orphans. Each put is
        // followed by a head (in `upload_file`) and the manifest's put by a
        // read-back: those requests stay, since a put's success alone does
        // not say the store kept every byte, and local copies are deleted
        // on the strength of what the store holds. Segments go several at
        // a time instead (`upload_all`), which is where the time went.
        let log = self.upload_file(info, upload, FileKind::Segment).await?;
        let index = self.upload_file(info, upload, FileKind::Index).await?;
        let time_index = self.upload_file(info, upload, FileKind::TimeIndex).await?;
        // The object is the local segment cut to its extent, whose records
        // the upload walked to the extent's end: the manifest entry's
        // offsets and length are the local extent's.
        debug_assert_eq!(
            log.len,
            info.extent.len,
            "segment {} (offsets {}..{}) uploaded as {} bytes, its extent holds {}",
            info.extent.id,
            info.extent.base_offset,
            info.extent.next_offset,
            log.len,
            info.extent.len
        );
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
    ///
    /// Up to [`TierConfig::offload_concurrency`](crate::TierConfig::offload_concurrency)
    /// segments are uploaded at once. Their order matters only in the
    /// manifest, which lists them in offset order once every one of them is
    /// stored: an upload that fails stops the pass (the others in flight
    /// are let finish, so none is cut off mid-upload) and no manifest is
    /// written.
    pub async fn offload(&self) -> Result<OffloadOutcome, TieredError> {
        let mut manifest = self.manifest.lock().await;
        let segments = self.shard.segments();
        let candidates = doomed(&segments, &self.config.local, SystemTime::now());
        let mut next = manifest.clone();
        let todo = to_upload(&candidates, &next)?;
        if let Some(first) = todo.first()
            && next.segments.is_empty()
        {
            next.start_offset = self.shard.offsets().base.max(first.extent.base_offset);
        }
        let entries = self.upload_all(&todo).await?;
        let uploaded: Vec<u64> = todo.iter().map(|info| info.extent.id).collect();
        next.segments.extend(entries);
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
                && self.shard.offsets().base < upto
            {
                // Recorded as an offload's: an open holds the remote copy to it.
                self.shard
                    .move_log_start(upto, felix_storage::MovedBy::Offload)?;
                self.shard.apply_retention()?;
            }
        }
        if !uploaded.is_empty() {
            // Only the versions' names are needed to prune: a list, not a
            // load (which would fetch and decode the manifest just put and
            // read back).
            let versions = self
                .remote
                .list()
                .await?
                .into_iter()
                .filter_map(|l| match l.name {
                    RemoteObjectName::Manifest(seq) => Some((seq, l.path)),
                    _ => None,
                })
                .collect();
            self.remote.prune_manifests(versions, manifest.seq).await;
        }
        Ok(OffloadOutcome {
            uploaded,
            local_start: self.shard.offsets().base,
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;
    use felix_format::{SegmentExtent, ShardKey};

    fn info(id: u64, base_offset: u64, next_offset: u64) -> SegmentInfo {
        SegmentInfo {
            extent: SegmentExtent {
                id,
                base_offset,
                next_offset,
                len: 100,
            },
            active: false,
            max_timestamp_micros: None,
        }
    }

    fn listed(segments: &[SegmentInfo]) -> Manifest {
        Manifest {
            seq: 1,
            key: ShardKey::new("t", "n", "s", 0),
            start_offset: segments.first().map_or(0, |s| s.extent.base_offset),
            segments: segments
                .iter()
                .map(|s| RemoteSegment {
                    extent: s.extent,
                    index_len: 0,
                    time_index_len: 0,
                    max_timestamp_micros: None,
                    upload: 1,
                    segment_crc: 0,
                    index_crc: 0,
                    time_index_crc: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn to_upload_skips_what_is_listed_and_refuses_a_gap() {
        let (a, b, c) = (info(0, 0, 10), info(1, 10, 20), info(2, 20, 30));
        let ids = |v: Vec<SegmentInfo>| v.iter().map(|s| s.extent.id).collect::<Vec<_>>();
        // Nothing listed: all of them, in order.
        assert_eq!(ids(to_upload(&[a, b, c], &listed(&[])).unwrap()), [0, 1, 2]);
        // The listed ones are passed over.
        assert_eq!(ids(to_upload(&[a, b, c], &listed(&[a])).unwrap()), [1, 2]);
        assert!(to_upload(&[a, b], &listed(&[a, b])).unwrap().is_empty());
        // A candidate that does not follow the remote end is a gap.
        assert!(matches!(
            to_upload(&[c], &listed(&[a])),
            Err(TieredError::Gap {
                remote_end: 10,
                local_start: 20
            })
        ));
        // So is one that does not follow the candidate before it.
        assert!(matches!(
            to_upload(&[a, c], &listed(&[])),
            Err(TieredError::Gap {
                remote_end: 10,
                local_start: 20
            })
        ));
    }
}
