//! The store: a root directory of shards, opened lazily and shared.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use felix_format::ShardKey;
use felix_io::{FileSystem, IoError};

use crate::config::{Durability, StoreConfig};
use crate::error::{Result, StorageError};
use crate::shard::Shard;

/// A root directory holding one directory per shard.
///
/// Shards open lazily on first use, and every caller asking for the same key
/// gets the same shared handle. Background work (periodic syncs, retention)
/// runs on one thread the store owns, stopped by [`Store::close`] or drop.
///
/// ```
/// use felix_format::ShardKey;
/// use felix_storage::{Record, Store, StoreConfig};
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
    background: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Inner {
    fs: FileSystem,
    root: PathBuf,
    config: StoreConfig,
    shards: Mutex<HashMap<ShardKey, Arc<Shard>>>,
    stop: Mutex<bool>,
    wake: Condvar,
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
        felix_segment::fs::create_dir_all_durable(fs, root)?;
        let inner = Arc::new(Inner {
            fs: fs.clone(),
            root: root.to_path_buf(),
            config,
            shards: Mutex::new(HashMap::new()),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let periodic = match config.durability {
            Durability::Periodic(interval) => Some(interval),
            _ => None,
        };
        let background = (periodic.is_some() || config.retention.interval.is_some()).then(|| {
            let inner = Arc::clone(&inner);
            std::thread::Builder::new()
                .name("felix-store".into())
                .spawn(move || background(&inner, periodic, config.retention.interval))
        });
        let background = match background {
            Some(Ok(handle)) => Some(handle),
            Some(Err(e)) => {
                return Err(IoError::new("spawn background thread", root, e).into());
            }
            None => None,
        };
        Ok(Self {
            inner,
            background: Mutex::new(background),
        })
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
        if *lock(&self.inner.stop) {
            return Err(StorageError::Closed);
        }
        let mut shards = lock(&self.inner.shards);
        if let Some(shard) = shards.get(key) {
            return Ok(Arc::clone(shard));
        }
        let name = key.dir_name();
        let shard = Arc::new(Shard::open_in(
            &self.inner.fs,
            &self.inner.root.join(&name),
            &name,
            self.inner.config,
            initial_offset,
        )?);
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
        *lock(&self.inner.stop) = true;
        self.inner.wake.notify_all();
        if let Some(handle) = lock(&self.background).take() {
            let _ = handle.join();
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

/// The store's one background thread: periodic syncs and retention passes,
/// each on its own interval, until the store stops.
fn background(inner: &Inner, sync_every: Option<Duration>, retain_every: Option<Duration>) {
    let now = Instant::now();
    let mut next_sync = sync_every.map(|d| now + d);
    let mut next_retention = retain_every.map(|d| now + d);
    loop {
        let wake_at = [next_sync, next_retention].into_iter().flatten().min();
        {
            let mut stopped = lock(&inner.stop);
            while !*stopped {
                let timeout = wake_at.map_or(Duration::from_secs(3600), |t| {
                    t.saturating_duration_since(Instant::now())
                });
                if timeout.is_zero() {
                    break;
                }
                stopped = inner
                    .wake
                    .wait_timeout(stopped, timeout)
                    .map_or_else(|e| e.into_inner().0, |r| r.0);
            }
            if *stopped {
                return;
            }
        }
        let now = Instant::now();
        let shards: Vec<_> = lock(&inner.shards).values().cloned().collect();
        if let (Some(at), Some(every)) = (next_sync, sync_every)
            && now >= at
        {
            for shard in &shards {
                if let Err(err) = shard.sync() {
                    tracing::error!(shard = shard.label(), error = %err, "periodic sync failed");
                }
            }
            next_sync = Some(now + every);
        }
        if let (Some(at), Some(every)) = (next_retention, retain_every)
            && now >= at
        {
            for shard in &shards {
                if let Err(err) = shard.apply_retention() {
                    tracing::error!(shard = shard.label(), error = %err, "retention failed");
                }
            }
            next_retention = Some(now + every);
        }
    }
}
