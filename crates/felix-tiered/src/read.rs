//! Reads through the tier: local first, then the remote segments the
//! manifest lists, every record checked as a local read checks it.

use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;

use felix_format::tier_manifest::RemoteSegment;
use felix_format::{
    CursorStep, FileKind, IndexEntry, RecordCursor, SEGMENT_HEADER_LEN, ScanDepth, parse_index,
};
use felix_storage::{ReadBound, ReadRecord, StorageError};

use crate::error::TieredError;
use crate::remote::SegmentObject;
use crate::shard::TieredShard;

impl TieredShard {
    /// Reads whole records from `from` on, about `max_bytes` of them (at
    /// least one if any is readable at `from`), as [`felix_storage::Shard::read`]
    /// does: at or above the local log start from the local shard, below it
    /// from the remote segment holding `from` (one segment per call; call
    /// again from the last offset + 1). Below the remote start (or, with
    /// nothing offloaded, the local start) is [`TieredError::Trimmed`].
    pub async fn read(&self, from: u64, max_bytes: u64) -> Result<Vec<ReadRecord>, TieredError> {
        if from >= self.shard.offsets().base {
            match self.shard.read(from, max_bytes, ReadBound::Committed) {
                // An offload moved the local start past `from` meanwhile:
                // the records are remote now.
                Err(StorageError::Trimmed { .. }) => {}
                other => return Ok(other?),
            }
        }
        let manifest = self.manifest();
        let Some(segment) = manifest
            .segments
            .iter()
            .find(|s| s.extent.contains(from) && from >= manifest.start_offset)
        else {
            let oldest = if manifest.segments.is_empty() {
                self.shard.offsets().base
            } else {
                manifest.start_offset
            };
            if from >= oldest {
                // Past the remote end and not local: the local shard says
                // what it holds there.
                return Ok(self.shard.read(from, max_bytes, ReadBound::Committed)?);
            }
            return Err(TieredError::Trimmed {
                requested: from,
                oldest,
            });
        };
        self.read_remote(segment, from, max_bytes).await
    }

    /// Fetches chunk `chunk` of `object` (`len` bytes in all) through the
    /// cache, checking it arrived whole. Its path is built only to fetch.
    async fn chunk(
        &self,
        object: SegmentObject,
        len: u64,
        chunk: u64,
    ) -> Result<Bytes, TieredError> {
        if let Some(bytes) = self.cache.get(object, chunk) {
            return Ok(bytes);
        }
        let path = self.remote.path(object);
        let size = self.config.chunk_bytes;
        let start = chunk.saturating_mul(size).min(len);
        let end = start.saturating_add(size).min(len);
        let bytes = self.remote.get_range(&path, start..end).await?;
        // A range past the end comes back short, not as an error: a
        // truncated object must be reported, never read as a short segment.
        if bytes.len() as u64 != end - start {
            return Err(TieredError::RemoteLength {
                object: path,
                expected: len,
                found: start + bytes.len() as u64,
            });
        }
        self.cache.insert(object, chunk, bytes.clone());
        Ok(bytes)
    }

    /// A remote segment's index object, whole, matching its CRC and
    /// parsed. It is fetched and parsed once and then kept in the cache
    /// under its object, whose name includes the segment's upload: another
    /// upload of the segment (a new manifest) never finds this one's index.
    async fn index(&self, segment: &RemoteSegment) -> Result<Arc<[IndexEntry]>, TieredError> {
        let object = SegmentObject::of(segment, FileKind::Index);
        if let Some(entries) = self.cache.get_index(object) {
            return Ok(entries);
        }
        let path = self.remote.path(object);
        let bytes = self.remote.get(&path).await?;
        check_whole(&path, &bytes, segment.index_len, segment.index_crc)?;
        let entries: Arc<[IndexEntry]> =
            match parse_index(&bytes, segment.extent.base_offset, segment.extent.len) {
                Ok(view) => view.iter().collect(),
                Err(kind) => {
                    return Err(TieredError::RemoteCorrupt {
                        object: path,
                        position: 0,
                        kind,
                    });
                }
            };
        self.cache.insert_index(object, Arc::clone(&entries));
        Ok(entries)
    }

