//! The advisory lock that keeps one writer per shard directory.
//!
//! It lives here, beside [`repair`](crate::repair), because repairing is
//! writing: [`repair`](crate::repair) and [`open_shard`](crate::open_shard)
//! take a `&ShardLock`, so a directory cannot be modified by recovery
//! without the lock that keeps a live writer out.

use std::path::{Path, PathBuf};

use felix_format::LOCK_FILE_NAME;
use felix_io::{DirEntry, FileSystem, IoError, LockGuard};

/// Why [`ShardLock::acquire`] did not take the lock.
///
/// Not `#[non_exhaustive]`: callers map it onto their own errors case by
/// case, and a new case must make each of them decide.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LockError {
    /// Another process (or another handle in this one) holds it.
    #[error("shard directory {} is locked by another writer", dir.display())]
    Locked {
        /// The shard directory.
        dir: PathBuf,
    },
    /// A store holds the lock of the root directory (see [`StoreLock`]).
    #[error("the store root {} is held by a running store", root.display())]
    StoreLocked {
        /// The store's root directory.
        root: PathBuf,
    },
    /// Taking it failed (the directory is missing, say).
    #[error(transparent)]
    Io(#[from] IoError),
}

/// An exclusive advisory lock (`flock`) on a shard directory, released when
/// dropped or when the process dies, which is why an advisory lock beats a
/// pid file: a crash never leaves a stale lock behind.
///
/// The lock is taken on the directory's own descriptor. A lock on a file
/// inside it would be only as good as the file's name: `rm lock` between two
/// writers would let the second create a new file, lock that, and write over
/// the first one's acknowledged records. Nothing done to the directory's
/// entries can release a lock on the directory itself.
///
/// For earlier releases, which lock only `<shard>/lock`
/// ([`LOCK_FILE_NAME`]), the file is locked too (created if missing, a
/// regular file only): a writer or a repair tool of an earlier release
/// holding it still keeps this one out, and the other way round. A `lock`
/// that is a symbolic link (or anything but a regular file) is left alone,
/// never followed or created through; the directory's lock is the one that
/// counts.
///
/// A shard takes it for its whole life; tools that modify a shard directory
/// without opening it as a shard take it too, so they never repair a tail
/// that a live writer is still appending to.
///
/// ```
/// # use felix_io::FileSystem;
/// # use felix_recovery::{LockError, ShardLock};
/// let dir = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// let lock = ShardLock::acquire(&fs, dir.path())?;
/// assert_eq!(lock.dir(), dir.path());
/// assert!(matches!(ShardLock::acquire(&fs, dir.path()), Err(LockError::Locked { .. })));
/// drop(lock);
/// ShardLock::acquire(&fs, dir.path())?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ShardLock {
    dir: PathBuf,
    _dir: LockGuard,
    _file: Option<LockGuard>,
}

impl ShardLock {
    /// Takes the lock of the shard directory `dir` on `fs` without waiting.
    ///
    /// Fails with [`LockError::Locked`] when another process (or another
    /// handle in this one) holds it.
    pub fn acquire(fs: &FileSystem, dir: &Path) -> Result<Self, LockError> {
        let dir_guard = match fs.try_lock_dir(dir) {
            Ok(Some(guard)) => guard,
            Ok(None) => {
                return Err(LockError::Locked {
                    dir: dir.to_path_buf(),
                });
            }
            Err(e) => return Err(IoError::new("lock", dir, e).into()),
        };
        Self::with_dir_guard(fs, dir, dir_guard)
    }

