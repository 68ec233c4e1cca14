//! Building the disk a power loss could leave.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::{Dir, DirOp, FileOp, Inode, Pending, SimFs, State};

/// A pending (not yet durable) operation, as a crash plan refers to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingOp {
    /// What it is, e.g. `"write"`, `"set_len"`, `"link"`, `"unlink"`,
    /// `"rename"`, `"mkdir"`.
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

impl SimFs {
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
                        DirOp::MkDir { name } => ("mkdir", name),
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
        // Directories whose creation reached the disk: a durable entry in
        // the parent, or a kept pending one.
        let mut made: BTreeSet<PathBuf> = state
            .dirs
            .iter()
            .filter(|(_, d)| d.linked)
            .map(|(path, _)| path.clone())
            .collect();
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
                        DirOp::MkDir { name } => {
                            made.insert(dir.join(name));
                        }
                    }
                }
            }
        }
        let inodes = contents
            .into_iter()
            .zip(&state.inodes)
            .map(|(c, i)| Inode {
                durable: c.clone(),
                data: c,
                special: i.special,
            })
            .collect();
        // A directory survives when its own creation and every ancestor's
        // did; one that is lost takes everything in it along.
        let survives = |path: &PathBuf| {
            path.ancestors()
                .take_while(|a| state.dirs.contains_key(*a))
                .all(|a| made.contains(a))
        };
        let dirs = dirs
            .into_iter()
            .filter(|(path, _)| survives(path))
            .map(|(path, entries)| {
                (
                    path,
                    Dir {
                        durable: entries.clone(),
                        live: entries,
                        linked: true,
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
}

pub(super) fn apply_file_op(content: &mut Vec<u8>, op: &FileOp, tear: Option<Tear>) {
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
