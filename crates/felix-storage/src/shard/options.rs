//! The one way to open a shard: [`ShardOptions`], every default documented.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use felix_io::{FileSystem, IoError};
use felix_recovery::StoredKey;
use felix_segment::ReadBuffers;

use super::Shard;
use super::core::Core;
use super::recover::{self, Recover};
use crate::background_scrub::Scrubber;
use crate::clock::{Clock, SystemClock};
use crate::config::StoreConfig;
use crate::error::{Result, StorageError};
use crate::lock::ShardLock;
use crate::periodic::{Maintenance, Task};
use crate::pool::SyncPool;

/// Who runs a shard's periodic syncs and retention passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Background {
    /// The shard's own thread, started when the configuration asks for one.
    Own,
    /// Its store's thread.
    Store,
}

/// How to open a shard: built by [`Shard::options`], opened by
/// [`ShardOptions::open`].
///
/// ```
/// use felix_storage::io::FileSystem;
/// use felix_storage::{Durability, Shard, StoreConfig};
///
/// let dir = tempfile::tempdir()?;
/// let shard = Shard::options(dir.path().join("orders-0"))
///     .config(StoreConfig { durability: Durability::OnCommit, ..StoreConfig::default() })
///     .file_system(FileSystem::os())
///     .label("orders-0")
///     .initial_offset(0)
///     .create_if_missing(true)
///     .open()?;
/// assert_eq!(shard.label(), "orders-0");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
#[must_use = "options do nothing until opened"]
pub struct ShardOptions {
    dir: PathBuf,
    config: StoreConfig,
    fs: FileSystem,
    label: Option<Arc<str>>,
    initial_offset: u64,
    create_if_missing: bool,
    clock: Arc<dyn Clock>,
    background: Background,
    read_buffers: Option<Arc<ReadBuffers>>,
    keep_clean_shutdown: bool,
    /// The store's sync pool; `None`: the shard makes its own.
    pool: Option<SyncPool>,
    /// What the store knows of the shard before opening it; `None`: the
    /// open asks for itself.
    known: Option<Known>,
}

/// What a store knows of a shard's directory before opening it, so that
/// the open does not ask the file system again.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    /// The size of the file system holding the store's root, asked once per
    /// store (the segment size is checked against it): a store's shard
    /// directories are in its root, on its file system.
    pub(crate) capacity: Option<u64>,
    /// Whether the store saw the directory itself (a directory, not a link
    /// to one) just before: it is neither looked for nor created.
    pub(crate) dir_exists: bool,
    /// The key file as the store read it just before, under its root's
    /// lock: recovery reports it instead of reading the file again.
    pub(crate) key: Option<StoredKey>,
    /// The file system with the directory held open, as the store read the
    /// key file through it ([`FileSystem::through_dir`]): the lock and
    /// recovery go on through the same descriptor. `None`: the open holds
    /// the directory itself.
    pub(crate) held: Option<FileSystem>,
}

