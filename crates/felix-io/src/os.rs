//! The real file system: `std::fs` plus `rustix` for `fallocate` and
//! `flock`, with no unsafe code and no buffering.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use rustix::fs::{FallocateFlags, FlockOperation, fallocate, flock};

use crate::{DirEntry, LockGuard, OpenMode, Vfs, VfsFile};

/// The operating system's file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsFs;

#[derive(Debug)]
struct OsFile(File);

impl VfsFile for OsFile {
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, position)
    }

    fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        self.0.write_all_at(buf, position)
    }

    fn file_len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.0.sync_all()
    }

    fn preallocate(&self, len: u64) -> io::Result<bool> {
        match fallocate(&self.0, FallocateFlags::KEEP_SIZE, 0, len) {
            Ok(()) => Ok(true),
            // No support (EOPNOTSUPP, ENOSYS) or a file system that rejects
            // KEEP_SIZE (EINVAL): the file grows as it is written instead.
            Err(errno)
                if errno == rustix::io::Errno::OPNOTSUPP
                    || errno == rustix::io::Errno::NOSYS
                    || errno == rustix::io::Errno::INVAL =>
            {
                Ok(false)
            }
            Err(errno) => Err(errno.into()),
        }
    }
}

impl Vfs for OsFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        let mut options = OpenOptions::new();
        match mode {
            OpenMode::Read => options.read(true),
            OpenMode::ReadWrite => options.read(true).write(true),
            OpenMode::CreateNew => options.read(true).write(true).create_new(true),
            OpenMode::CreateTruncate => options.read(true).write(true).create(true).truncate(true),
            OpenMode::CreateOrOpen => options.read(true).write(true).create(true).truncate(false),
        };
        Ok(Arc::new(OsFile(options.open(path)?)))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        std::fs::read_dir(dir)?
            .map(|entry| {
                let entry = entry?;
                Ok(DirEntry {
                    name: entry.file_name(),
                    is_dir: entry.file_type()?.is_dir(),
                })
            })
            .collect()
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn try_lock(&self, path: &Path) -> io::Result<Option<LockGuard>> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        // An advisory lock dies with its process, so a crash never leaves a
        // stale lock behind (unlike a pid file).
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(LockGuard::new(file))),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(errno) => Err(errno.into()),
        }
    }
}
