//! One shard's objects in the store: its manifest versions and segment
//! objects, read and written in the documented order.

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};

use felix_format::tier_manifest::{
    Manifest, RemoteObjectName, RemoteSegment, decode_manifest, encode_manifest,
    manifest_object_name, segment_object_name,
};
use felix_format::{FileKind, ShardKey};

use crate::error::TieredError;
use crate::stores::TierStore;

/// Manifest versions kept: the newest and the one before it.
const MANIFESTS_KEPT: usize = 2;

/// A shard's prefix in a store.
#[derive(Debug, Clone)]
pub(crate) struct Remote {
    pub(crate) store: TierStore,
    /// `{prefix}/{dir_name}`.
    pub(crate) base: String,
}

/// One of a segment upload's objects, by the parts of its name. The read
/// cache keys on it, so a warm read builds no object path: building one
/// (formatting, then `Path`'s parsing and percent-encoding) cost more than
/// the rest of a warm read together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SegmentObject {
    pub(crate) id: u64,
    pub(crate) upload: u64,
    pub(crate) kind: FileKind,
}

impl SegmentObject {
    /// Object `kind` of the upload `segment` names.
    pub(crate) fn of(segment: &RemoteSegment, kind: FileKind) -> Self {
        SegmentObject {
            id: segment.extent.id,
            upload: segment.upload,
            kind,
        }
    }
}

/// An object under a shard's prefix, by what its name says.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub(crate) path: Path,
    pub(crate) name: RemoteObjectName,
    /// Bytes the store holds.
    pub(crate) size: u64,
}

/// Asserts, in debug builds, what a manifest's writer keeps and its
/// reader (`decode_manifest`) checks: segment ids ascend, each segment
/// begins where the one before it ends, and the start offset lies inside
/// the first segment. A manifest that breaks
/// it would be put and then refused by every reader, so the writer is
/// caught before the put; `when` names the boundary.
pub(crate) fn debug_assert_manifest(when: &str, manifest: &Manifest) {
    if !cfg!(debug_assertions) {
        return;
    }
    let seq = manifest.seq;
    if let Some(first) = manifest.segments.first() {
        debug_assert!(
            first.extent.contains(manifest.start_offset),
            "manifest {seq} {when}: start offset {} outside its first segment {} (offsets {}..{})",
            manifest.start_offset,
            first.extent.id,
            first.extent.base_offset,
            first.extent.next_offset
        );
    }
    for pair in manifest.segments.windows(2) {
        if let [previous, segment] = pair {
            debug_assert!(
                segment.extent.id > previous.extent.id
                    && segment.extent.base_offset == previous.extent.next_offset,
                "manifest {seq} {when}: segment {} (offsets {}..{}) does not follow segment {} (offsets {}..{})",
                segment.extent.id,
                segment.extent.base_offset,
                segment.extent.next_offset,
                previous.extent.id,
                previous.extent.base_offset,
                previous.extent.next_offset
            );
        }
    }
}

impl Remote {
    pub(crate) fn new(store: TierStore, prefix: &str, key: &ShardKey) -> Self {
        Remote {
            store,
            base: format!("{prefix}/{}", key.dir_name()),
        }
    }

    pub(crate) fn object(&self, relative: &str) -> Path {
        Path::from(format!("{}/{relative}", self.base))
    }

    /// The path of `object`.
    pub(crate) fn path(&self, object: SegmentObject) -> Path {
        self.object(&segment_object_name(object.id, object.upload, object.kind))
    }

