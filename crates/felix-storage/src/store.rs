//! The store: a root directory of shards, opened lazily and shared.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use felix_format::ShardKey;
use felix_io::{FileSystem, IoError};

use crate::config::StoreConfig;
use crate::error::{Result, StorageError};
use crate::maintenance::{Maintenance, Task};
use crate::shard::Shard;

/// A root directory holding one directory per shard.
///
/// Shards open lazily on first use, and every caller asking for the same key
/// gets the same shared handle. Background work (periodic syncs, retention)
/// runs on one thread the store owns, stopped by [`Store::close`] or drop.
///
/// ```
/// use felix_storage::{Record, ShardKey, Store, StoreConfig};
///
/// let root = tempfile::tempdir()?;
/// let store = Store::open(root.path(), StoreConfig::default())?;
/// let key = ShardKey::new("acme", "default", "orders", 0);
/// let shard = store.shard(&key)?;
/// shard.append(&[Record::new(1, "order placed")])?;
/// assert!(std::sync::Arc::ptr_eq(&shard, &store.shard(&key)?));
/// assert_eq!(store.shard_dirs()?, ["acme_default_orders_0-0d3aed4b998d2798"]);
/// store.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Store {
    inner: Arc<Inner>,
    /// Periodic syncs and retention passes for every shard, when the
    /// configuration asks for either.
    background: Option<Maintenance>,
}

#[derive(Debug)]
struct Inner {
    fs: FileSystem,
    root: PathBuf,
    config: StoreConfig,
    shards: Mutex<HashMap<ShardKey, Arc<Shard>>>,
    closed: AtomicBool,
}

impl Store {
    /// Opens the store at `root`, creating the directory (and any missing
    /// ancestor) if missing, durably: each new directory is synced into its
    /// parent before the store is used.
    pub fn open(root: &Path, config: StoreConfig) -> Result<Self> {
        Self::open_in(&FileSystem::os(), root, config)
    }

    /// [`Store::open`] on the file system `fs`, which every shard uses.
    pub fn open_in(fs: &FileSystem, root: &Path, config: StoreConfig) -> Result<Self> {
        config.validate()?;
        felix_segment::fs::create_dir_all_durable(fs, root)?;
        let inner = Arc::new(Inner {
            fs: fs.clone(),
            root: root.to_path_buf(),
            config,
            shards: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
        });
        let shared = Arc::clone(&inner);
        let background = Maintenance::spawn("felix-store".into(), &config, move |task| {
            background(&shared, task);
        })
        .map_err(|e| IoError::new("spawn background thread", root, e))?;
        Ok(Self { inner, background })
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The shard for `key`, opening (and recovering) it on first use.
    pub fn shard(&self, key: &ShardKey) -> Result<Arc<Shard>> {
        self.shard_starting_at(key, 0)
    }

    /// The shard for `key`; if it does not exist yet, its log begins at
    /// `initial_offset` (a replica bootstrapped from a leader whose early
    /// history is gone).
    pub fn shard_starting_at(&self, key: &ShardKey, initial_offset: u64) -> Result<Arc<Shard>> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(StorageError::StoreClosed {
                root: self.inner.root.clone(),
            });
        }
        let mut shards = lock(&self.inner.shards);
        if let Some(shard) = shards.get(key) {
            return Ok(Arc::clone(shard));
        }
        let name = key.dir_name();
        let shard = Arc::new(
            Shard::options(self.inner.root.join(&name))
                .config(self.inner.config)
                .file_system(self.inner.fs.clone())
                .label(&name)
                .initial_offset(initial_offset)
                .background_by_store()
                .open()?,
        );
        shards.insert(key.clone(), Arc::clone(&shard));
        Ok(shard)
    }

    /// Names of the shard directories under the root, sorted.
    pub fn shard_dirs(&self) -> Result<Vec<String>> {
        let root = &self.inner.root;
        let io = |e| IoError::new("list directory", root, e);
        let mut names = Vec::new();
        for entry in self.inner.fs.list_dir(root).map_err(io)? {
            if entry.is_dir() {
                names.push(entry.name.to_string_lossy().into_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Stops background work and closes every open shard cleanly (see
    /// [`Shard::close`](crate::Shard::close)): everything durable, and a clean-shutdown file per
    /// shard so the next open is quick.
    pub fn close(&self) -> Result<()> {
        self.stop_background();
        let shards: Vec<_> = lock(&self.inner.shards).values().cloned().collect();
        let mut first_error = None;
        for shard in shards {
            if let Err(err) = shard.close() {
                tracing::error!(shard = shard.label(), error = %err, "closing the shard failed");
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn stop_background(&self) {
        self.inner.closed.store(true, Ordering::Release);
        if let Some(background) = &self.background {
            background.stop();
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.stop_background();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The store's one background thread: each task, as it falls due, on
/// every open shard.
fn background(inner: &Inner, task: Task) {
    let shards: Vec<_> = lock(&inner.shards).values().cloned().collect();
    for shard in &shards {
        let result = match task {
            Task::Sync => shard.sync(),
            Task::Retention => shard.apply_retention().map(drop),
        };
        if let Err(err) = result {
            tracing::error!(shard = shard.label(), ?task, error = %err, "background task failed");
        }
    }
}
