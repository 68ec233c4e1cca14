//! The store: a root directory of shards, and each shard's life in it —
//! created, opened, closed, reopened, deleted — while the store runs.
//!
//! Invariants this module keeps:
//!
//! * One [`Shard`] per key at a time: every caller asking for an open key
//!   gets the same handle, and a handle the store closed (by
//!   [`Store::close`], [`Store::close_shard`], [`Store::reopen_shard`] or
//!   [`Store::delete_shard`]) never reads or writes again
//!   ([`StorageError::ShardClosed`]).
//! * A shard is created only by [`Store::create_shard`]; opening a key with
//!   no directory is [`StorageError::ShardNotFound`].
//! * A shard is deleted whole or not at all: its directory is renamed to a
//!   tombstone (durably) before anything in it is removed, and the store's
//!   open removes tombstones a crash left.

mod claims;
mod delete;
mod keys;
mod open_shards;
mod options;
mod periodic_tasks;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use felix_format::ShardKey;
use felix_io::{FileSystem, FileType};
use felix_recovery::{StoredKey, read_key_file};
use felix_segment::ReadBuffers;

use crate::background_scrub::Scrubber;
use crate::config::StoreConfig;
use crate::error::{Result, StorageError};
use crate::lock::StoreLock;
use crate::periodic::Maintenance;
use crate::pool::SyncPool;
use crate::shard::{Known, Shard};

use self::open_shards::OpenShards;

pub use keys::ShardId;
pub use options::StoreOptions;

/// A root directory holding one directory per shard, and the shards it has
/// open.
///
/// A shard is made by [`Store::create_shard`] and opened by
/// [`Store::open_shard`] (which never creates one: a mistyped key is
/// [`StorageError::ShardNotFound`]); every caller asking for an open key gets
/// the same shared handle. [`Store::keys`] lists the exact key of every
/// shard, read from the key file each shard directory keeps.
/// Background work (periodic syncs, retention) runs on one thread the
/// store owns, and every shard's syncs for durability on the store's sync
/// pool: at most [`StoreConfig::sync_threads`] threads, started as syncs
/// are needed, serving the shards in turn (a busy shard is synced back to
/// back; no shard waits behind more than one sync of each other), plus one
/// thread for completion callbacks, started on the first. No shard owns a
/// thread.
///
/// One shard can be closed ([`Store::close_shard`]), reopened with a fresh
/// recovery ([`Store::reopen_shard`], the way back from a poisoned shard)
/// or deleted ([`Store::delete_shard`]) while the others keep running;
/// handles to the old one then fail with [`StorageError::ShardClosed`].
///
/// [`Store::close`] closes every shard: everything durable, a
/// clean-shutdown file per shard (so the next open is quick) and every
/// lock released, so the same root can be opened again at once, in this
/// process or another. **Dropping a store closes it the same way**, logging
/// a failure instead of returning it: call `close` to see the error. Either
/// way, handles to its shards fail with [`StorageError::ShardClosed`] from then
/// on. (A [`Shard`] opened on its own, outside a store, is not closed by
/// dropping it: it is then opened as after a crash.)
///
/// ```
/// use felix_storage::{ReadBound, Record, ShardId, ShardKey, StorageError, Store, StoreConfig};
///
/// let root = tempfile::tempdir()?;
/// let store = Store::options(root.path()).config(StoreConfig::default()).open()?;
/// let key = ShardKey::new("acme", "default", "orders", 0);
/// let shard = store.create_shard(&key)?;
/// shard.append(&[Record::new(1, "order placed")]).wait()?;
/// assert!(std::sync::Arc::ptr_eq(&shard, &store.open_shard(&key)?));
/// assert_eq!(store.keys()?, [ShardId::Key(key.clone())]);
///
/// // A mistyped key is not a new shard.
/// let typo = ShardKey::new("acme", "default", "ordres", 0);
/// assert!(matches!(store.open_shard(&typo), Err(StorageError::ShardNotFound { .. })));
///
/// store.close()?;
/// assert!(matches!(shard.read(0, 1024, ReadBound::Committed), Err(StorageError::ShardClosed { .. })));
/// // Every lock is released: the root opens again at once.
/// let store = Store::options(root.path()).config(StoreConfig::default()).open()?;
/// assert_eq!(store.open_shard(&key)?.read(0, 1024, ReadBound::Committed)?[0].payload, "order placed");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Store {
    inner: Arc<Inner>,
    /// Periodic syncs and retention passes over the open shards, when the
    /// configuration asks for either (shared with a lone shard's own
    /// thread: `periodic.rs`).
    background: Option<Maintenance>,
    /// The background scrub, when the configuration asks for one
    /// (`background_scrub.rs`).
    scrubber: Option<Scrubber>,
}

