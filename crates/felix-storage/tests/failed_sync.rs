//! What appenders, readers and later callers see when a write or sync
//! fails: every append the failure covered gets it, with its operation and
//! path; later calls get `Poisoned`, whose source chain reaches the
//! `io::Error`; no reader is served a record that was not acknowledged.

mod common;

use std::error::Error;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use common::{config, records};
use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_io::{DirEntry, FileSystem, FileType, LockGuard, OpenMode, Vfs, VfsFile};
use felix_storage::{Durability, ReadBound, Record, Shard, StorageError, StoreConfig};

const EIO: i32 = 5;
const DIR: &str = "/shard";

fn open_on(fs: FileSystem, config: StoreConfig) -> Shard {
    Shard::options(Path::new(DIR))
        .file_system(fs)
        .config(config)
        .label("sim")
        .open()
        .unwrap()
}

fn sync_fault(skip: u32) -> Fault {
    Fault {
        op: FaultOp::SyncFile,
        path_contains: ".log".into(),
        skip,
        effect: FaultEffect::SyncFailKeep(EIO),
    }
}

/// The raw OS error at the end of `err`'s source chain.
fn root_os_error(err: &StorageError) -> Option<i32> {
    let mut source: Option<&(dyn Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.raw_os_error();
        }
        source = e.source();
    }
    None
}

fn payloads(shard: &Shard, bound: ReadBound) -> Vec<String> {
    shard
        .read(0, u64::MAX, bound)
        .unwrap()
        .into_iter()
        .map(|r| String::from_utf8(r.payload.to_vec()).unwrap())
        .collect()
}

/// Issue row 4: an append whose `fdatasync` failed erred, yet `read(0)`
/// returned `["acked", "NOT acked"]`. Row 4b: its error nested the failure
/// twice, called it "earlier", and `Poisoned` had no source.
#[test]
fn append_whose_sync_fails_is_never_served_and_later_calls_chain_to_the_io_error() {
    let sim = SimFs::new();
    let shard = open_on(
        FileSystem::new(sim.clone()),
        config(1 << 20, Durability::OnCommit),
    );
    shard.append(&[Record::new(1, "acked")]).wait().unwrap();
    sim.inject(sync_fault(0));
    let own = shard
        .append(&[Record::new(2, "NOT acked")])
        .wait()
        .unwrap_err();
    assert!(
        matches!(own, StorageError::Segment { .. }),
        "the failing call gets its own failure: {own:?}"
    );
    assert_eq!(root_os_error(&own), Some(EIO));
    for bound in [
        ReadBound::Committed,
        ReadBound::Written,
        ReadBound::Below(u64::MAX),
    ] {
        assert_eq!(payloads(&shard, bound), ["acked"], "{bound:?}");
    }
    let later = shard.append(&[Record::new(3, "later")]).wait().unwrap_err();
    let StorageError::Poisoned { original, .. } = &later else {
        panic!("{later:?}")
    };
    assert_eq!(original.to_string(), own.to_string());
    assert_eq!(
        root_os_error(&later),
        Some(EIO),
        "source() reaches the io::Error"
    );
    let sync = shard.sync().unwrap_err();
    assert!(matches!(sync, StorageError::Poisoned { .. }), "{sync:?}");
    let text = format!("failing append: {own}\nlater append:   {later}\nsync:           {sync}");
    assert!(!text.contains("earlier"), "{text}");
    insta::assert_snapshot!(text);
}

/// A file system whose segment syncs wait at a gate while it is closed, so
/// that appends pile up behind a sync in flight.
#[derive(Debug, Clone)]
struct GatedFs {
    inner: SimFs,
    gate: Arc<Gate>,
}

#[derive(Debug, Default)]
struct Gate {
    /// (a sync is waiting at the gate, the gate is open)
    state: Mutex<(bool, bool)>,
    changed: Condvar,
}

impl Gate {
    fn pass(&self) {
        let mut state = self.state.lock().unwrap();
        if state.1 {
            return;
        }
        state.0 = true;
        self.changed.notify_all();
        while !state.1 {
            state = self.changed.wait(state).unwrap();
        }
    }

    fn wait_for_sync(&self) {
        let mut state = self.state.lock().unwrap();
        while !state.0 {
            state = self.changed.wait(state).unwrap();
        }
    }

