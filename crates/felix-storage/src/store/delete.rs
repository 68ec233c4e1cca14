//! Deleting a shard whole: its directory is renamed to a tombstone, the
//! rename made durable, and only then is anything inside removed.
//!
//! Why a tombstone: removing a shard's files one by one under its own name
//! would let a power loss leave half a shard — say, its newest segments
//! without the oldest — which the next open would take for a shard that
//! retention trimmed. A rename is atomic, and a tombstone's name is never
//! a shard directory's (it holds a dot), so at every moment the shard is
//! either whole under its name or gone. The next open of the store removes
//! any tombstone a crash left.

use std::path::Path;
use std::sync::Arc;

use felix_format::{ShardKey, parse_tombstone_name, tombstone_name};
use felix_io::{FileSystem, remove_dir_all};
use felix_recovery::{StoredKey, read_key_file};

use super::{Store, store_io};
use crate::error::{Result, StorageError};
use crate::lock::ShardLock;

impl Store {
    /// Deletes the shard of `key` and everything it holds.
    ///
    /// An open shard is closed first, so handles to it fail with
    /// [`StorageError::ShardClosed`]. The directory is renamed to a tombstone
    /// (`<dir>.deleting`, the storage format's tombstone name) and the
    /// root synced — from then on the shard is gone, even after a crash —
    /// then its files, and the directory itself, are removed and the root
    /// synced again. The writer's lock is held throughout, so no other
    /// writer can open the shard while it goes.
    ///
    /// A key with no directory is [`StorageError::ShardNotFound`]; a directory
    /// whose key file names another key is
    /// [`StorageError::KeyFileDisagrees`] and is left alone; one another
    /// writer holds is [`StorageError::ShardLocked`]. A failure after the rename
    /// is returned and leaves a tombstone, which the next open of the store
    /// removes; the shard does not come back. A new shard may be created
    /// under the key as soon as this returns.
    ///
    /// ```
    /// use felix_storage::{ReadBound, Record, ShardKey, StorageError, Store, StoreConfig};
    ///
    /// let root = tempfile::tempdir()?;
    /// let store = Store::options(root.path()).config(StoreConfig::default()).open()?;
    /// let key = ShardKey::new("acme", "default", "orders", 0);
    /// let shard = store.create_shard(&key)?;
    /// shard.append(&[Record::new(1, "gone soon")]).wait()?;
    /// store.delete_shard(&key)?;
    /// assert!(matches!(shard.read(0, 1024, ReadBound::Committed), Err(StorageError::ShardClosed { .. })));
    /// assert!(matches!(store.open_shard(&key), Err(StorageError::ShardNotFound { .. })));
    /// assert!(store.keys()?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete_shard(&self, key: &ShardKey) -> Result<()> {
        // Held to the end: an open or create of the key waits for the
        // delete.
        let mut claim = self.claim(key, false)?;
        let fs = &self.inner.fs;
        let root = &self.inner.root;
        let dir = self.dir_of(key);
        if fs
            .entry_type(&dir)
            .map_err(|e| store_io("stat", &dir, e))?
            .is_none()
        {
            return Err(StorageError::ShardNotFound {
                shard: Arc::from(key.to_string()),
                key: Some(Box::new(key.clone())),
                dir,
            });
        }
        if let StoredKey::Key(found) = read_key_file(fs, &dir)
            && found != *key
        {
            return Err(StorageError::KeyFileDisagrees {
                dir,
                requested: Box::new(key.clone()),
                found: Box::new(found),
            });
        }
        if let Some(shard) = claim.take_to_close()
            && let Err(err) = shard.close_for_store()
        {
            // Its records are about to go; what matters is that its lock
            // is released, which a close does whatever fails.
            tracing::warn!(shard = shard.label(), error = %err, "closing the shard to delete it failed");
        }
        let lock = ShardLock::acquire(fs, &dir)?;
        let name = key.dir_name();
        let tombstone = root.join(tombstone_name(&name));
        // A tombstone of this name is the leftover of an earlier delete of
        // the same key that could not finish: garbage, removed first so the
        // name is free.
        if fs
            .entry_type(&tombstone)
            .map_err(|e| store_io("stat", &tombstone, e))?
            .is_some()
        {
            remove_dir_all(fs, &tombstone).map_err(|e| store_io("remove", &tombstone, e))?;
        }
        fs.rename(&dir, &tombstone)
            .map_err(|e| store_io("rename", &dir, e))?;
        fs.sync_dir(root)
            .map_err(|e| store_io("fsync directory", root, e))?;
        tracing::info!(shard = %name, "shard deleted; removing its files");
        remove_dir_all(fs, &tombstone).map_err(|e| store_io("remove", &tombstone, e))?;
        fs.sync_dir(root)
            .map_err(|e| store_io("fsync directory", root, e))?;
        drop(lock);
        drop(claim);
        Ok(())
    }
}

/// Removes the tombstones under `root` that no one is deleting (a delete
/// in progress holds the tombstone's lock), then syncs the root. A
/// tombstone that cannot be removed is logged and left: it is never taken
/// for a shard, and the next open tries again.
pub(super) fn remove_tombstones(fs: &FileSystem, root: &Path) -> Result<()> {
    let entries = fs
        .list_dir(root)
        .map_err(|e| store_io("list directory", root, e))?;
    let mut removed = false;
    for entry in entries {
        let is_tombstone = entry.name.to_str().and_then(parse_tombstone_name).is_some();
        if !is_tombstone || !entry.is_dir() {
            continue;
        }
        let path = root.join(&entry.name);
        let removal = match fs.try_lock_dir(&path) {
            Ok(Some(_guard)) => remove_dir_all(fs, &path),
            Ok(None) => continue,
            Err(e) => Err(e),
        };
        match removal {
            Ok(()) => {
                tracing::info!(tombstone = %path.display(), "removed the tombstone of an interrupted delete");
                removed = true;
            }
            Err(e) => {
                tracing::warn!(tombstone = %path.display(), error = %e, "could not remove the tombstone of an interrupted delete; left for the next open");
            }
        }
    }
    if removed {
        fs.sync_dir(root)
            .map_err(|e| store_io("fsync directory", root, e))?;
    }
    Ok(())
}
