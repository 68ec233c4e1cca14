//! A shard lock is whole before the directory is listed. A writer of an
//! earlier release locks only `<shard>/lock`, so until that lock is ours it
//! may still be changing the directory: a listing read before it would
//! miss (say) the segment it rolled just before it exited, and the writer
//! that opened on that listing would later write over it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use felix_format::{FileKind, LOCK_FILE_NAME, file_name};
use felix_io::{DirEntry, FileSystem, FileType, LockGuard, OpenMode, Vfs, VfsFile};
use felix_recovery::ShardLock;

/// The real file system, where the earlier release's writer finishes its
/// last act (a segment rolled) at the moment its `lock` is taken over.
#[derive(Debug)]
struct EarlierWriterExits {
    inner: FileSystem,
    rolled: PathBuf,
}

impl Vfs for EarlierWriterExits {
    fn open(&self, path: &Path, mode: OpenMode) -> std::io::Result<Arc<dyn VfsFile>> {
        self.inner.open(path, mode)
    }
    fn open_with_len(
        &self,
        path: &Path,
        mode: OpenMode,
    ) -> std::io::Result<(Arc<dyn VfsFile>, Option<u64>)> {
        self.inner.open_with_len(path, mode)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove_dir(path)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn list_dir(&self, dir: &Path) -> std::io::Result<Vec<DirEntry>> {
        self.inner.list_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.inner.is_dir(path)
    }
    fn entry_type(&self, path: &Path) -> std::io::Result<Option<FileType>> {
        self.inner.entry_type(path)
    }
    fn try_lock(&self, path: &Path) -> std::io::Result<Option<LockGuard>> {
        if path.file_name().is_some_and(|n| n == LOCK_FILE_NAME) {
            std::fs::write(&self.rolled, b"")?;
        }
        self.inner.try_lock(path)
    }
    fn try_lock_dir(&self, dir: &Path) -> std::io::Result<Option<LockGuard>> {
        self.inner.try_lock_dir(dir)
    }
    #[allow(clippy::type_complexity)]
    fn try_lock_dir_listing(
        &self,
        dir: &Path,
    ) -> std::io::Result<Option<(LockGuard, std::io::Result<Vec<DirEntry>>)>> {
        self.inner.try_lock_dir_listing(dir)
    }
}

#[test]
fn the_listing_taken_with_the_lock_is_read_after_the_earlier_releases_lock_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let rolled = dir.path().join(file_name(5, FileKind::Segment).as_str());
    let fs = FileSystem::new(EarlierWriterExits {
        inner: FileSystem::os(),
        rolled: rolled.clone(),
    });
    let (lock, listing) = ShardLock::acquire_listing(&fs, dir.path()).unwrap();
    let names: Vec<_> = listing
        .expect("the directory lists")
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert!(
        names.iter().any(|n| *n == *rolled.file_name().unwrap()),
        "the listing misses what the earlier writer did before its lock was taken: {names:?}"
    );
    drop(lock);
}
