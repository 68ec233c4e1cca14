//! A simulated file system that can crash, for tests.
//!
//! [`SimFs`] keeps, for every file, the bytes that are durable and the bytes
//! that are only written, and for every directory the entries that are
//! durable and the live ones. Every operation that is not yet durable is kept
//! in order as a *pending* operation. [`SimFs::crash`] then builds the disk a
//! power loss could leave: the durable state plus any chosen subset of the
//! pending operations, with one chosen write torn at any byte or replaced by
//! zeros (its size reached the disk, its data did not).
//!
//! Faults can be injected too ([`SimFs::inject`]): the n-th matching call
//! fails with an errno, a write stops short, or a sync fails with its data
//! kept in the cache or dropped from it (as Linux does after a writeback
//! error). Every call is logged ([`SimFs::log`]) so a test can check, say,
//! that nothing was written after a failed sync.
//!
//! Simplifications, each on the safe side for the code under test: directory
//! creation is durable at once (the code syncs parents anyway), renames are
//! within one directory, and file metadata other than length is not modelled.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::{DirEntry, LockGuard, OpenMode, Vfs, VfsFile};

/// The operation a fault matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultOp {
    /// A positioned write.
    Write,
    /// `sync_data` or `sync_all` of a file.
    SyncFile,
    /// `sync_dir`.
    SyncDir,
    /// `set_len`.
    SetLen,
    /// `rename`.
    Rename,
    /// `remove_file`.
    Remove,
    /// `open` in a creating mode.
    Create,
}

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultEffect {
    /// The call fails with this errno and changes nothing.
    Errno(i32),
    /// A write stores only its first `written` bytes, then fails with `errno`.
    ShortWrite {
        /// Bytes stored before the failure.
        written: usize,
        /// The errno returned.
        errno: i32,
    },
    /// A file sync fails with `errno`, and the written data stays in the
    /// cache (it may or may not reach the disk later).
    SyncFailKeep(i32),
    /// A file sync fails with `errno`, and the data it should have written
    /// is dropped: the file reads back as it was when last durable.
    SyncFailDrop(i32),
    /// A sync (of a file or a directory) reports success but makes nothing
    /// durable: a lying disk, or a sync the code forgot. Tests use it to
    /// show that a crash check notices each missing sync.
    SyncSkipped,
}

/// A fault to inject: the `(skip + 1)`-th call of `op` on a path containing
/// `path_contains` has `effect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Which operation.
    pub op: FaultOp,
    /// A substring the path must contain (empty matches every path).
    pub path_contains: String,
    /// Matching calls to let through first.
    pub skip: u32,
    /// What happens.
    pub effect: FaultEffect,
}

/// One logged call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// The operation, e.g. `"write"`, `"sync_data"`, `"sync_dir"`.
    pub op: &'static str,
    /// The path operated on.
    pub path: PathBuf,
    /// Whether it succeeded.
    pub ok: bool,
}

/// A pending (not yet durable) operation, as a crash plan refers to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingOp {
    /// What it is, e.g. `"write"`, `"set_len"`, `"link"`, `"unlink"`, `"rename"`.
    pub kind: &'static str,
    /// The file (or, for directory operations, the entry) it concerns.
    pub path: PathBuf,
    /// Bytes written, for writes.
    pub len: usize,
}

/// How a crash treats one torn write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tear {
    /// Only the first `n` bytes of the write reached the disk.
    Prefix(usize),
    /// The file's size grew to cover the write, but its bytes did not reach
    /// the disk: the range reads as zeros.
    Zeros,
}

/// Which pending operations survive a crash.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CrashPlan {
    /// `keep[i]` says whether pending operation `i` reached the disk;
    /// operations past the end of the vector are lost.
    pub keep: Vec<bool>,
    /// One kept write that reached the disk only partly.
    pub tear: Option<(usize, Tear)>,
}

impl CrashPlan {
    /// Every pending operation lost: only what was synced survives.
    pub fn durable_only() -> Self {
        Self::default()
    }