impl ShardOptions {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            config: StoreConfig::default(),
            fs: FileSystem::os(),
            label: None,
            initial_offset: 0,
            create_if_missing: true,
            clock: Arc::new(SystemClock),
            background: Background::Own,
            read_buffers: None,
            keep_clean_shutdown: false,
            pool: None,
            known: None,
        }
    }

    /// The shard's configuration, checked when the shard is opened.
    /// Default: [`StoreConfig::default`].
    pub fn config(mut self, config: StoreConfig) -> Self {
        self.config = config;
        self
    }

    /// The file system every file operation of the shard goes through, for
    /// its whole life (a simulated one in tests). Default:
    /// [`FileSystem::os`].
    pub fn file_system(mut self, fs: FileSystem) -> Self {
        self.fs = fs;
        self
    }

    /// The name the shard's errors and logs carry. Default: the
    /// directory's last component.
    pub fn label(mut self, label: &str) -> Self {
        self.label = Some(Arc::from(label));
        self
    }

    /// Where a new shard's log begins: a replica given a shard whose early
    /// history is gone everywhere begins at the leader's log start. Ignored
    /// when the directory already holds segments. Default 0.
    pub fn initial_offset(mut self, offset: u64) -> Self {
        self.initial_offset = offset;
        self
    }

    /// Whether a missing directory is created (with any missing ancestor,
    /// durably) as a new, empty shard; with `false` a missing directory is
    /// [`StorageError::ShardNotFound`]. Default `true`.
    pub fn create_if_missing(mut self, create: bool) -> Self {
        self.create_if_missing = create;
        self
    }

    /// The wall clock retention measures record ages against
    /// ([`Retention::max_age`](crate::Retention::max_age)). Default: the
    /// system clock.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Leaves periodic syncs and retention passes to the store's thread.
    pub(crate) fn background_by_store(mut self) -> Self {
        self.background = Background::Store;
        self
    }

    /// Leaves a trusted clean-shutdown file in place at open, removing it
    /// (durably) only before the set of segments or a sealed one changes
    /// (`Log::forget_clean_shutdown`): a store reopening an idle shard
    /// then makes no sync to open it, nor to close it again if only its
    /// newest segment grew. See `felix_recovery::OpenOptions`.
    pub(crate) fn keep_clean_shutdown(mut self) -> Self {
        self.keep_clean_shutdown = true;
        self
    }

    /// Fills large reads from `buffers` (a store's, shared by its shards)
    /// instead of buffers of the shard's own.
    pub(crate) fn read_buffers(mut self, buffers: Arc<ReadBuffers>) -> Self {
        self.read_buffers = Some(buffers);
        self
    }

    /// Has the store's sync pool run the shard's syncs and callbacks.
    pub(crate) fn sync_pool(mut self, pool: SyncPool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Takes what the store knows of the directory instead of asking.
    pub(crate) fn known(mut self, known: Known) -> Self {
        self.known = Some(known);
        self
    }

    /// Opens the shard, running recovery.
    ///
    /// The configuration is checked first ([`StoreConfig::validate`], and
    /// the segment size against the file system's size): an invalid one is
    /// [`StorageError::InvalidConfig`] with nothing created. Then the
    /// directory is created if missing and allowed, its lock taken
    /// ([`StorageError::ShardLocked`] if another writer holds it), and recovery
    /// runs: a torn tail is truncated, indexes are rebuilt, and damage the
    /// configured policy may not repair fails the open with
    /// [`StorageError::Recovery`] having modified nothing. The newest
    /// segment is then synced, so everything the shard holds is durable.
    ///
    /// With [`Durability::Periodic`](crate::Durability::Periodic) or a
    /// [`Retention::interval`](crate::Retention::interval), the shard
    /// starts a thread of its own for them (a store's shards use the
    /// store's).
    pub fn open(self) -> Result<Shard> {
        let label = self
            .label
            .clone()
            .unwrap_or_else(|| default_label(&self.dir));
        let span = tracing::info_span!("shard_open", shard = %label);
        let _entered = span.enter();
        self.config.validate()?;
        let fs = &self.fs;
        let dir = &self.dir;
        let dir_exists = self.known.as_ref().is_some_and(|k| k.dir_exists);
        if !dir_exists && !self.create_if_missing && !fs.is_dir(dir) {
            return Err(StorageError::ShardNotFound {
                shard: Arc::clone(&label),
                key: None,
                dir: dir.clone(),
            });
        }
        let capacity = match &self.known {
            Some(known) => known.capacity,
            None => nearest_existing(fs, dir)
                .and_then(|existing| fs.capacity_bytes(existing).ok().flatten()),
        };
        self.config.validate_for(capacity)?;
        if !dir_exists {
            felix_segment::fs::create_dir_all_durable(fs, dir).map_err(|source| {
                StorageError::Segment {
                    shard: Arc::clone(&label),
                    source: source.into(),
                }
            })?;
        }
        // The directory held open for the open's run of opens in it (each
        // then looks up one name, not the whole path), its lock taken and
        // its entries read through that descriptor, for recovery to take
        // instead of opening the directory again. The shard itself keeps
        // the file system by path (`FileSystem::through_dir`).
        let held = match self.known.as_ref().and_then(|k| k.held.clone()) {
            Some(held) => held,
            None => fs.through_dir(dir),
        };
        let (lock, listing) = ShardLock::acquire_listing(&held, dir)?;
        let background = self.background;
        // A shard opened alone starts (at most) one sync thread: it has one
        // sync in flight at a time.
        let (pool, own_pool) = match self.pool.clone() {
            Some(pool) => (pool, None),
            None => {
                let pool = SyncPool::with_keep_alive(
                    format!("felix {label}"),
                    self.config.sync_threads,
                    self.config.sync_thread_keep_alive,
                );
                (pool.clone(), Some(pool))
            }
        };
        let recover = Recover {
            label,
            dir: self.dir,
            config: self.config,
            fs: self.fs,
            initial_offset: self.initial_offset,
            clock: self.clock,
            read_buffers: self.read_buffers,
            keep_clean_shutdown: self.keep_clean_shutdown,
            key: self.known.and_then(|k| k.key),
        };
        let core = match recover::recover(recover, &held, lock, listing, pool) {
            Ok(core) => {
                let core = Arc::new(core);
                core.commit().set_queued_writes(Arc::downgrade(&core) as _);
                core
            }
            Err(err) => {
                if let Some(pool) = own_pool {
                    pool.shutdown();
                }
                return Err(err);
            }
        };
        core.report_open();
        let threads = match background {
            Background::Store => Ok((None, None)),
            Background::Own => start_maintenance(&core)
                .and_then(|maintenance| Ok((maintenance, start_scrubber(&core)?))),
        };
        let (maintenance, scrubber) = match threads {
            Ok(threads) => threads,
            Err(err) => {
                core.commit().stop();
                if let Some(pool) = own_pool {
                    pool.shutdown();
                }
                return Err(err);
            }
        };
        Ok(Shard::from_parts(core, maintenance, scrubber, own_pool))
    }
}