    /// Every object under the shard's prefix, classified.
    pub(crate) async fn list(&self) -> Result<Vec<Listed>, TieredError> {
        let prefix = Path::from(self.base.as_str());
        let metas: Vec<object_store::ObjectMeta> = self
            .store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| TieredError::store("list", &prefix, e))?;
        let strip = format!("{}/", self.base);
        Ok(metas
            .into_iter()
            .map(|m| {
                let name = m
                    .location
                    .as_ref()
                    .strip_prefix(&strip)
                    .map_or(RemoteObjectName::Other, RemoteObjectName::parse);
                Listed {
                    path: m.location,
                    name,
                    size: m.size,
                }
            })
            .collect())
    }

    /// The newest manifest that decodes, and every manifest object's path
    /// with its seq (for pruning). A newer version that does not decode is
    /// logged and passed over: the one before it is still whole. `None`
    /// when the shard has no manifest yet.
    pub(crate) async fn load_manifest(
        &self,
        key: &ShardKey,
    ) -> Result<(Option<Manifest>, Vec<(u64, Path)>), TieredError> {
        let mut versions: Vec<(u64, Path)> = self
            .list()
            .await?
            .into_iter()
            .filter_map(|l| match l.name {
                RemoteObjectName::Manifest(seq) => Some((seq, l.path)),
                _ => None,
            })
            .collect();
        versions.sort_by_key(|(seq, _)| *seq);
        let mut first_error = None;
        for (seq, path) in versions.iter().rev() {
            let bytes = self.get(path).await?;
            match decode_manifest(&bytes) {
                Ok(view) if view.seq == *seq => {
                    if !view.key.is(key) {
                        return Err(TieredError::KeyMismatch {
                            object: path.clone(),
                        });
                    }
                    let manifest = view.to_manifest();
                    debug_assert_manifest("after get", &manifest);
                    return Ok((Some(manifest), versions));
                }
                Ok(_) | Err(_) => {
                    let err = decode_manifest(&bytes).err();
                    tracing::warn!(object = %path, error = ?err, "remote manifest does not decode; trying the version before it");
                    if first_error.is_none() {
                        first_error = err.map(|source| TieredError::Manifest {
                            object: path.clone(),
                            source,
                        });
                    }
                }
            }
        }
        match first_error {
            // Manifests exist but none decodes: refusing is the only safe
            // answer (treating the shard as having none could re-upload
            // over, or delete, what they list).
            Some(err) => Err(err),
            None => Ok((None, versions)),
        }
    }

    /// Writes manifest `manifest.seq` with put-if-absent, then reads it
    /// back before anything relies on it.
    ///
    /// A put reported failed may have been applied: a server (or a gateway
    /// in front of it) can store the object and then answer 503, or lose
    /// its answer, and `object_store` then retries the put-if-absent, which
    /// finds the object there (`AlreadyExists`, from a 409 or 412). So a
    /// failed put is settled by reading the object back: this writer's own
    /// bytes are success (they name fresh random upload ids, so no other
    /// writer's manifest is byte-for-byte equal), another writer's manifest
    /// is [`TieredError::Fenced`], and no object at all returns the put's
    /// own error.
    pub(crate) async fn put_manifest(&self, manifest: &Manifest) -> Result<(), TieredError> {
        debug_assert_manifest("before put", manifest);
        let mut bytes = Vec::new();
        encode_manifest(manifest, &mut bytes).map_err(TieredError::Encode)?;
        let path = self.object(&manifest_object_name(manifest.seq));
        let opts = PutOptions::from(PutMode::Create);
        let payload = PutPayload::from(Bytes::from(bytes.clone()));
        match self.store.put_opts(&path, payload, opts).await {
            Ok(_) => self.check_new_manifest(path, &bytes).await,
            Err(error) => self.settle_failed_put(path, &bytes, error).await,
        }
    }

    /// After a put the store accepted: the object must hold `sent`.
    async fn check_new_manifest(&self, path: Path, sent: &[u8]) -> Result<(), TieredError> {
        // Local segments are deleted on the strength of this object, and a
        // store that kept a truncated or altered copy (and said it
        // succeeded) must be caught here, not by the next reader.
        let stored = self.get(&path).await?;
        if stored[..] == sent[..] {
            return Ok(());
        }
        // Never relied on: remove it so readers do not trip over it (if
        // this fails too, readers pass over it to the version before, and
        // the next write takes a higher number).
        if let Err(e) = self.delete(&path).await {
            tracing::warn!(object = %path, error = %e, "damaged new manifest not deleted");
        }
        Err(match decode_manifest(&stored) {
            Err(source) => TieredError::Manifest {
                object: path,
                source,
            },
            Ok(_) => TieredError::RemoteLength {
                object: path,
                expected: sent.len() as u64,
                found: stored.len() as u64,
            },
        })
    }

    /// After a put the store reported failed: whether it was applied after
    /// all, decided by what the object holds.
    async fn settle_failed_put(
        &self,
        path: Path,
        sent: &[u8],
        error: object_store::Error,
    ) -> Result<(), TieredError> {
        let stored = match self.store.get(&path).await {
            Ok(result) => result.bytes().await,
            Err(e) => Err(e),
        };
        match stored {
            Ok(stored) if stored[..] == sent[..] => {
                tracing::info!(object = %path, error = %error, "manifest put reported failed, but the store holds this writer's bytes: it was applied");
                Ok(())
            }
            // Someone else's manifest under this number: never deleted, it
            // may be the one that writer relies on.
            Ok(stored) => match decode_manifest(&stored) {
                Ok(_) => Err(TieredError::Fenced { object: path }),
                // Not a manifest at all (this writer's put, cut short by the
                // store, or debris): readers pass over it, and the next
                // write takes a higher number.
                Err(source) => Err(TieredError::Manifest {
                    object: path,
                    source,
                }),
            },
            Err(object_store::Error::NotFound { .. }) => {
                Err(TieredError::store("put", &path, error))
            }
            // Unknown whether it was applied: the put's failure stands, and
            // the next pass writes a higher number.
            Err(get_error) => {
                tracing::warn!(object = %path, error = %get_error, "failed manifest put not read back");
                Err(TieredError::store("put", &path, error))
            }
        }
    }

    /// Deletes manifest versions older than the newest [`MANIFESTS_KEPT`];
    /// a failure is logged and left for the next pass.
    pub(crate) async fn prune_manifests(&self, mut versions: Vec<(u64, Path)>, newest: u64) {
        versions.retain(|(seq, _)| *seq <= newest);
        versions.sort_by_key(|(seq, _)| *seq);
        let old = versions.len().saturating_sub(MANIFESTS_KEPT);
        for (_, path) in versions.into_iter().take(old) {
            if let Err(e) = self.delete(&path).await {
                tracing::warn!(object = %path, error = %e, "old manifest not deleted; the next pass retries");
            }
        }
    }

    pub(crate) async fn get(&self, path: &Path) -> Result<Bytes, TieredError> {
        let result = self
            .store
            .get(path)
            .await
            .map_err(|e| TieredError::store("get", path, e))?;
        result
            .bytes()
            .await
            .map_err(|e| TieredError::store("get", path, e))
    }

    pub(crate) async fn get_range(
        &self,
        path: &Path,
        range: std::ops::Range<u64>,
    ) -> Result<Bytes, TieredError> {
        self.store
            .get_range(path, range)
            .await
            .map_err(|e| TieredError::store("get", path, e))
    }

    /// Deletes one object; one already gone is fine.
    pub(crate) async fn delete(&self, path: &Path) -> Result<(), TieredError> {
        match self.store.delete(path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(TieredError::store("delete", path, e)),
        }
    }
}