    /// Every pending operation kept, as if the cache had been flushed.
    pub fn everything(pending: usize) -> Self {
        Self {
            keep: vec![true; pending],
            tear: None,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Inode {
    durable: Vec<u8>,
    data: Vec<u8>,
}

#[derive(Debug, Clone, Default)]
struct Dir {
    durable: BTreeMap<OsString, usize>,
    live: BTreeMap<OsString, usize>,
}

#[derive(Debug, Clone)]
enum FileOp {
    Write { position: u64, bytes: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Clone)]
enum DirOp {
    Link {
        name: OsString,
        inode: usize,
    },
    Unlink {
        name: OsString,
    },
    Rename {
        from: OsString,
        to: OsString,
        inode: usize,
    },
}

#[derive(Debug, Clone)]
enum Pending {
    File {
        inode: usize,
        path: PathBuf,
        op: FileOp,
    },
    Dir {
        dir: PathBuf,
        op: DirOp,
    },
}

#[derive(Debug, Default)]
struct State {
    /// Mutating calls left before the power goes out (`None`: never).
    power_left: Option<u64>,
    inodes: Vec<Inode>,
    dirs: BTreeMap<PathBuf, Dir>,
    pending: Vec<Pending>,
    faults: Vec<Fault>,
    log: Vec<LogEntry>,
    locks: BTreeSet<PathBuf>,
}

/// A simulated, crashable file system. Clones share the same disk.
#[derive(Debug, Clone, Default)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found in the simulated file system", path.display()),
    )
}

fn split(path: &Path) -> io::Result<(PathBuf, OsString)> {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => Ok((dir.to_path_buf(), name.to_os_string())),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )),
    }
}

impl SimFs {
    /// An empty simulated file system.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not hide the disk from the others.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Cuts the power after `calls` more mutating calls (writes, length
    /// changes, syncs, creations, renames, removals): from then on every
    /// mutating call fails with `EIO` and changes nothing, while reads keep
    /// working. A crash taken afterwards shows the disk as the power cut left
    /// it, so a test can crash a workload between any two calls.
    pub fn cut_power_after(&self, calls: u64) {
        self.lock().power_left = Some(calls);
    }

    /// Mutating calls made so far (what [`SimFs::cut_power_after`] counts).
    pub fn mutating_calls(&self) -> u64 {
        self.lock().log.iter().filter(|e| e.op != "open").count() as u64
    }

    /// Adds a fault; faults are matched in the order added.
    pub fn inject(&self, fault: Fault) {
        self.lock().faults.push(fault);
    }

    /// Every call made so far, in order.
    pub fn log(&self) -> Vec<LogEntry> {
        self.lock().log.clone()
    }

    /// The operations that are not yet durable, in the order they were made.
    pub fn pending(&self) -> Vec<PendingOp> {
        self.lock()
            .pending
            .iter()
            .map(|p| match p {
                Pending::File {
                    path,
                    op: FileOp::Write { bytes, .. },
                    ..
                } => PendingOp {
                    kind: "write",
                    path: path.clone(),
                    len: bytes.len(),
                },
                Pending::File {
                    path,
                    op: FileOp::SetLen(_),
                    ..
                } => PendingOp {
                    kind: "set_len",
                    path: path.clone(),
                    len: 0,
                },
                Pending::Dir { dir, op } => {
                    let (kind, name) = match op {
                        DirOp::Link { name, .. } => ("link", name),
                        DirOp::Unlink { name } => ("unlink", name),
                        DirOp::Rename { to, .. } => ("rename", to),
                    };
                    PendingOp {
                        kind,
                        path: dir.join(name),
                        len: 0,
                    }
                }
            })
            .collect()
    }

    /// The disk a power loss would leave, following `plan`, as a new file
    /// system in which everything is durable (as after a reboot).
    pub fn crash(&self, plan: &CrashPlan) -> SimFs {
        let state = self.lock();
        let mut contents: Vec<Vec<u8>> = state.inodes.iter().map(|i| i.durable.clone()).collect();
        let mut dirs: BTreeMap<PathBuf, BTreeMap<OsString, usize>> = state
            .dirs
            .iter()
            .map(|(path, dir)| (path.clone(), dir.durable.clone()))
            .collect();
        for (i, pending) in state.pending.iter().enumerate() {
            if !plan.keep.get(i).copied().unwrap_or(false) {
                continue;
            }
            let tear = plan.tear.and_then(|(at, tear)| (at == i).then_some(tear));
            match pending {
                Pending::File { inode, op, .. } => {
                    if let Some(content) = contents.get_mut(*inode) {
                        apply_file_op(content, op, tear);
                    }
                }
                Pending::Dir { dir, op } => {
                    let entries = dirs.entry(dir.clone()).or_default();
                    match op {
                        DirOp::Link { name, inode } => {
                            entries.insert(name.clone(), *inode);
                        }
                        DirOp::Unlink { name } => {
                            entries.remove(name);
                        }
                        DirOp::Rename { from, to, inode } => {
                            entries.remove(from);
                            entries.insert(to.clone(), *inode);
                        }
                    }
                }
            }
        }
        let inodes = contents
            .into_iter()
            .map(|c| Inode {
                durable: c.clone(),
                data: c,
            })
            .collect();
        let dirs = dirs
            .into_iter()
            .map(|(path, entries)| {
                (
                    path,
                    Dir {
                        durable: entries.clone(),
                        live: entries,
                    },
                )
            })
            .collect();
        SimFs {
            state: Arc::new(Mutex::new(State {
                inodes,
                dirs,
                ..State::default()
            })),
        }
    }

