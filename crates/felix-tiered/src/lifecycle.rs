//! Deleting a tiered shard: its local directory, then its remote objects.

use felix_format::ShardKey;
use felix_format::tier_manifest::RemoteObjectName;
use felix_storage::Store;

use crate::error::TieredError;
use crate::remote::Remote;
use crate::stores::TierStore;

/// Deletes shard `key` from `store` and its remote copy under `prefix`.
///
/// Order: the local directory first (the store's durable tombstone rename,
/// after which the shard is gone for every reader), then the remote
/// segment objects, then the manifest versions, oldest first. A crash in
/// between leaves remote objects of a key with no local shard, never a
/// local shard whose remote records vanished under it; calling this again
/// (the local shard already gone is fine) removes them. Returns how many
/// remote objects were deleted.
pub async fn delete_shard(
    store: &Store,
    key: &ShardKey,
    remote_store: &TierStore,
    prefix: &str,
) -> Result<usize, TieredError> {
    match store.delete_shard(key) {
        Ok(()) | Err(felix_storage::StorageError::ShardNotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    delete_remote(remote_store, prefix, key).await
}

/// Deletes every object of ours under `key`'s prefix: segments first, then
/// manifests oldest first (a reader meanwhile sees a manifest listing
/// segments that are gone, an error, never wrong data).
pub async fn delete_remote(
    remote_store: &TierStore,
    prefix: &str,
    key: &ShardKey,
) -> Result<usize, TieredError> {
    let remote = Remote::new(remote_store.clone(), prefix, key);
    let listed = remote.list().await?;
    let mut manifests: Vec<_> = listed
        .iter()
        .filter_map(|l| match l.name {
            RemoteObjectName::Manifest(seq) => Some((seq, l.path.clone())),
            _ => None,
        })
        .collect();
    manifests.sort_by_key(|(seq, _)| *seq);
    let mut deleted = 0;
    for l in &listed {
        if matches!(l.name, RemoteObjectName::Segment { .. }) {
            remote.delete(&l.path).await?;
            deleted += 1;
        }
    }
    for (_, path) in manifests {
        remote.delete(&path).await?;
        deleted += 1;
    }
    Ok(deleted)
}
