//! A simulated file system that can crash, for tests.
//!
//! [`SimFs`] keeps, for every file, the bytes that are durable and the bytes
//! that are only written, and for every directory the entries that are
//! durable and the live ones. Every operation that is not yet durable is kept
//! in order as a *pending* operation. [`SimFs::crash`] then builds the disk a
//! power loss could leave: the durable state plus any chosen subset of the
//! pending operations, with one chosen write torn at any byte, replaced by
//! zeros (its size reached the disk, its data did not), or persisted only in
//! some of its 4 KiB blocks, in any order, with the size ahead of the data.
//!
//! Faults can be injected too ([`SimFs::inject`]): the n-th matching call
//! fails with an errno, a write stops short, or a sync fails with its data
//! kept in the cache or dropped from it (as Linux does after a writeback
//! error). Every call is logged ([`SimFs::log`]) so a test can check, say,
//! that nothing was written after a failed sync.
//!
//! A directory's creation, like a file's, is durable only once its parent
//! is synced: a crash loses a directory whose entry was never synced, with
//! everything in it. Entries that are not regular files (FIFOs, sockets,
//! devices, dangling symbolic links) can be planted with
//! [`SimFs::make_node`]; like the real file system, the simulation lists
//! them with their type and never opens one.
//!
//! Directories can be renamed and removed, each durable only once its
//! parent is synced: a crash that loses a directory's rename leaves it, and
//! everything in it, under its old name; one that loses a removal leaves
//! it with the entries it had durably when removed.
//!
//! Simplifications, each on the safe side for the code under test: renames
//! are within one directory, a directory is only renamed to a free name, a
//! symbolic link leads nowhere, and file metadata other than length is not
//! modelled. A crash that loses a directory's rename or removal while a
//! directory created later holds its old name keeps the newer one.

mod crash;
mod fault;
mod vfs;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::FileType;

pub use crash::{BLOCK_BYTES, CrashPlan, PendingOp, Tear};
pub use fault::{Fault, FaultEffect, FaultOp};

/// Reads made on a simulated file system: see [`SimFs::reads`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCount {
    /// `read_exact_at` calls.
    pub calls: u64,
    /// Bytes they asked for.
    pub bytes: u64,
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
#[derive(Debug, Clone, Default)]
pub(super) struct Inode {
    durable: Vec<u8>,
    data: Vec<u8>,
    /// What a node that is not a regular file is (`None`: a regular file).
    special: Option<FileType>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Dir {
    durable: BTreeMap<OsString, usize>,
    live: BTreeMap<OsString, usize>,
    /// Whether the directory's own entry in its parent is durable (always
    /// true for a directory with no parent in the simulation).
    linked: bool,
}

#[derive(Debug, Clone)]
pub(super) enum FileOp {
    Write { position: u64, bytes: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Clone)]
pub(super) enum DirOp {
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
    /// A subdirectory was created.
    MkDir {
        name: OsString,
    },
    /// A subdirectory was renamed (its tree's paths, and every pending
    /// operation under it, already carry the new name).
    RenameDir {
        from: OsString,
        to: OsString,
    },
    /// An empty subdirectory was removed; `removed` is what it was, for a
    /// crash that loses the removal.
    RmDir {
        name: OsString,
        removed: Dir,
    },
}

#[derive(Debug, Clone)]
pub(super) enum Pending {
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
pub(super) struct State {
    /// Mutating calls left before the power goes out (`None`: never).
    power_left: Option<u64>,
    inodes: Vec<Inode>,
    dirs: BTreeMap<PathBuf, Dir>,
    pending: Vec<Pending>,
    faults: Vec<Fault>,
    log: Vec<LogEntry>,
    /// Held file locks by path, each with the id its guard releases.
    locks: BTreeMap<PathBuf, u64>,
    /// Held directory locks, likewise. A lock follows its directory through
    /// a rename, as `flock` on the directory's inode does.
    dir_locks: BTreeMap<PathBuf, u64>,
    next_lock_id: u64,
    /// Reads made and bytes they asked for (reads are not logged: a
    /// workload makes far more of them than of anything else).
    reads: ReadCount,
}

/// A simulated, crashable file system. Clones share the same disk.
#[derive(Debug, Clone, Default)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
}

pub(super) fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found in the simulated file system", path.display()),
    )
}