    /// The current (not necessarily durable) bytes of the file at `path`.
    pub fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        let state = self.lock();
        let inode = state.lookup(path)?;
        Ok(state
            .inodes
            .get(inode)
            .map(|i| i.data.clone())
            .unwrap_or_default())
    }

    /// Replaces the bytes of the file at `path` (creating it), durably: for
    /// tests that plant damage.
    pub fn write_file(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut state = self.lock();
        let (dir, name) = split(path)?;
        let inode = match state.lookup(path) {
            Ok(inode) => inode,
            Err(_) => {
                let inode = state.inodes.len();
                state.inodes.push(Inode::default());
                let d = state.dirs.get_mut(&dir).ok_or_else(|| not_found(&dir))?;
                d.live.insert(name.clone(), inode);
                d.durable.insert(name, inode);
                inode
            }
        };
        if let Some(i) = state.inodes.get_mut(inode) {
            i.data = bytes.to_vec();
            i.durable = bytes.to_vec();
        }
        Ok(())
    }
}

fn apply_file_op(content: &mut Vec<u8>, op: &FileOp, tear: Option<Tear>) {
    match op {
        FileOp::Write { position, bytes } => {
            let start = usize::try_from(*position).unwrap_or(usize::MAX);
            let (stored, end) = match tear {
                None => (bytes.len(), start + bytes.len()),
                Some(Tear::Prefix(n)) => (n.min(bytes.len()), start + n.min(bytes.len())),
                Some(Tear::Zeros) => (0, start + bytes.len()),
            };
            if content.len() < end {
                content.resize(end, 0);
            }
            if let (Some(dst), Some(src)) =
                (content.get_mut(start..start + stored), bytes.get(..stored))
            {
                dst.copy_from_slice(src);
            }
        }
        FileOp::SetLen(len) => content.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
    }
}

impl State {
    fn lookup(&self, path: &Path) -> io::Result<usize> {
        let (dir, name) = split(path)?;
        self.dirs
            .get(&dir)
            .and_then(|d| d.live.get(&name).copied())
            .ok_or_else(|| not_found(path))
    }

    /// Takes the first fault matching `op` on `path`, honouring `skip`.
    fn fault(&mut self, op: FaultOp, path: &Path) -> Option<FaultEffect> {
        let text = path.to_string_lossy();
        let i = self
            .faults
            .iter()
            .position(|f| f.op == op && text.contains(f.path_contains.as_str()))?;
        let fault = self.faults.get_mut(i)?;
        if fault.skip > 0 {
            fault.skip -= 1;
            return None;
        }
        Some(self.faults.remove(i).effect)
    }

    /// Consumes one mutating call of the power budget; `Err(EIO)` once the
    /// power is out.
    fn power(&mut self, op: &'static str, path: &Path) -> io::Result<()> {
        match self.power_left {
            Some(0) => Err(self.fail(op, path, 5)),
            Some(ref mut left) => {
                *left -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn record(&mut self, op: &'static str, path: &Path, ok: bool) {
        self.log.push(LogEntry {
            op,
            path: path.to_path_buf(),
            ok,
        });
    }

    fn fail(&mut self, op: &'static str, path: &Path, errno: i32) -> io::Error {
        self.record(op, path, false);
        io::Error::from_raw_os_error(errno)
    }
}

#[derive(Debug)]
struct SimFile {
    fs: SimFs,
    inode: usize,
    path: PathBuf,
    writable: bool,
}

impl SimFile {
    fn writable(&self) -> io::Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(9))
        }
    }

