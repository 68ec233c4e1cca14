//! openraft 0.10 submits an append and goes on: `append` returns once the
//! entries are written and readable, without waiting for their sync, and
//! the flush callback fires from the felix sync that covered them, never
//! before it. Appends made while a sync is under way share the next one.
//!
//! The syncs of the log's segments are held at a gate (a file system that
//! blocks `fdatasync` of `.log` files until the test opens it), so "not
//! before the sync" is observed, not hoped for. Every wait is bounded.

use std::io;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use felix_io::sim::SimFs;
use felix_io::{DirEntry, FileSystem, FileType, LockGuard, OpenMode, Vfs, VfsFile};
use felix_raft::{Entry, FelixLogStore, LogId, Request, TypeConfig};
use openraft::storage::{IOFlushed, RaftLogStorage};
use openraft::type_config::TypeConfigExt;
use openraft::{EntryPayload, RaftLogReader};

/// How long a held sync waits for the gate before it goes on anyway (the
/// test then fails on its own assertions, never hangs).
const GATE_LIMIT: Duration = Duration::from_secs(20);

#[derive(Debug, Default)]
struct GateState {
    open: bool,
    /// Syncs of `.log` files begun.
    syncs: u32,
}

#[derive(Debug, Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    fn pass(&self) {
        let mut state = self.state.lock().unwrap();
        state.syncs += 1;
        self.changed.notify_all();
        let (_state, _) = self
            .changed
            .wait_timeout_while(state, GATE_LIMIT, |s| !s.open)
            .unwrap();
    }

    fn open(&self) {
        self.state.lock().unwrap().open = true;
        self.changed.notify_all();
    }

    /// Holds the syncs from now on, counting from zero.
    fn close(&self) {
        let mut state = self.state.lock().unwrap();
        state.open = false;
        state.syncs = 0;
    }

    fn syncs(&self) -> u32 {
        self.state.lock().unwrap().syncs
    }

    /// Waits (bounded) until a sync is held at the gate.
    fn wait_for_a_sync(&self) {
        let state = self.state.lock().unwrap();
        let (state, _) = self
            .changed
            .wait_timeout_while(state, GATE_LIMIT, |s| s.syncs == 0)
            .unwrap();
        assert!(state.syncs > 0, "no sync began within {GATE_LIMIT:?}");
    }
}

/// The simulated file system, with the data syncs of segment files held
/// at the gate.
#[derive(Debug, Clone)]
struct GatedFs {
    inner: SimFs,
    gate: Arc<Gate>,
}

#[derive(Debug)]
struct GatedFile {
    inner: Arc<dyn VfsFile>,
    gate: Option<Arc<Gate>>,
}

impl VfsFile for GatedFile {
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
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
        if let Some(gate) = &self.gate {
            gate.pass();
        }
        self.inner.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.inner.sync_all()
    }
    fn preallocate(&self, len: u64) -> io::Result<bool> {
        self.inner.preallocate(len)
    }
}

impl Vfs for GatedFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        let inner = self.inner.open(path, mode)?;
        // A segment is created as `*.log.tmp` and renamed: its handle keeps
        // the name it was opened by.
        let segment = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains(".log"));
        Ok(Arc::new(GatedFile {
            inner,
            gate: segment.then(|| Arc::clone(&self.gate)),
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
}

fn entry(index: u64) -> Entry {
    Entry {
        log_id: LogId::new_term_index(1, index),
        payload: EntryPayload::Normal(Request::at(index, format!("e{index}").into_bytes())),
    }
}

#[test]
fn append_returns_readable_before_its_sync_and_reports_only_after_it() {
    let gate = Arc::new(Gate::default());
    gate.open();
    let fs = GatedFs {
        inner: SimFs::new(),
        gate: Arc::clone(&gate),
    };
    let mut log: FelixLogStore<TypeConfig> = FelixLogStore::options("/log")
        .file_system(FileSystem::new(fs))
        .open()
        .unwrap();
    gate.close();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut reader = log.get_log_reader().await;
        let mut flushed = Vec::new();
        // The first append's sync is held at the gate; three more are made
        // while it is: each returns with its entries readable.
        for index in 0..4 {
            let (tx, rx) = TypeConfig::oneshot();
            log.append([entry(index)], IOFlushed::signal(tx))
                .await
                .unwrap();
            flushed.push(rx);
            let read = reader.try_get_log_entries(index..=index).await.unwrap();
            assert_eq!(read, vec![entry(index)], "entry {index} readable on return");
            if index == 0 {
                gate.wait_for_a_sync();
            }
        }
        // None is reported durable while the syncs are held.
        tokio::time::sleep(Duration::from_millis(100)).await;
        for (index, rx) in flushed.iter_mut().enumerate() {
            let early = tokio::time::timeout(Duration::from_millis(1), rx).await;
            assert!(early.is_err(), "append {index} reported before its sync");
        }
        assert_eq!(log.shard().offsets().durable, 0);

        gate.open();
        for (index, rx) in flushed.into_iter().enumerate() {
            let outcome = tokio::time::timeout(GATE_LIMIT, rx)
                .await
                .unwrap_or_else(|_| panic!("append {index} never reported"))
                .unwrap();
            assert!(outcome.is_ok(), "append {index}: {outcome:?}");
        }
        assert_eq!(log.shard().offsets().durable, 4);
        // The three appends made while the first sync was held shared the
        // next one: two syncs for four appends.
        assert_eq!(gate.syncs(), 2);
    });
}