    /// Where to start walking for `from`: the last index entry at or below
    /// it, or the first record.
    ///
    /// An index is only an accelerator, remote as local: one whose object
    /// is damaged (not the length or CRC the manifest lists, or not an
    /// index of this segment) or missing is walked around from the
    /// segment's first record, whose position is certain, as a local read
    /// walks around a stale entry, and counted
    /// ([`TieredShard::unusable_remote_indexes`]). The records the walk
    /// reads are checked as always, so no answer depends on the index. A
    /// store that fails the request otherwise is still an error: nothing
    /// says the object is damaged.
    async fn start_for(
        &self,
        segment: &RemoteSegment,
        from: u64,
    ) -> Result<(u64, u64), TieredError> {
        let first = (SEGMENT_HEADER_LEN as u64, segment.extent.base_offset);
        if segment.index_len == 0 {
            return Ok(first);
        }
        let index = match self.index(segment).await {
            Ok(index) => index,
            Err(
                e @ (TieredError::RemoteLength { .. }
                | TieredError::RemoteChecksum { .. }
                | TieredError::RemoteCorrupt { .. }
                | TieredError::RemoteMissing { .. }
                | TieredError::Store {
                    source: object_store::Error::NotFound { .. },
                    ..
                }),
            ) => {
                tracing::warn!(error = %e, segment = segment.extent.id, "remote index unusable; its segment is read from the first record");
                // Kept as an index without entries: the segment's next
                // reads start at the first record without asking for the
                // object again.
                self.cache
                    .insert_unusable_index(SegmentObject::of(segment, FileKind::Index));
                return Ok(first);
            }
            Err(e) => return Err(e),
        };
        // parse_index checked the offsets ascend, so a binary search finds
        // the last entry at or below `from`.
        let below = index.partition_point(|e| e.offset <= from);
        Ok(below
            .checked_sub(1)
            .and_then(|i| index.get(i))
            .map_or(first, |e| (e.position, e.offset)))
    }

    /// Remote index objects found unusable (damaged: not the length or CRC
    /// the manifest lists, or not an index of their segment; or missing)
    /// since the tier opened, each counted when it is fetched: reads of its
    /// segment walk from the first record instead, and give the same
    /// records. The object is fetched (and counted) again only after the
    /// read cache has dropped it. Not zero means damage to the remote copy:
    /// the warning logged with each names the object.
    pub fn unusable_remote_indexes(&self) -> u64 {
        self.cache.unusable_indexes()
    }

    pub(crate) async fn read_remote(
        &self,
        segment: &RemoteSegment,
        from: u64,
        max_bytes: u64,
    ) -> Result<Vec<ReadRecord>, TieredError> {
        let start = self.start_for(segment, from).await?;
        match self.walk_remote(segment, start, from, max_bytes).await {
            // The index is a hint: an entry that points at no record (a
            // stale index uploaded as it was) is retried from the first
            // record, whose position is certain.
            Err(TieredError::RemoteCorrupt { .. }) if start.0 != SEGMENT_HEADER_LEN as u64 => {
                let first = (SEGMENT_HEADER_LEN as u64, segment.extent.base_offset);
                self.walk_remote(segment, first, from, max_bytes).await
            }
            other => other,
        }
    }