    fn sync(&self, op: &'static str) -> io::Result<()> {
        let mut state = self.fs.lock();
        state.power(op, &self.path)?;
        match state.fault(FaultOp::SyncFile, &self.path) {
            Some(FaultEffect::SyncSkipped) => {
                state.record(op, &self.path, true);
                return Ok(());
            }
            Some(FaultEffect::SyncFailDrop(errno)) => {
                // The kernel dropped the dirty pages: the file reads back as
                // it was when last durable, and nothing pending survives.
                if let Some(inode) = state.inodes.get_mut(self.inode) {
                    inode.data = inode.durable.clone();
                }
                let me = self.inode;
                state
                    .pending
                    .retain(|p| !matches!(p, Pending::File { inode, .. } if *inode == me));
                return Err(state.fail(op, &self.path, errno));
            }
            Some(FaultEffect::SyncFailKeep(errno) | FaultEffect::Errno(errno)) => {
                return Err(state.fail(op, &self.path, errno));
            }
            Some(FaultEffect::ShortWrite { errno, .. }) => {
                return Err(state.fail(op, &self.path, errno));
            }
            None => {}
        }
        if let Some(inode) = state.inodes.get_mut(self.inode) {
            inode.durable = inode.data.clone();
        }
        let me = self.inode;
        state
            .pending
            .retain(|p| !matches!(p, Pending::File { inode, .. } if *inode == me));
        state.record(op, &self.path, true);
        Ok(())
    }

    fn file_op(&self, op: FileOp) {
        let mut state = self.fs.lock();
        if let Some(inode) = state.inodes.get_mut(self.inode) {
            apply_file_op(&mut inode.data, &op, None);
        }
        state.pending.push(Pending::File {
            inode: self.inode,
            path: self.path.clone(),
            op,
        });
    }
}

impl VfsFile for SimFile {
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        let state = self.fs.lock();
        let data = state
            .inodes
            .get(self.inode)
            .map(|i| &i.data[..])
            .unwrap_or_default();
        let start = usize::try_from(position).unwrap_or(usize::MAX);
        match data.get(start..start.saturating_add(buf.len())) {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of a simulated file",
            )),
        }
    }

    fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        self.writable()?;
        self.fs.lock().power("write", &self.path)?;
        let effect = self.fs.lock().fault(FaultOp::Write, &self.path);
        match effect {
            Some(FaultEffect::ShortWrite { written, errno }) => {
                let stored = buf.get(..written.min(buf.len())).unwrap_or_default();
                if !stored.is_empty() {
                    self.file_op(FileOp::Write {
                        position,
                        bytes: stored.to_vec(),
                    });
                }
                return Err(self.fs.lock().fail("write", &self.path, errno));
            }
            Some(
                FaultEffect::Errno(errno)
                | FaultEffect::SyncFailKeep(errno)
                | FaultEffect::SyncFailDrop(errno),
            ) => {
                return Err(self.fs.lock().fail("write", &self.path, errno));
            }
            Some(FaultEffect::SyncSkipped) | None => {}
        }
        self.file_op(FileOp::Write {
            position,
            bytes: buf.to_vec(),
        });
        self.fs.lock().record("write", &self.path, true);
        Ok(())
    }

    fn file_len(&self) -> io::Result<u64> {
        let state = self.fs.lock();
        Ok(state
            .inodes
            .get(self.inode)
            .map_or(0, |i| i.data.len() as u64))
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.writable()?;
        self.fs.lock().power("set_len", &self.path)?;
        let errno = self
            .fs
            .lock()
            .fault(FaultOp::SetLen, &self.path)
            .and_then(errno_of);
        if let Some(errno) = errno {
            return Err(self.fs.lock().fail("set_len", &self.path, errno));
        }
        self.file_op(FileOp::SetLen(len));
        self.fs.lock().record("set_len", &self.path, true);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync("sync_data")
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync("sync_all")
    }

    fn preallocate(&self, _len: u64) -> io::Result<bool> {
        Ok(false)
    }
}

/// The errno a fault returns, or `None` for one that lets the call succeed.
fn errno_of(effect: FaultEffect) -> Option<i32> {
    match effect {
        FaultEffect::Errno(e) | FaultEffect::SyncFailKeep(e) | FaultEffect::SyncFailDrop(e) => {
            Some(e)
        }
        FaultEffect::ShortWrite { errno, .. } => Some(errno),
        FaultEffect::SyncSkipped => None,
    }
}

