//! Offload: upload the sealed segments local retention would delete,
//! record them in a new manifest, and only then delete them locally.

use std::hash::{BuildHasher, Hasher};
use std::path::Path as FsPath;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload, WriteMultipart};

use felix_format::tier_manifest::RemoteSegment;
use felix_format::{
    CorruptionKind, CursorStep, FileKind, RecordCursor, SEGMENT_HEADER_LEN, ScanDepth,
    SegmentHeader, file_name,
};
use felix_io::OpenMode;
use felix_storage::{FileSystem, SegmentInfo};

use crate::config::TierRetention;
use crate::error::TieredError;
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

/// Reads a whole local file through the shard's file system (a missing
/// optional file reads as empty). The sealed files are small enough to
/// hold whole; the upload needs them in memory for the CRC anyway.
fn read_local(fs: &FileSystem, path: &FsPath, optional: bool) -> Result<Vec<u8>, TieredError> {
    let err = |source| TieredError::LocalFile {
        path: path.to_path_buf(),
        source,
    };
    let file = match fs.open(path, OpenMode::Read) {
        Ok(f) => f,
        Err(e) if optional && e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(err(e)),
    };
    let len = file.file_len().map_err(err)?;
    let mut bytes = vec![0; usize::try_from(len).unwrap_or(usize::MAX)];
    file.read_exact_at(&mut bytes, 0).map_err(err)?;
    Ok(bytes)
}

/// Checks every record of a sealed segment's bytes exactly as a read
/// would, before they leave the disk: rot is never offloaded.
fn check_segment(path: &FsPath, bytes: &[u8], info: &SegmentInfo) -> Result<(), TieredError> {
    let found_next = walk_records(bytes).map_err(|(position, kind)| TieredError::LocalCorrupt {
        path: path.to_path_buf(),
        position,
        kind,
    })?;
    if found_next != info.extent.next_offset {
        return Err(TieredError::LocalExtent {
            path: path.to_path_buf(),
            expected_next: info.extent.next_offset,
            found_next,
        });
    }
    Ok(())
}

/// Walks every record of a whole sealed segment's bytes at full depth
/// (header, then each record's header and payload checksums and offsets).
/// Returns one past the last record's offset, or where and how it is
/// damaged.
pub(crate) fn walk_records(bytes: &[u8]) -> Result<u64, (u64, CorruptionKind)> {
    let header = SegmentHeader::decode(bytes).map_err(|k| (0, k))?;
    let mut cursor = RecordCursor::new(
        SEGMENT_HEADER_LEN as u64,
        header.base_offset,
        bytes.len() as u64,
        ScanDepth::Full,
    );
    loop {
        let from = usize::try_from(cursor.position()).unwrap_or(usize::MAX);
        match cursor.step(bytes.get(from..).unwrap_or_default()) {
            CursorStep::Record(_) => {}
            CursorStep::End => break,
            CursorStep::Damage(d) => return Err((d.position, d.kind)),
            // The whole file is in hand, so the cursor never needs more
            // (and `step` never declines).
            CursorStep::NeedBytes { needed } => {
                return Err((
                    cursor.position(),
                    CorruptionKind::Truncated {
                        needed,
                        available: bytes.len() as u64 - cursor.position(),
                    },
                ));
            }
            CursorStep::Declined { .. } => break,
        }
    }
    Ok(cursor.next_offset())
}

impl TieredShard {
    /// Puts one object (multipart above the part size) and checks that the
    /// store holds exactly its length: a store that kept a truncated
    /// object fails here, before any manifest lists it.
    async fn put_object(&self, path: &Path, bytes: Bytes) -> Result<(), TieredError> {
        let store = &self.remote.store;
        let len = bytes.len() as u64;
        if len <= self.config.part_bytes {
            store
                .put(path, PutPayload::from(bytes))
                .await
                .map_err(|e| TieredError::store("put", path, e))?;
        } else {
            let upload = store
                .put_multipart(path)
                .await
                .map_err(|e| TieredError::store("put", path, e))?;
            let part = usize::try_from(self.config.part_bytes).unwrap_or(usize::MAX);
            let mut writer = WriteMultipart::new_with_chunk_size(upload, part);
            let mut at = 0;
            while at < bytes.len() {
                let end = (at + part).min(bytes.len());
                if let Err(e) = writer
                    .wait_for_capacity(self.config.upload_concurrency)
                    .await
                {
                    let _ = writer.abort().await;
                    return Err(TieredError::store("put", path, e));
                }
                writer.put(bytes.slice(at..end));
                at = end;
            }
            writer
                .finish()
                .await
                .map_err(|e| TieredError::store("put", path, e))?;
        }
        let meta = store
            .head(path)
            .await
            .map_err(|e| TieredError::store("head", path, e))?;
        if meta.size != len {
            return Err(TieredError::RemoteLength {
                object: path.clone(),
                expected: len,
                found: meta.size,
            });
        }
        Ok(())
    }

    /// Uploads one sealed segment's three files under a fresh upload id.
    async fn upload_segment(&self, info: &SegmentInfo) -> Result<RemoteSegment, TieredError> {
        let dir = self.shard.dir();
        let fs = self.shard.file_system();
        let id = info.extent.id;
        let log_path = dir.join(file_name(id, FileKind::Segment).as_str());
        let mut log = read_local(fs, &log_path, false)?;
        // Sealed segments are cut to their records; anything past the
        // extent is not the segment's.
        log.truncate(usize::try_from(info.extent.len).unwrap_or(usize::MAX));
        check_segment(&log_path, &log, info)?;
        let index = read_local(fs, &dir.join(file_name(id, FileKind::Index).as_str()), true)?;
        let time_index = read_local(
            fs,
            &dir.join(file_name(id, FileKind::TimeIndex).as_str()),
            true,
        )?;
        let upload = upload_id();
        let entry = RemoteSegment {
            extent: info.extent,
            index_len: index.len() as u64,
            time_index_len: time_index.len() as u64,
            max_timestamp_micros: info.max_timestamp_micros,
            upload,
            segment_crc: crc32fast::hash(&log),
            index_crc: crc32fast::hash(&index),
            time_index_crc: crc32fast::hash(&time_index),
        };
        // Data first, then its indexes: an object a manifest lists is
        // complete, and a crash leaves only unlisted orphans.
        for (kind, bytes) in [
            (FileKind::Segment, log),
            (FileKind::Index, index),
            (FileKind::TimeIndex, time_index),
        ] {
            let path = self.remote.segment_object(id, upload, kind);
            self.put_object(&path, Bytes::from(bytes)).await?;
        }
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
            if let felix_format::tier_manifest::RemoteObjectName::Segment { id, upload, .. } =
                object.name
                && !listed.contains(&(id, upload))
            {
                self.remote.delete(&object.path).await?;
                self.cache.forget(&object.path);
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}
