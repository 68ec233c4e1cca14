//! A file system that never syncs, for building large fixtures fast through
//! the real write path. Never used for a measured run.

use std::io;
use std::path::Path;
use std::sync::Arc;

use felix_io::{DirEntry, FileSystem, FileType, LockGuard, OpenMode, OsFs, Vfs, VfsFile};

/// [`OsFs`] with every sync a no-op: what the page cache holds is what a
/// later open reads, and fixtures need no durability.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSyncFs;

impl NoSyncFs {
    /// A [`FileSystem`] handle to it.
    pub fn handle() -> FileSystem {
        FileSystem::new(NoSyncFs)
    }
}

#[derive(Debug)]
struct NoSyncFile(Arc<dyn VfsFile>);

impl VfsFile for NoSyncFile {
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, position)
    }
    fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        self.0.write_all_at(buf, position)
    }
    fn file_len(&self) -> io::Result<u64> {
        self.0.file_len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
    fn sync_all(&self) -> io::Result<()> {
        Ok(())
    }
    fn preallocate(&self, _len: u64) -> io::Result<bool> {
        Ok(false)
    }
}

impl Vfs for NoSyncFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        Ok(Arc::new(NoSyncFile(OsFs.open(path, mode)?)))
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
    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
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
        OsFs.try_lock(path)
    }
    fn try_lock_dir(&self, dir: &Path) -> io::Result<Option<LockGuard>> {
        OsFs.try_lock_dir(dir)
    }
}