impl Vfs for SimFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        let mut state = self.lock();
        let creating = matches!(
            mode,
            OpenMode::CreateNew | OpenMode::CreateTruncate | OpenMode::CreateOrOpen
        );
        if creating {
            state.power("create", path)?;
            if let Some(errno) = state.fault(FaultOp::Create, path).and_then(errno_of) {
                return Err(state.fail("create", path, errno));
            }
        }
        let existing = state.lookup(path).ok();
        let inode = match (existing, mode) {
            (Some(_), OpenMode::CreateNew) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists", path.display()),
                ));
            }
            (Some(inode), _) => inode,
            (None, OpenMode::Read | OpenMode::ReadWrite) => return Err(not_found(path)),
            (None, _) => {
                let (dir, name) = split(path)?;
                let inode = state.inodes.len();
                let d = state.dirs.get_mut(&dir).ok_or_else(|| not_found(&dir))?;
                d.live.insert(name.clone(), inode);
                state.inodes.push(Inode::default());
                state.pending.push(Pending::Dir {
                    dir,
                    op: DirOp::Link { name, inode },
                });
                inode
            }
        };
        state.record(if creating { "create" } else { "open" }, path, true);
        drop(state);
        let file = SimFile {
            fs: self.clone(),
            inode,
            path: path.to_path_buf(),
            writable: mode != OpenMode::Read,
        };
        if existing.is_some() && mode == OpenMode::CreateTruncate {
            file.file_op(FileOp::SetLen(0));
        }
        Ok(Arc::new(file))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.power("rename", from)?;
        if let Some(errno) = state.fault(FaultOp::Rename, from).and_then(errno_of) {
            return Err(state.fail("rename", from, errno));
        }
        let (from_dir, from_name) = split(from)?;
        let (to_dir, to_name) = split(to)?;
        if from_dir != to_dir {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the simulation renames within one directory",
            ));
        }
        let inode = state.lookup(from)?;
        let d = state
            .dirs
            .get_mut(&from_dir)
            .ok_or_else(|| not_found(&from_dir))?;
        d.live.remove(&from_name);
        d.live.insert(to_name.clone(), inode);
        state.pending.push(Pending::Dir {
            dir: from_dir,
            op: DirOp::Rename {
                from: from_name,
                to: to_name,
                inode,
            },
        });
        state.record("rename", to, true);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.power("remove", path)?;
        if let Some(errno) = state.fault(FaultOp::Remove, path).and_then(errno_of) {
            return Err(state.fail("remove", path, errno));
        }
        state.lookup(path)?;
        let (dir, name) = split(path)?;
        if let Some(d) = state.dirs.get_mut(&dir) {
            d.live.remove(&name);
        }
        state.pending.push(Pending::Dir {
            dir,
            op: DirOp::Unlink { name },
        });
        state.record("remove", path, true);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.power("sync_dir", dir)?;
        match state.fault(FaultOp::SyncDir, dir) {
            Some(FaultEffect::SyncSkipped) => {
                state.record("sync_dir", dir, true);
                return Ok(());
            }
            Some(effect) => {
                if let Some(errno) = errno_of(effect) {
                    return Err(state.fail("sync_dir", dir, errno));
                }
            }
            None => {}
        }
        let d = state.dirs.get_mut(dir).ok_or_else(|| not_found(dir))?;
        d.durable = d.live.clone();
        state
            .pending
            .retain(|p| !matches!(p, Pending::Dir { dir: pd, .. } if pd == dir));
        state.record("sync_dir", dir, true);
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        let state = self.lock();
        let d = state.dirs.get(dir).ok_or_else(|| not_found(dir))?;
        let mut entries: Vec<DirEntry> = d
            .live
            .keys()
            .map(|name| DirEntry {
                name: name.clone(),
                is_dir: false,
            })
            .collect();
        for path in state.dirs.keys() {
            if path.parent() == Some(dir)
                && let Some(name) = path.file_name()
            {
                entries.push(DirEntry {
                    name: name.to_os_string(),
                    is_dir: true,
                });
            }
        }
        Ok(entries)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        for ancestor in dir.ancestors() {
            if ancestor.as_os_str().is_empty() {
                break;
            }
            state.dirs.entry(ancestor.to_path_buf()).or_default();
        }
        state.record("create_dir", dir, true);
        Ok(())
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.lock().dirs.contains_key(path)
    }

    fn try_lock(&self, path: &Path) -> io::Result<Option<LockGuard>> {
        let mut state = self.lock();
        if !state.locks.insert(path.to_path_buf()) {
            return Ok(None);
        }
        Ok(Some(LockGuard::new(SimLock {
            fs: self.clone(),
            path: path.to_path_buf(),
        })))
    }
}

/// Releases a simulated lock when dropped.
#[derive(Debug)]
struct SimLock {
    fs: SimFs,
    path: PathBuf,
}

impl Drop for SimLock {
    fn drop(&mut self) {
        self.fs.lock().locks.remove(&self.path);
    }
}