#[cfg(all(test, debug_assertions))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use felix_format::SegmentExtent;

    fn segment(id: u64, base_offset: u64, next_offset: u64) -> RemoteSegment {
        RemoteSegment {
            extent: SegmentExtent {
                id,
                base_offset,
                next_offset,
                len: 100,
            },
            index_len: 0,
            time_index_len: 0,
            max_timestamp_micros: None,
            upload: 1,
            segment_crc: 0,
            index_crc: 0,
            time_index_crc: 0,
        }
    }

    async fn put(start_offset: u64, segments: Vec<RemoteSegment>) {
        let key = ShardKey::new("t", "n", "s", 0);
        let remote = Remote::new(crate::stores::in_memory(), "p", &key);
        let manifest = Manifest {
            seq: 2,
            key,
            start_offset,
            segments,
        };
        let _ = remote.put_manifest(&manifest).await;
    }

    #[tokio::test]
    #[should_panic(
        expected = "manifest 2 before put: segment 1 (offsets 12..20) does not follow segment 0 (offsets 0..10)"
    )]
    async fn put_manifest_with_a_gap_fails_the_assertion() {
        put(0, vec![segment(0, 0, 10), segment(1, 12, 20)]).await;
    }

    #[tokio::test]
    #[should_panic(
        expected = "manifest 2 before put: start offset 10 outside its first segment 0 (offsets 0..10)"
    )]
    async fn put_manifest_starting_past_its_first_segment_fails_the_assertion() {
        put(10, vec![segment(0, 0, 10), segment(1, 10, 20)]).await;
    }

    #[tokio::test]
    async fn put_manifest_contiguous_is_read_back_whole() {
        let key = ShardKey::new("t", "n", "s", 0);
        let remote = Remote::new(crate::stores::in_memory(), "p", &key);
        let manifest = Manifest {
            seq: 2,
            key: key.clone(),
            start_offset: 5,
            segments: vec![segment(0, 0, 10), segment(1, 10, 20)],
        };
        remote.put_manifest(&manifest).await.unwrap();
        let (loaded, _) = remote.load_manifest(&key).await.unwrap();
        assert_eq!(loaded, Some(manifest));
    }
}
