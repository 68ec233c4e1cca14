//! The real file system with one directory held open: the entries of that
//! directory are opened by name relative to its descriptor (`openat`), so
//! each open looks up one name instead of walking the whole path again.
//!
//! Opening a shard opens five files in its directory and locks the
//! directory itself; by path, each open walks every component from the
//! working directory down (most of what opening a shard cost the kernel:
//! docs/performance.md). Here the directory is opened once, its lock and
//! listing are taken through that same descriptor, and the files are
//! opened relative to it. Everything else (renames, removals, syncs,
//! listings of other directories) goes by path as [`OsFs`] does.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{FlockOperation, flock};

use crate::os::{lock_at, lock_then_list, open_at, open_directory};
use crate::{DirEntry, FileType, LockGuard, OpenMode, OsFs, Vfs, VfsFile};

/// [`OsFs`], opening the entries of `dir` through a descriptor of it.
#[derive(Debug)]
pub(crate) struct OsDirFs {
    dir: PathBuf,
    fd: Arc<File>,
    /// Whether the descriptor's one lock (and listing) was handed out. A
    /// second lock of the directory opens it afresh, as [`OsFs`] would:
    /// `flock` on the same open file again would succeed where another
    /// holder must be refused, and the listing would start past the end.
    lock_taken: AtomicBool,
}

impl OsDirFs {
    /// Opens `dir` to hold it.
    pub(crate) fn open(dir: &Path) -> io::Result<Self> {
        Ok(Self {
            dir: dir.to_path_buf(),
            fd: Arc::new(open_directory(dir)?),
            lock_taken: AtomicBool::new(false),
        })
    }

    /// The name of `path` in the held directory, when `path` is an entry
    /// of it (its parent is the directory, as `dir.join(name)` makes it).
    fn name_in<'a>(&self, path: &'a Path) -> Option<&'a OsStr> {
        if path.parent()? != self.dir {
            return None;
        }
        path.file_name()
    }

    /// Whether the descriptor's lock is still to be handed out for `dir`
    /// (and is now taken).
    fn take_lock(&self, dir: &Path) -> bool {
        dir == self.dir && !self.lock_taken.swap(true, Ordering::AcqRel)
    }
}

/// The directory's lock on the shared descriptor: released when dropped,
/// whoever else still holds the descriptor.
struct DirFlock(Option<Arc<File>>);

impl Drop for DirFlock {
    fn drop(&mut self) {
        // The last holder's close releases the lock by itself; while a file
        // system handle still holds the descriptor, it is released here.
        // Nothing to do on failure: the lock goes with the descriptor.
        if let Some(fd) = self.0.take().and_then(|fd| Arc::try_unwrap(fd).err()) {
            let _ = flock(&*fd, FlockOperation::Unlock);
        }
    }
}

impl Vfs for OsDirFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        Ok(self.open_with_len(path, mode)?.0)
    }

    fn open_with_len(
        &self,
        path: &Path,
        mode: OpenMode,
    ) -> io::Result<(Arc<dyn VfsFile>, Option<u64>)> {
        let Some(name) = self.name_in(path) else {
            return OsFs.open_with_len(path, mode);
        };
        open_at(&*self.fd, name, path, mode)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        OsFs.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        OsFs.remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        OsFs.remove_dir(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        OsFs.sync_dir(dir)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        OsFs.list_dir(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        OsFs.create_dir_all(dir)
    }

    fn is_dir(&self, path: &Path) -> bool {
        OsFs.is_dir(path)
    }

    fn entry_type(&self, path: &Path) -> io::Result<Option<FileType>> {
        OsFs.entry_type(path)
    }

    fn try_lock(&self, path: &Path) -> io::Result<Option<LockGuard>> {
        let Some(name) = self.name_in(path) else {
            return OsFs.try_lock(path);
        };
        lock_at(&*self.fd, name, path)
    }

    fn try_lock_dir(&self, dir: &Path) -> io::Result<Option<LockGuard>> {
        if !self.take_lock(dir) {
            return OsFs.try_lock_dir(dir);
        }
        match flock(&*self.fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(LockGuard::new(DirFlock(Some(Arc::clone(&self.fd)))))),
            Err(errno) => {
                // Not held: a later lock may use the descriptor after all.
                self.lock_taken.store(false, Ordering::Release);
                match errno {
                    rustix::io::Errno::WOULDBLOCK => Ok(None),
                    errno => Err(errno.into()),
                }
            }
        }
    }

    fn try_lock_dir_listing(
        &self,
        dir: &Path,
    ) -> io::Result<Option<(LockGuard, io::Result<Vec<DirEntry>>)>> {
        if !self.take_lock(dir) {
            return OsFs.try_lock_dir_listing(dir);
        }
        let locked = lock_then_list(&self.fd);
        if !matches!(locked, Ok(Some(_))) {
            // Not held: a later lock may use the descriptor after all.
            self.lock_taken.store(false, Ordering::Release);
        }
        Ok(locked?.map(|listing| {
            (
                LockGuard::new(DirFlock(Some(Arc::clone(&self.fd)))),
                listing,
            )
        }))
    }

    fn capacity_bytes(&self, dir: &Path) -> io::Result<Option<u64>> {
        OsFs.capacity_bytes(dir)
    }

    fn through_dir(&self, dir: &Path) -> Option<crate::FileSystem> {
        OsFs.through_dir(dir)
    }
}