    fn open(&self) {
        self.state.lock().unwrap().1 = true;
        self.changed.notify_all();
    }
}

#[derive(Debug)]
struct GatedFile {
    inner: Arc<dyn VfsFile>,
    gate: Option<Arc<Gate>>,
}

impl VfsFile for GatedFile {
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> std::io::Result<()> {
        self.inner.read_exact_at(buf, position)
    }
    fn write_all_at(&self, buf: &[u8], position: u64) -> std::io::Result<()> {
        self.inner.write_all_at(buf, position)
    }
    fn file_len(&self) -> std::io::Result<u64> {
        self.inner.file_len()
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.inner.set_len(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        if let Some(gate) = &self.gate {
            gate.pass();
        }
        self.inner.sync_data()
    }
    fn sync_all(&self) -> std::io::Result<()> {
        self.inner.sync_all()
    }
    fn preallocate(&self, len: u64) -> std::io::Result<bool> {
        self.inner.preallocate(len)
    }
}

impl Vfs for GatedFs {
    fn open(&self, path: &Path, mode: OpenMode) -> std::io::Result<Arc<dyn VfsFile>> {
        let inner = self.inner.open(path, mode)?;
        // A segment is created as `.log.tmp` and renamed: its handle is the
        // temporary's.
        let gate = path
            .to_string_lossy()
            .contains(".log")
            .then(|| Arc::clone(&self.gate));
        Ok(Arc::new(GatedFile { inner, gate }))
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
        self.inner.try_lock(path)
    }
    fn try_lock_dir(&self, dir: &Path) -> std::io::Result<Option<LockGuard>> {
        self.inner.try_lock_dir(dir)
    }
}

/// One sync covers many appends: appends written while a sync is in flight
/// all wait for the next one, and when it fails each of them gets its I/O
/// error (not `Poisoned`), none of their records is readable, and the
/// append the first sync covered is acknowledged and readable.
#[test]
fn a_failed_sync_fails_every_append_it_covered_with_the_io_error() {
    const COVERED: usize = 3;
    let sim = SimFs::new();
    let gate = Arc::new(Gate::default());
    // Open while the open syncs the new segment, closed for the appends.
    gate.open();
    let gated = GatedFs {
        inner: sim.clone(),
        gate: Arc::clone(&gate),
    };
    let shard = Arc::new(open_on(
        FileSystem::new(gated),
        config(1 << 20, Durability::OnCommit),
    ));
    *gate.state.lock().unwrap() = (false, false);
    // The first append's sync waits at the gate; the next sync fails.
    sim.inject(sync_fault(1));
    let first = {
        let shard = Arc::clone(&shard);
        std::thread::spawn(move || shard.append(&[Record::new(0, "first")]).wait())
    };
    gate.wait_for_sync();
    let covered: Vec<_> = (0..COVERED)
        .map(|i| {
            let shard = Arc::clone(&shard);
            std::thread::spawn(move || {
                shard
                    .append(&[Record::new(1, format!("covered {i}"))])
                    .wait()
            })
        })
        .collect();
    // Every covered batch written, and its appender registered for the next
    // sync, before the first sync completes.
    while shard.offsets().written < 1 + COVERED as u64 {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(100));
    gate.open();

    let first = first.join().unwrap().unwrap();
    assert_eq!(first.first_offset, 0);
    let errors: Vec<StorageError> = covered
        .into_iter()
        .map(|t| t.join().unwrap().unwrap_err())
        .collect();
    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    for err in &errors {
        assert!(
            matches!(err, StorageError::Segment { .. }),
            "a covered append gets the I/O error itself: {err:?}"
        );
        assert_eq!(root_os_error(err), Some(EIO));
    }
    assert!(texts.windows(2).all(|w| w[0] == w[1]), "{texts:?}");
    assert!(
        texts[0].starts_with("shard sim: fdatasync /shard/00000000000000000000.log: "),
        "{}",
        texts[0]
    );
    assert_eq!(payloads(&shard, ReadBound::Written), ["first"]);
    assert_eq!(shard.offsets().durable, 1);
    assert!(matches!(
        shard.append(&records(9, 1, 10)).wait(),
        Err(StorageError::Poisoned { .. })
    ));
}
