//! The one way to open a store: [`StoreOptions`], every default documented.

use std::path::PathBuf;

use felix_io::FileSystem;

use super::Store;
use crate::config::StoreConfig;
use crate::error::Result;

/// How to open a store — the one way: built by [`Store::options`], opened
/// by [`StoreOptions::open`].
///
/// ```
/// use felix_storage::io::FileSystem;
/// use felix_storage::{Durability, Store, StoreConfig};
///
/// let root = tempfile::tempdir()?;
/// let store = Store::options(root.path())
///     .config(StoreConfig { durability: Durability::OnCommit, ..StoreConfig::default() })
///     .file_system(FileSystem::os())
///     .open()?;
/// assert_eq!(store.root(), root.path());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
#[must_use = "options do nothing until opened"]
pub struct StoreOptions {
    pub(super) root: PathBuf,
    pub(super) config: StoreConfig,
    pub(super) fs: FileSystem,
}

impl StoreOptions {
    pub(super) fn new(root: PathBuf) -> Self {
        Self {
            root,
            config: StoreConfig::default(),
            fs: FileSystem::os(),
        }
    }

    /// The configuration of the store and of every shard it opens, checked
    /// when the store is opened. Default: [`StoreConfig::default`].
    pub fn config(mut self, config: StoreConfig) -> Self {
        self.config = config;
        self
    }

    /// The file system every file operation of the store and its shards
    /// goes through, for their whole life (a simulated one in tests).
    /// Default: [`FileSystem::os`].
    pub fn file_system(mut self, fs: FileSystem) -> Self {
        self.fs = fs;
        self
    }

    /// Opens the store: see [`Store::options`] for what opening does.
    pub fn open(self) -> Result<Store> {
        Store::open_with(self)
    }
}