pub(super) fn split(path: &Path) -> io::Result<(PathBuf, OsString)> {
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

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not hide the disk from the others.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How many reads were made so far and how many bytes they asked for,
    /// so a test can check how a read path uses the disk.
    pub fn reads(&self) -> ReadCount {
        self.lock().reads
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

    /// Plants, durably, an entry at `path` that is not a regular file: a
    /// [`FileType::Fifo`], socket or device, a [`FileType::Symlink`] (one
    /// that leads nowhere), or a [`FileType::Directory`]. For tests that
    /// check such an entry is reported and never opened.
    pub fn make_node(&self, path: &Path, file_type: FileType) -> io::Result<()> {
        let mut state = self.lock();
        let (dir, name) = split(path)?;
        if state.lookup(path).is_ok() || state.dirs.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", path.display()),
            ));
        }
        if !state.dirs.contains_key(&dir) {
            return Err(not_found(&dir));
        }
        match file_type {
            FileType::Directory => {
                state.dirs.insert(
                    path.to_path_buf(),
                    Dir {
                        linked: true,
                        ..Dir::default()
                    },
                );
            }
            other => {
                let inode = state.inodes.len();
                state.inodes.push(Inode {
                    special: (other != FileType::Regular).then_some(other),
                    ..Inode::default()
                });
                if let Some(d) = state.dirs.get_mut(&dir) {
                    d.live.insert(name.clone(), inode);
                    d.durable.insert(name, inode);
                }
            }
        }
        Ok(())
    }
}
impl State {
    /// What the node `inode` is, when it is not a regular file.
    pub(super) fn special(&self, inode: usize) -> Option<FileType> {
        self.inodes.get(inode).and_then(|i| i.special)
    }

    pub(super) fn lookup(&self, path: &Path) -> io::Result<usize> {
        let (dir, name) = split(path)?;
        self.dirs
            .get(&dir)
            .and_then(|d| d.live.get(&name).copied())
            .ok_or_else(|| not_found(path))
    }

    /// Takes the first fault matching `op` on `path`, honouring `skip`.
    pub(super) fn fault(&mut self, op: FaultOp, path: &Path) -> Option<FaultEffect> {
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
    pub(super) fn power(&mut self, op: &'static str, path: &Path) -> io::Result<()> {
        match self.power_left {
            Some(0) => Err(self.fail(op, path, 5)),
            Some(ref mut left) => {
                *left -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// A fresh id for a lock guard.
    pub(super) fn lock_id(&mut self) -> u64 {
        self.next_lock_id += 1;
        self.next_lock_id
    }

    /// Moves the directory `from`, its whole tree, and everything that
    /// names a path in it (pending operations, locks) to `to`.
    pub(super) fn move_tree(&mut self, from: &Path, to: &Path) {
        let moved = |path: &Path| {
            path.strip_prefix(from).ok().map(|rest| {
                if rest.as_os_str().is_empty() {
                    to.to_path_buf()
                } else {
                    to.join(rest)
                }
            })
        };
        let keys: Vec<PathBuf> = self
            .dirs
            .keys()
            .filter(|p| p.starts_with(from))
            .cloned()
            .collect();
        for key in keys {
            if let (Some(dir), Some(new)) = (self.dirs.remove(&key), moved(&key)) {
                self.dirs.insert(new, dir);
            }
        }
        let (parent, from_name, to_name) = (from.parent(), from.file_name(), to.file_name());
        for pending in &mut self.pending {
            let path = match pending {
                Pending::File { path, .. } => path,
                // The directory's own creation, if still pending, now
                // creates it under the new name (a crash that loses the
                // rename moves it back).
                Pending::Dir {
                    dir,
                    op: DirOp::MkDir { name },
                } if Some(dir.as_path()) == parent && Some(name.as_os_str()) == from_name => {
                    if let Some(to_name) = to_name {
                        *name = to_name.to_os_string();
                    }
                    continue;
                }
                Pending::Dir { dir, .. } => dir,
            };
            if let Some(new) = moved(path) {
                *path = new;
            }
        }
        for held in [&mut self.locks, &mut self.dir_locks] {
            let keys: Vec<PathBuf> = held
                .keys()
                .filter(|p| p.starts_with(from))
                .cloned()
                .collect();
            for key in keys {
                if let (Some(id), Some(new)) = (held.remove(&key), moved(&key)) {
                    held.insert(new, id);
                }
            }
        }
    }

    pub(super) fn record(&mut self, op: &'static str, path: &Path, ok: bool) {
        self.log.push(LogEntry {
            op,
            path: path.to_path_buf(),
            ok,
        });
    }

    pub(super) fn fail(&mut self, op: &'static str, path: &Path, errno: i32) -> io::Error {
        self.record(op, path, false);
        io::Error::from_raw_os_error(errno)
    }
}