    /// [`Self::acquire`], and the directory's entries read through the
    /// locked descriptor once both locks are held (`None` when they could
    /// not be read: an open then lists the directory itself and reports
    /// what fails), for [`open_shard_with`](crate::open_shard_with) to take
    /// instead of opening the directory a second time.
    ///
    /// The older releases' `lock` file is locked first: a writer of an
    /// earlier release holds only that one, so until it is ours that writer
    /// may still be changing the directory, and a listing read before it
    /// could miss what it did last (a segment rolled, a clean-shutdown
    /// record written). Both locks are taken without waiting, so the order
    /// cannot deadlock with a holder taking them the other way round.
    pub fn acquire_listing(
        fs: &FileSystem,
        dir: &Path,
    ) -> Result<(Self, Option<Vec<DirEntry>>), LockError> {
        let file_guard = match Self::lock_earlier_releases_file(fs, dir) {
            Ok(guard) => guard,
            // No directory: its own lock below says so, naming it. (If it
            // appears meanwhile, the locks are taken in the plain order and
            // the open lists it itself.)
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let lock = Self::acquire(fs, dir)?;
                return Ok((lock, None));
            }
            Err(e) => return Err(Self::file_lock_error(dir, e)),
        };
        let (dir_guard, listed) = match fs.try_lock_dir_listing(dir) {
            Ok(Some(locked)) => locked,
            Ok(None) => {
                return Err(LockError::Locked {
                    dir: dir.to_path_buf(),
                });
            }
            Err(e) => return Err(IoError::new("lock", dir, e).into()),
        };
        let listed = match listed {
            Ok(entries) => Some(entries),
            Err(e) => {
                tracing::debug!(dir = %dir.display(), error = %e, "listing through the lock failed; the open lists the directory itself");
                None
            }
        };
        Ok((
            Self {
                dir: dir.to_path_buf(),
                _dir: dir_guard,
                _file: file_guard,
            },
            listed,
        ))
    }

    /// The lock, its directory's own taken: the older releases' file next.
    fn with_dir_guard(
        fs: &FileSystem,
        dir: &Path,
        dir_guard: LockGuard,
    ) -> Result<Self, LockError> {
        let file_guard =
            Self::lock_earlier_releases_file(fs, dir).map_err(|e| Self::file_lock_error(dir, e))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            _dir: dir_guard,
            _file: file_guard,
        })
    }

    /// Locks `<dir>/lock` for earlier releases (created if missing): `None`
    /// when it is something other than a regular file, left alone (the
    /// directory's lock is the one that counts); an error of kind
    /// `WouldBlock` when an earlier release's writer or tool holds it.
    fn lock_earlier_releases_file(
        fs: &FileSystem,
        dir: &Path,
    ) -> std::io::Result<Option<LockGuard>> {
        let path = dir.join(LOCK_FILE_NAME);
        match fs.try_lock(&path) {
            Ok(Some(guard)) => Ok(Some(guard)),
            Ok(None) => Err(std::io::ErrorKind::WouldBlock.into()),
            Err(e) => match felix_io::not_regular_file(&e) {
                Some(what) => {
                    tracing::warn!(path = %path.display(), %what, "lock file left alone; the shard directory's own lock holds");
                    Ok(None)
                }
                None => Err(e),
            },
        }
    }

    /// What a failure of [`Self::lock_earlier_releases_file`] means.
    fn file_lock_error(dir: &Path, e: std::io::Error) -> LockError {
        if e.kind() == std::io::ErrorKind::WouldBlock {
            LockError::Locked {
                dir: dir.to_path_buf(),
            }
        } else {
            IoError::new("lock", dir.join(LOCK_FILE_NAME), e).into()
        }
    }

    /// The directory this lock holds.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// An exclusive advisory lock (`flock`) on a store's root directory, taken
/// on the directory's own descriptor as [`ShardLock`] is, and held by a
/// store for its whole life.
///
/// A store closes the files of shards it has not used lately, and their
/// [`ShardLock`]s with them, so a shard lock alone no longer says that a
/// store owns the shard. This lock does: a second store on the same root is
/// refused even while every shard is closed, and a tool that repairs a
/// shard directory takes the lock of the directory above it as well (for a
/// shard outside any store that directory is an ordinary one, whose lock
/// keeps out only another such tool working beside it).
///
/// ```
/// # use felix_io::FileSystem;
/// # use felix_recovery::{LockError, StoreLock};
/// let root = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// let lock = StoreLock::acquire(&fs, root.path())?;
/// assert!(matches!(StoreLock::acquire(&fs, root.path()), Err(LockError::StoreLocked { .. })));
/// drop(lock);
/// StoreLock::acquire(&fs, root.path())?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct StoreLock {
    root: PathBuf,
    _root: LockGuard,
}

impl StoreLock {
    /// Takes the lock of the root directory `root` on `fs` without waiting.
    ///
    /// Fails with [`LockError::StoreLocked`] when another process (or
    /// another handle in this one) holds it.
    pub fn acquire(fs: &FileSystem, root: &Path) -> Result<Self, LockError> {
        match fs.try_lock_dir(root) {
            Ok(Some(guard)) => Ok(Self {
                root: root.to_path_buf(),
                _root: guard,
            }),
            Ok(None) => Err(LockError::StoreLocked {
                root: root.to_path_buf(),
            }),
            Err(e) => Err(IoError::new("lock", root, e).into()),
        }
    }

    /// The root directory this lock holds.
    pub fn root(&self) -> &Path {
        &self.root
    }
}