#[derive(Debug)]
struct Inner {
    fs: FileSystem,
    root: PathBuf,
    config: StoreConfig,
    /// The open shards, and the keys callers have claimed to open, close
    /// or delete theirs (`claims.rs`): held only to look up, claim and
    /// publish, never while a shard is opened or closed.
    shards: Mutex<OpenShards>,
    /// Notified whenever a claim is released.
    settled: Condvar,
    /// Every shard's syncs and completion callbacks.
    pool: SyncPool,
    /// Set by [`Store::close`].
    stop: Mutex<bool>,
    /// Buffers the shards' large reads fill and reuse: one pool for the
    /// store, so its memory does not grow with the number of shards.
    read_buffers: Arc<ReadBuffers>,
    /// Held until [`Store::close`]: one store per root, even while every
    /// shard is closed and none of their locks is held.
    root_lock: Mutex<Option<StoreLock>>,
    /// The size of the file system holding the root (`None`: it does not
    /// say), asked once at open: a shard's segment size is checked against
    /// it, its directory being in the root.
    capacity: Option<u64>,
}

impl Store {
    /// How to open the store at `root` — the one way to open it: its
    /// configuration and file system ([`StoreOptions`], every default
    /// documented there), then [`StoreOptions::open`].
    ///
    /// The root directory (and any missing ancestor) is created if missing,
    /// durably: each new directory is synced into its parent before the
    /// store is used. The configuration is checked first
    /// ([`StorageError::InvalidConfig`], nothing created). Tombstones of
    /// deletes a crash interrupted are removed (see
    /// [`Store::delete_shard`]). No shard is opened until asked for.
    ///
    /// ```
    /// use felix_storage::{Durability, Store, StoreConfig};
    ///
    /// let root = tempfile::tempdir()?;
    /// let config = StoreConfig { durability: Durability::OnCommit, ..StoreConfig::default() };
    /// let store = Store::options(root.path()).config(config).open()?;
    /// assert_eq!(store.config().durability, Durability::OnCommit);
    /// assert!(store.keys()?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn options(root: impl Into<PathBuf>) -> StoreOptions {
        StoreOptions::new(root.into())
    }

    fn open_with(options: StoreOptions) -> Result<Self> {
        let StoreOptions { root, config, fs } = options;
        let (fs, root) = (&fs, root.as_path());
        config.validate()?;
        felix_segment::fs::create_dir_all_durable(fs, root)?;
        let root_lock = StoreLock::acquire(fs, root)?;
        delete::remove_tombstones(fs, root)?;
        // Asked once: every shard's segment size is checked against it.
        let capacity = fs.capacity_bytes(root).ok().flatten();
        let inner = Arc::new(Inner {
            fs: fs.clone(),
            root: root.to_path_buf(),
            config,
            shards: Mutex::new(OpenShards::default()),
            settled: Condvar::new(),
            pool: SyncPool::with_keep_alive(
                "felix-store".into(),
                config.sync_threads,
                config.sync_thread_keep_alive,
            ),
            stop: Mutex::new(false),
            read_buffers: Arc::default(),
            root_lock: Mutex::new(Some(root_lock)),
            capacity,
        });
        let shared = Arc::clone(&inner);
        let background = Maintenance::spawn("felix-store".into(), &config, move |task| {
            periodic_tasks::run(&shared, task);
        })
        .map_err(|e| store_io("spawn background thread", root, e))?;
        let scrubber = match config.scrub_bytes_per_second {
            None => None,
            Some(rate) => {
                let shared = Arc::downgrade(&inner);
                let shards = move || {
                    shared.upgrade().map_or_else(Vec::new, |inner| {
                        lock(&inner.shards)
                            .handles()
                            .iter()
                            .map(|s| Arc::clone(s.shared_core()))
                            .collect()
                    })
                };
                Some(
                    Scrubber::spawn("felix-scrub".into(), rate, shards)
                        .map_err(|e| store_io("spawn scrub thread", root, e))?,
                )
            }
        };
        Ok(Self {
            inner,
            background,
            scrubber,
        })
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The configuration the store was opened with: every shard's.
    ///
    /// ```
    /// use felix_storage::{Store, StoreConfig};
    ///
    /// let root = tempfile::tempdir()?;
    /// let store = Store::options(root.path()).config(StoreConfig::default()).open()?;
    /// assert_eq!(store.config(), &StoreConfig::default());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn config(&self) -> &StoreConfig {
        &self.inner.config
    }

    /// The sync workers the store's pool runs now, busy or idle (the
    /// callback thread not counted): about as many as syncs are in flight,
    /// at most [`StoreConfig::sync_threads`], and none once the shards
    /// have needed no sync for [`StoreConfig::sync_thread_keep_alive`].
    ///
    /// ```
    /// use felix_storage::{Record, Store, StoreConfig, ShardKey};
    ///
    /// let root = tempfile::tempdir()?;
    /// let store = Store::options(root.path()).config(StoreConfig::default()).open()?;
    /// assert_eq!(store.sync_workers(), 0, "started as syncs are needed");
    /// let shard = store.create_shard(&ShardKey::new("t", "ns", "s", 0))?;
    /// shard.append(&[Record::now("a")]).submit()?;
    /// assert!(store.sync_workers() <= store.config().sync_threads);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sync_workers(&self) -> usize {
        self.inner.pool.workers()
    }

    /// The shard of `key`, opening (and recovering) it on first use; the
    /// same handle while it stays open.
    ///
    /// Never creates a shard: a key with no directory is
    /// [`StorageError::ShardNotFound`] (create one with [`Store::create_shard`]).
    /// A directory whose key file names another key is
    /// [`StorageError::KeyFileDisagrees`], and the shard is not opened. A
    /// directory with no key file (one the reference implementation wrote)
    /// or an unusable one is the key's all the same — its name is the key's
    /// directory name — and gets its key file written once it is open.
    ///
    /// The open (and the close of an idle shard it makes room by) runs
    /// without the store's lock: a shard recovering a long segment delays
    /// only the callers asking for that key, who then get the same handle,
    /// opened once; calls for other shards, open or not, go on meanwhile.
    ///
    /// A broker that wants a shard whether or not it exists yet says so:
    ///
    /// ```
    /// use felix_storage::{ShardKey, StorageError, Store, StoreConfig};
    ///
    /// let root = tempfile::tempdir()?;
    /// let store = Store::options(root.path()).config(StoreConfig::default()).open()?;
    /// let key = ShardKey::new("acme", "default", "orders", 0);
    /// let shard = match store.open_shard(&key) {
    ///     Err(StorageError::ShardNotFound { .. }) => store.create_shard(&key)?,
    ///     other => other?,
    /// };
    /// assert_eq!(shard.offsets().written, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_shard(&self, key: &ShardKey) -> Result<Arc<Shard>> {
        if let Some(shard) = self.shards()?.get(key) {
            return Ok(shard);
        }
        let claim = self.claim(key, true)?;
        // Opened by the caller whose claim this one waited for.
        if let Some(shard) = claim.open_shard() {
            return Ok(shard);
        }
        claim.make_room();
        let shard = self.open_existing(key)?;
        claim.publish(&shard);
        Ok(shard)
    }

    /// Creates the shard of `key`, its log beginning at offset 0, and opens
    /// it. See [`Store::create_shard_at`].
    ///
    /// ```
    /// use felix_storage::{ShardKey, StorageError, Store, StoreConfig};
    ///
    /// let root = tempfile::tempdir()?;
    /// let store = Store::options(root.path()).config(StoreConfig::default()).open()?;
    /// let key = ShardKey::new("acme", "default", "orders", 0);
    /// store.create_shard(&key)?;
    /// assert!(matches!(store.create_shard(&key), Err(StorageError::AlreadyExists { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_shard(&self, key: &ShardKey) -> Result<Arc<Shard>> {
        self.create_shard_at(key, 0)
    }

    /// Creates the shard of `key`, its log beginning at `initial_offset` (a
    /// replica bootstrapped from a leader whose early history is gone), and
    /// opens it.
    ///
    /// Like Kafka's topic creation, creating a shard that exists is an
    /// error, [`StorageError::AlreadyExists`], and changes nothing: a
    /// create never silently opens a shard holding someone's data. The
    /// directory (synced into the root) and the key file (written
    /// atomically) are durable before this returns, with the shard's first
    /// segment. A key with a text part too long for the key file is
    /// [`StorageError::KeyTooLong`], before anything is written.
    ///
    /// ```
    /// use felix_storage::{ShardKey, Store, StoreConfig};
    ///
    /// let root = tempfile::tempdir()?;
    /// let store = Store::options(root.path()).config(StoreConfig::default()).open()?;
    /// let replica = store.create_shard_at(&ShardKey::new("acme", "default", "orders", 1), 5_000)?;
    /// assert_eq!((replica.offsets().base, replica.offsets().written), (5_000, 5_000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_shard_at(&self, key: &ShardKey, initial_offset: u64) -> Result<Arc<Shard>> {
        keys::check_key(key)?;
        let claim = self.claim(key, true)?;
        let dir = self.dir_of(key);
        let exists = self
            .inner
            .fs
            .entry_type(&dir)
            .map_err(|e| store_io("stat", &dir, e))?
            .is_some();
        if exists || claim.is_open() {
            return Err(StorageError::AlreadyExists {
                key: key.clone(),
                dir,
            });
        }
        claim.make_room();
        let known = Known {
            capacity: self.inner.capacity,
            dir_exists: false,
            key: None,
            held: None,
        };
        let shard = self.open_dir(key, initial_offset, known)?;
        // The first segment is durable; now the name of what it holds.
        self.write_key_or_close(&shard, key)?;
        claim.publish(&shard);
        Ok(shard)
    }

    /// Closes the shard of `key` if it is open (see [`Store::close`] for
    /// what closing does), without touching any other. Handles to it fail
    /// with [`StorageError::ShardClosed`] from then on; [`Store::open_shard`]
    /// opens it again. Does nothing when the shard is not open.
    ///
    /// The shard is closed and its lock released even when it cannot be
    /// made durable (a poisoned shard): that failure is returned.
    ///
    /// ```
    /// use felix_storage::{ReadBound, ShardKey, StorageError, Store, StoreConfig};
    ///
    /// let root = tempfile::tempdir()?;
    /// let store = Store::options(root.path()).config(StoreConfig::default()).open()?;
    /// let key = ShardKey::new("acme", "default", "orders", 0);
    /// let old = store.create_shard(&key)?;
    /// store.close_shard(&key)?;
    /// assert!(matches!(old.read(0, 1024, ReadBound::Committed), Err(StorageError::ShardClosed { .. })));
    /// let new = store.open_shard(&key)?;
    /// assert!(!std::sync::Arc::ptr_eq(&old, &new));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn close_shard(&self, key: &ShardKey) -> Result<()> {
        let mut claim = self.claim(key, false)?;
        match claim.take_to_close() {
            Some(shard) => shard.close_for_store(),
            None => Ok(()),
        }
    }

    /// Closes the shard of `key` (if open) and opens it again, running
    /// recovery: the way back for a shard a failed write or sync poisoned,
    /// without touching any other shard or dropping the store. Handles to
    /// the old shard fail with [`StorageError::ShardClosed`]; the new handle is
    /// returned (and given to every later [`Store::open_shard`]).
    ///
    /// A failure to close the old shard (the poison itself, typically) is
    /// logged, not returned: its lock is released either way, and what it
    /// held is what recovery finds. A key with no directory is
    /// [`StorageError::ShardNotFound`].
    ///
    /// ```
    /// use felix_storage::{Record, ShardKey, Store, StoreConfig};
    ///
    /// let root = tempfile::tempdir()?;
    /// let store = Store::options(root.path()).config(StoreConfig::default()).open()?;
    /// let key = ShardKey::new("acme", "default", "orders", 0);
    /// store.create_shard(&key)?.append(&[Record::new(1, "kept")]).wait()?;
    /// let fresh = store.reopen_shard(&key)?;
    /// assert!(fresh.poisoned().is_none());
    /// assert_eq!(fresh.offsets().written, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reopen_shard(&self, key: &ShardKey) -> Result<Arc<Shard>> {
        let claim = self.claim(key, true)?;
        if let Some(old) = claim.take_open()
            && let Err(err) = old.close_for_store()
        {
            tracing::warn!(shard = old.label(), error = %err, "closing the shard before reopening it failed; recovery decides what it held");
        }
        claim.make_room();
        let shard = self.open_existing(key)?;
        claim.publish(&shard);
        Ok(shard)
    }

    /// Stops background work and closes every open shard: everything
    /// written becomes durable, a clean-shutdown file is written per shard
    /// (so the next open checks only each newest segment), and every
    /// shard's lock is released, so the root can be opened again at once.
    /// Afterwards every call through a handle to one of its shards fails
    /// with [`StorageError::ShardClosed`], and every call on the store with
    /// [`StorageError::StoreClosed`].
    ///
    /// Every shard is closed even when one fails; the first failure is
    /// returned (each is logged). Then the sync pool stops: completion
    /// callbacks still pending run before this returns, and every pending
    /// future has completed. Closing a closed store does nothing.
    ///
    /// Opens, creates, closes and deletes of shards running in other
    /// threads finish first (a shard they open is closed with the rest);
    /// those that have not begun fail with [`StorageError::StoreClosed`].
    pub fn close(&self) -> Result<()> {
        self.stop_background();
        self.await_claims();
        let shards = lock(&self.inner.shards).drain();
        let mut first_error = None;
        for shard in shards {
            if let Err(err) = shard.close_for_store() {
                tracing::error!(shard = shard.label(), error = %err, "closing the shard failed");
                first_error.get_or_insert(err);
            }
        }
        self.inner.pool.shutdown();
        // Last: every shard's lock is released by now.
        lock(&self.inner.root_lock).take();
        first_error.map_or(Ok(()), Err)
    }

    /// The open shards, unless the store is closed.
    fn shards(&self) -> Result<MutexGuard<'_, OpenShards>> {
        let shards = lock(&self.inner.shards);
        if *lock(&self.inner.stop) {
            return Err(self.closed());
        }
        Ok(shards)
    }

    /// The directory of `key`'s shard.
    fn dir_of(&self, key: &ShardKey) -> PathBuf {
        self.inner.root.join(key.dir_name())
    }

    /// Opens the existing shard of `key` (not yet open in this store),
    /// checking its key file first and writing it when it is missing or
    /// unusable.
    fn open_existing(&self, key: &ShardKey) -> Result<Arc<Shard>> {
        let dir = self.dir_of(key);
        // Held open from here to the end of the shard's open, so that each
        // of its opens looks up one name, not the whole path.
        let held = self.inner.fs.through_dir(&dir);
        let stored = read_key_file(&held, &dir);
        // A key file read says the directory is there; without one, a look
        // at the name says whether it is.
        let dir_exists = match &stored {
            StoredKey::Key(_) => true,
            StoredKey::Missing | StoredKey::Unusable(_) => {
                let Some(file_type) = self
                    .inner
                    .fs
                    .entry_type(&dir)
                    .map_err(|e| store_io("stat", &dir, e))?
                else {
                    return Err(StorageError::ShardNotFound {
                        shard: Arc::from(key.to_string()),
                        key: Some(Box::new(key.clone())),
                        dir,
                    });
                };
                file_type == FileType::Directory
            }
        };
        let write_key = keys::check_key_file(&dir, key, &stored)?;
        let known = Known {
            capacity: self.inner.capacity,
            dir_exists,
            key: Some(stored),
            held: Some(held),
        };
        let shard = self.open_dir(key, 0, known)?;
        if write_key {
            self.write_key_or_close(&shard, key)?;
        }
        Ok(shard)
    }

    /// The one place the store opens a [`Shard`]: the directory of `key`,
    /// created if missing with its log at `initial_offset`.
    fn open_dir(&self, key: &ShardKey, initial_offset: u64, known: Known) -> Result<Arc<Shard>> {
        // Labelled by the key as the broker names it (errors, metrics, log
        // lines), not by its lossy directory name.
        let shard = Shard::options(self.dir_of(key))
            .config(self.inner.config)
            .file_system(self.inner.fs.clone())
            .label(&key.to_string())
            .initial_offset(initial_offset)
            .background_by_store()
            .keep_clean_shutdown()
            .read_buffers(Arc::clone(&self.inner.read_buffers))
            .sync_pool(self.inner.pool.clone())
            .known(known)
            .open()?;
        Ok(Arc::new(shard))
    }

    /// Writes `key`'s key file into the open `shard`'s directory (under its
    /// lock). A shard whose key cannot be recorded is not handed out: it is
    /// closed again and the failure returned.
    fn write_key_or_close(&self, shard: &Shard, key: &ShardKey) -> Result<()> {
        // `Ok(false)`: a name that is not a regular file holds the key
        // file's place, left alone (and logged); the shard is known by its
        // directory name, as without a key file.
        let Err(err) = felix_recovery::write_key_file(&self.inner.fs, shard.dir(), key) else {
            return Ok(());
        };
        if let Err(close) = shard.close_for_store() {
            tracing::warn!(shard = shard.label(), error = %close, "closing the shard whose key file could not be written failed");
        }
        Err(StorageError::Recovery(err))
    }

    fn stop_background(&self) {
        *lock(&self.inner.stop) = true;
        if let Some(background) = &self.background {
            background.stop();
        }
        if let Some(scrubber) = &self.scrubber {
            scrubber.stop();
        }
    }
}

impl Drop for Store {
    /// Closes the store as [`Store::close`] does, logging a failure.
    fn drop(&mut self) {
        if let Err(err) = self.close() {
            tracing::error!(root = %self.inner.root.display(), error = %err, "closing the dropped store failed");
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A store-level I/O failure (listing the root, removing a tombstone, a
/// thread that would not start), not one of any shard's.
pub(crate) fn store_io(op: &'static str, path: &Path, e: std::io::Error) -> StorageError {
    StorageError::Io(felix_io::IoError::new(op, path, e))
}
