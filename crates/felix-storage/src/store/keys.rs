//! The exact keys of a store's shards: listed from each shard directory's
//! key file, checked before a shard is opened, written when missing.
//!
//! A directory's name is a lossy rendering of its key plus a hash, so the
//! name alone tells only whether a key *may* be its key; the key file says
//! which key it is. Names still decide what a directory is: only one shaped
//! like a shard directory's ([`is_shard_dir_name`]) is a shard, so a
//! tombstone or `lost+found` in the root never is.

use std::path::Path;

use felix_format::key_file::encode_key_file;
use felix_format::{ShardKey, is_shard_dir_name};
use felix_recovery::{StoredKey, read_key_file};

use super::{Store, store_io};
use crate::error::{Result, StorageError};

/// A shard of a store, as [`Store::keys`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShardId {
    /// A shard whose directory holds its exact key.
    Key(ShardKey),
    /// A shard directory with no usable key file, by its name: one the
    /// reference implementation wrote (it writes none), or whose key file
    /// is damaged or names a key whose directory would be another. Opening
    /// it by a key whose [`ShardKey::dir_name`] this is writes the file.
    Dir(String),
}

impl ShardId {
    /// The shard directory's name.
    pub fn dir_name(&self) -> String {
        match self {
            Self::Key(key) => key.dir_name(),
            Self::Dir(name) => name.clone(),
        }
    }

    /// The exact key, when known.
    pub fn key(&self) -> Option<&ShardKey> {
        match self {
            Self::Key(key) => Some(key),
            Self::Dir(_) => None,
        }
    }
}

impl Store {
    /// Every shard of the store, open or not, sorted (keys first, in key
    /// order, then key-less directories by name): [`ShardId::Key`] with the
    /// exact key for a directory whose key file names it, [`ShardId::Dir`]
    /// for one without.
    ///
    /// Only directories shaped like a shard directory's name count;
    /// anything else in the root (a tombstone, `lost+found`, a file) is
    /// not a shard. Nothing is opened but key files.
    ///
    /// ```
    /// use felix_storage::{ShardId, ShardKey, Store, StoreConfig};
    ///
    /// let root = tempfile::tempdir()?;
    /// let store = Store::options(root.path()).config(StoreConfig::default()).open()?;
    /// let key = ShardKey::new("ünï", "default", "a/b", 7);
    /// store.create_shard(&key)?;
    /// // The directory name is lossy; the listing is exact.
    /// assert_eq!(key.dir_name(), "_n__default_a_b_7-08c7f510d630bd11");
    /// assert_eq!(store.keys()?, [ShardId::Key(key)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keys(&self) -> Result<Vec<ShardId>> {
        // Refused once closed, like every other call.
        drop(self.shards()?);
        let root = &self.inner.root;
        let entries = self
            .inner
            .fs
            .list_dir(root)
            .map_err(|e| store_io("list directory", root, e))?;
        let mut ids = Vec::new();
        for entry in entries {
            let Some(name) = entry.name.to_str().filter(|n| is_shard_dir_name(n)) else {
                continue;
            };
            if !entry.is_dir() {
                continue;
            }
            let id = match read_key_file(&self.inner.fs, &root.join(name)) {
                StoredKey::Key(key) if key.dir_name() == name => ShardId::Key(key),
                StoredKey::Key(key) => {
                    tracing::warn!(dir = name, key = %key, "the key file names a key of another directory; listed by its name");
                    ShardId::Dir(name.to_owned())
                }
                StoredKey::Unusable(problem) => {
                    tracing::warn!(dir = name, %problem, "the key file is unusable; listed by its name");
                    ShardId::Dir(name.to_owned())
                }
                StoredKey::Missing => ShardId::Dir(name.to_owned()),
            };
            ids.push(id);
        }
        ids.sort();
        Ok(ids)
    }
}

/// Refuses a key the key file cannot hold, before anything is written.
pub(super) fn check_key(key: &ShardKey) -> Result<()> {
    let mut scratch = Vec::new();
    encode_key_file(key, &mut scratch).map_err(|problem| StorageError::KeyTooLong {
        key: key.clone(),
        problem: Box::new(problem),
    })
}

/// Checks `stored`, what the key file of `dir` (the directory of `key`)
/// holds, before the shard is opened: `Ok(true)` when it must be written
/// (missing or unusable), [`StorageError::KeyFileDisagrees`] when it names
/// another key.
pub(super) fn check_key_file(dir: &Path, key: &ShardKey, stored: &StoredKey) -> Result<bool> {
    Ok(match stored {
        StoredKey::Key(found) if found == key => false,
        StoredKey::Key(found) => {
            return Err(StorageError::KeyFileDisagrees {
                dir: dir.to_path_buf(),
                requested: Box::new(key.clone()),
                found: Box::new(found.clone()),
            });
        }
        StoredKey::Missing => true,
        StoredKey::Unusable(problem) => {
            // The directory's name is the key's (a 64-bit hash of the exact
            // key is in it), so the key is taken and written again.
            tracing::warn!(dir = %dir.display(), %problem, "the key file is unusable; writing it again");
            true
        }
    })
}