    async fn walk_remote(
        &self,
        segment: &RemoteSegment,
        (position, offset): (u64, u64),
        from: u64,
        max_bytes: u64,
    ) -> Result<Vec<ReadRecord>, TieredError> {
        let object = SegmentObject::of(segment, FileKind::Segment);
        let len = segment.extent.len;
        let size = self.config.chunk_bytes;
        let mut cursor = RecordCursor::new(position, offset, len, ScanDepth::Full);
        // `buf` holds the object's bytes from `buf_start` on.
        let mut buf_start = position;
        let mut buf = Bytes::new();
        let mut next_chunk = position / size;
        let mut out = Vec::new();
        let mut taken = 0u64;
        loop {
            let at = usize::try_from(cursor.position() - buf_start).unwrap_or(usize::MAX);
            match cursor.step(buf.get(at..).unwrap_or_default()) {
                CursorStep::NeedBytes { .. } => {
                    // Drop what the walk is past, then fetch the next chunk.
                    let rest = buf.slice(at.min(buf.len())..);
                    buf_start = cursor.position();
                    let chunk = self.chunk(object, len, next_chunk).await?;
                    let chunk_start = next_chunk * size;
                    let skip = usize::try_from(buf_start.saturating_sub(chunk_start))
                        .unwrap_or(usize::MAX);
                    buf = if rest.is_empty() {
                        // The walk reads the cached chunk in place: a warm
                        // read copies no more than its records' payloads.
                        chunk.slice(skip.min(chunk.len())..)
                    } else {
                        // A record runs on into this chunk: join the two.
                        let mut joined = Vec::with_capacity(rest.len() + chunk.len());
                        joined.extend_from_slice(&rest);
                        joined.extend_from_slice(&chunk);
                        Bytes::from(joined)
                    };
                    next_chunk += 1;
                }
                CursorStep::Record(record) => {
                    if record.header.offset < from {
                        continue;
                    }
                    let len = record.encoded_len();
                    if !out.is_empty() && taken + len > max_bytes {
                        break;
                    }
                    taken += len;
                    out.push(ReadRecord {
                        offset: record.header.offset,
                        timestamp_micros: record.header.timestamp_micros,
                        payload: Bytes::copy_from_slice(record.payload().unwrap_or_default()),
                    });
                    if taken >= max_bytes {
                        break;
                    }
                }
                CursorStep::End | CursorStep::Declined { .. } => break,
                CursorStep::Damage(d) => {
                    return Err(TieredError::RemoteCorrupt {
                        object: self.remote.path(object),
                        position: d.position,
                        kind: d.kind,
                    });
                }
            }
        }
        Ok(out)
    }
}

/// Checks a whole object against the manifest's length and CRC.
pub(crate) fn check_whole(
    object: &Path,
    bytes: &[u8],
    len: u64,
    crc: u32,
) -> Result<(), TieredError> {
    check_counts(
        object,
        (len, crc),
        (bytes.len() as u64, crc32fast::hash(bytes)),
    )
}

/// Checks an object's length and CRC-32 as found against the manifest's
/// (`(len, crc)` each; the length first, since a short object's CRC says
/// nothing more).
pub(crate) fn check_counts(
    object: &Path,
    (len, crc): (u64, u32),
    (found_len, found_crc): (u64, u32),
) -> Result<(), TieredError> {
    if found_len != len {
        return Err(TieredError::RemoteLength {
            object: object.clone(),
            expected: len,
            found: found_len,
        });
    }
    if found_crc != crc {
        return Err(TieredError::RemoteChecksum {
            object: object.clone(),
            expected: crc,
            found: found_crc,
        });
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::config::{TierConfig, TierRetention};
    use felix_format::ShardKey;
    use felix_storage::{Record, Shard, StoreConfig};

    #[tokio::test]
    async fn a_segments_index_is_parsed_once_and_then_shared() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            segment_size_bytes: 1024,
            index_spacing_bytes: 128,
            ..StoreConfig::default()
        };
        let shard = Arc::new(Shard::options(dir.path()).config(config).open().unwrap());
        for offset in 0..100u64 {
            shard
                .append(&[Record::new(offset, vec![7; 40])])
                .wait()
                .unwrap();
        }
        let tier = TierConfig {
            local: TierRetention {
                max_bytes: Some(1500),
                max_age: None,
            },
            chunk_bytes: 4096,
            cache_bytes: 64 << 10,
            ..TierConfig::default()
        };
        let key = ShardKey::new("t", "n", "s", 0);
        let tiered = TieredShard::open(shard, key, crate::stores::in_memory(), tier)
            .await
            .unwrap();
        tiered.offload().await.unwrap();
        let manifest = tiered.manifest();
        let segment = manifest.segments.iter().find(|s| s.index_len > 0).unwrap();
        let first = tiered.index(segment).await.unwrap();
        assert!(!first.is_empty());
        let second = tiered.index(segment).await.unwrap();
        assert!(Arc::ptr_eq(&first, &second));
    }
}