/// The shard's own thread for periodic syncs and retention, when its
/// configuration asks for either.
fn start_maintenance(core: &Arc<Core>) -> Result<Option<Maintenance>> {
    let shard = Arc::clone(core);
    let started = Maintenance::spawn(
        format!("felix-shard {}", core.label()),
        core.config(),
        move |task| {
            let result = match task {
                Task::Sync => shard.sync(),
                Task::Retention => shard.apply_retention().map(drop),
            };
            if let Err(err) = result {
                tracing::error!(shard = %shard.label(), ?task, error = %err, "background task failed");
            }
        },
    );
    started.map_err(|e| StorageError::Segment {
        shard: Arc::clone(core.label()),
        source: IoError::new("spawn background thread", core.dir(), e).into(),
    })
}

/// The shard's own background scrub, when its configuration asks for one.
fn start_scrubber(core: &Arc<Core>) -> Result<Option<Scrubber>> {
    let Some(rate) = core.config().scrub_bytes_per_second else {
        return Ok(None);
    };
    let shard = Arc::downgrade(core);
    // A weak handle: the thread must not keep the shard's state alive.
    Scrubber::spawn(format!("felix-scrub {}", core.label()), rate, move || {
        shard.upgrade().into_iter().collect()
    })
    .map(Some)
    .map_err(|e| StorageError::Segment {
        shard: Arc::clone(core.label()),
        source: IoError::new("spawn scrub thread", core.dir(), e).into(),
    })
}

/// The label of a shard opened without one: its directory's name.
fn default_label(dir: &Path) -> Arc<str> {
    match dir.file_name() {
        Some(name) => Arc::from(name.to_string_lossy().as_ref()),
        None => Arc::from(dir.display().to_string().as_str()),
    }
}

/// `dir`, or its nearest ancestor that exists: where its file system's size
/// can be asked before anything is created.
fn nearest_existing<'a>(fs: &FileSystem, dir: &'a Path) -> Option<&'a Path> {
    dir.ancestors()
        .find(|p| !p.as_os_str().is_empty() && fs.is_dir(p))
        .or(Some(Path::new(".")).filter(|_| dir.is_relative()))
}
