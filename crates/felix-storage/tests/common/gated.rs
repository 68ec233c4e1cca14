//! A file system whose segment syncs can be held at a gate and are timed:
//! for completions that must be pending at a given moment, and for sync
//! latencies by shard. The opens of files in one directory can be held
//! too: for a shard's open that must be under way at a given moment.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use felix_io::{DirEntry, FileSystem, FileType, LockGuard, OpenMode, Vfs, VfsFile};

#[derive(Debug, Default)]
struct Gate {
    /// Syncs of `.log` files wait while this is set.
    closed: Mutex<bool>,
    opened: Condvar,
    /// Syncs waiting at the gate now.
    waiting: Mutex<usize>,
    /// Every `.log` sync's duration, by the shard directory it is in.
    durations: Mutex<HashMap<PathBuf, Vec<Duration>>>,
    /// Opens of files in this directory wait while it is set.
    held_dir: Mutex<Option<PathBuf>>,
    released: Condvar,
    /// Opens waiting in the held directory now.
    opens_waiting: Mutex<usize>,
    /// Reads of `.log` files so far.
    segment_reads: AtomicU64,
}

/// `inner` with its segment syncs gated and timed.
#[derive(Debug, Clone)]
pub(crate) struct GatedFs<V> {
    inner: V,
    gate: Arc<Gate>,
    /// When set, only files whose names end so are gated (and timed).
    only: Option<&'static str>,
}

impl<V: Vfs + Clone + 'static> GatedFs<V> {
    pub(crate) fn new(inner: V) -> Self {
        Self {
            inner,
            gate: Arc::default(),
            only: None,
        }
    }

    /// Gates only the syncs of files whose names end with `suffix` (a
    /// segment copy's `.log.copy`, say) instead of every segment's.
    pub(crate) fn only(mut self, suffix: &'static str) -> Self {
        self.only = Some(suffix);
        self
    }

    pub(crate) fn handle(&self) -> FileSystem {
        FileSystem::new(self.clone())
    }

    /// Holds every segment sync from now on until [`GatedFs::open_gate`].
    pub(crate) fn close_gate(&self) {
        *self.gate.closed.lock().unwrap() = true;
    }

    pub(crate) fn open_gate(&self) {
        *self.gate.closed.lock().unwrap() = false;
        self.gate.opened.notify_all();
    }

    /// How many syncs wait at the gate now.
    pub(crate) fn waiting(&self) -> usize {
        *self.gate.waiting.lock().unwrap()
    }

    /// Waits until `n` syncs wait at the gate.
    pub(crate) fn await_waiting(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while *self.gate.waiting.lock().unwrap() < n {
            assert!(Instant::now() < deadline, "no sync reached the gate");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Holds every open of a file in `dir` from now on until
    /// [`GatedFs::release_opens`].
    pub(crate) fn hold_opens_in(&self, dir: &Path) {
        *self.gate.held_dir.lock().unwrap() = Some(dir.to_path_buf());
    }

    pub(crate) fn release_opens(&self) {
        *self.gate.held_dir.lock().unwrap() = None;
        self.gate.released.notify_all();
    }

    /// Waits until an open waits in the held directory.
    pub(crate) fn await_held_open(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while *self.gate.opens_waiting.lock().unwrap() == 0 {
            assert!(Instant::now() < deadline, "no open reached the gate");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// How many opens wait in the held directory now.
    pub(crate) fn held_opens(&self) -> usize {
        *self.gate.opens_waiting.lock().unwrap()
    }

    /// Waits while `path`'s directory is the held one.
    fn pass_open(&self, path: &Path) {
        let mut held = self.gate.held_dir.lock().unwrap();
        if held.as_deref() != path.parent() {
            return;
        }
        *self.gate.opens_waiting.lock().unwrap() += 1;
        while held.as_deref() == path.parent() {
            held = self.gate.released.wait(held).unwrap();
        }
        *self.gate.opens_waiting.lock().unwrap() -= 1;
    }

    /// How many reads of segment files were made so far (each one
    /// `pread` on a real disk).
    pub(crate) fn segment_reads(&self) -> u64 {
        self.gate.segment_reads.load(Ordering::Relaxed)
    }

    /// The durations of the segment syncs made in `dir`.
    pub(crate) fn sync_durations(&self, dir: &Path) -> Vec<Duration> {
        self.gate
            .durations
            .lock()
            .unwrap()
            .get(dir)
            .cloned()
            .unwrap_or_default()
    }
}

#[derive(Debug)]
struct GatedFile {
    inner: Arc<dyn VfsFile>,
    /// The shard directory, for a segment; `None` for other files.
    segment_of: Option<PathBuf>,
    gate: Arc<Gate>,
}

impl VfsFile for GatedFile {
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        if self.segment_of.is_some() {
            self.gate.segment_reads.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.read_exact_at(buf, position)
    }
    fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        self.inner.write_all_at(buf, position)
    }
    fn file_len(&self) -> io::Result<u64> {
        self.inner.file_len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        let Some(dir) = &self.segment_of else {
            return self.inner.sync_data();
        };
        {
            let mut closed = self.gate.closed.lock().unwrap();
            if *closed {
                *self.gate.waiting.lock().unwrap() += 1;
                while *closed {
                    closed = self.gate.opened.wait(closed).unwrap();
                }
                *self.gate.waiting.lock().unwrap() -= 1;
            }
        }
        let started = Instant::now();
        let result = self.inner.sync_data();
        self.gate
            .durations
            .lock()
            .unwrap()
            .entry(dir.clone())
            .or_default()
            .push(started.elapsed());
        result
    }
    fn sync_all(&self) -> io::Result<()> {
        self.inner.sync_all()
    }
    fn preallocate(&self, len: u64) -> io::Result<bool> {
        self.inner.preallocate(len)
    }
}

impl<V: Vfs + Clone + 'static> Vfs for GatedFs<V> {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        self.pass_open(path);
        // A segment is created as `{id}.log.tmp` and renamed: the handle
        // opened under the temporary name is the one later synced.
        let is_segment = path.file_name().is_some_and(|n| {
            let name = n.to_string_lossy();
            match self.only {
                Some(suffix) => name.ends_with(suffix),
                None => name.contains(".log"),
            }
        });
        let segment_of = is_segment
            .then(|| path.parent().map(Path::to_path_buf))
            .flatten();
        Ok(Arc::new(GatedFile {
            inner: self.inner.open(path, mode)?,
            segment_of,
            gate: Arc::clone(&self.gate),
        }))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_dir(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        self.inner.list_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.inner.is_dir(path)
    }
    fn entry_type(&self, path: &Path) -> io::Result<Option<FileType>> {
        self.inner.entry_type(path)
    }
    fn try_lock(&self, path: &Path) -> io::Result<Option<LockGuard>> {
        self.inner.try_lock(path)
    }
    fn try_lock_dir(&self, dir: &Path) -> io::Result<Option<LockGuard>> {
        self.inner.try_lock_dir(dir)
    }
    fn capacity_bytes(&self, dir: &Path) -> io::Result<Option<u64>> {
        self.inner.capacity_bytes(dir)
    }
}
