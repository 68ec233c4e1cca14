//! Building the disk a power loss could leave.
//!
//! File systems persist a file's data in blocks aligned to file position
//! ([`BLOCK_BYTES`]), the blocks of one write in any order, and may persist a
//! file's size before its data (space that was allocated but never written
//! reads as zeros). [`Tear`] builds each of those shapes for one write.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{Dir, DirOp, FileOp, Inode, Pending, SimFs, State};

/// The unit in which a crash persists a write's data with [`Tear::Blocks`]:
/// 4 KiB, aligned to file position, the page size file systems write back.
pub const BLOCK_BYTES: u64 = 4096;

/// A pending (not yet durable) operation, as a crash plan refers to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingOp {
    /// What it is, e.g. `"write"`, `"set_len"`, `"link"`, `"unlink"`,
    /// `"rename"`, `"mkdir"`, `"rename_dir"` (the path is the new name),
    /// `"rmdir"`.
    pub kind: &'static str,
    /// The file (or, for directory operations, the entry) it concerns.
    pub path: PathBuf,
    /// Bytes written, for writes.
    pub len: usize,
    /// File position of the first byte written, for writes (0 otherwise).
    pub position: u64,
}

impl PendingOp {
    /// How many [`BLOCK_BYTES`] blocks a write touches (0 for anything else
    /// and for an empty write): the bits a [`Tear::Blocks`] mask may set.
    ///
    /// ```
    /// use felix_io::sim::PendingOp;
    ///
    /// let write = PendingOp { kind: "write", path: "/d/a".into(), len: 100, position: 4090 };
    /// assert_eq!(write.blocks(), 2);
    /// ```
    pub fn blocks(&self) -> u32 {
        if self.kind != "write" || self.len == 0 {
            return 0;
        }
        let first = self.position / BLOCK_BYTES;
        let last = (self.position + self.len as u64 - 1) / BLOCK_BYTES;
        u32::try_from(last - first + 1).unwrap_or(u32::MAX)
    }

    /// Byte counts from the write's start to each block boundary inside it:
    /// the [`Tear::Prefix`] lengths that tear it at block granularity.
    pub fn block_boundaries(&self) -> Vec<usize> {
        if self.kind != "write" {
            return Vec::new();
        }
        let end = self.position + self.len as u64;
        let first = (self.position / BLOCK_BYTES + 1) * BLOCK_BYTES;
        (first..end)
            .step_by(BLOCK_BYTES as usize)
            .map(|b| usize::try_from(b - self.position).unwrap_or(usize::MAX))
            .collect()
    }
}

/// How a crash treats one torn write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tear {
    /// Only the first `n` bytes of the write reached the disk.
    Prefix(usize),
    /// The file's size grew to cover the write, but its bytes did not reach
    /// the disk: the range reads as zeros.
    Zeros,
    /// Only some of the [`BLOCK_BYTES`] blocks the write touches reached the
    /// disk, in any order: bit `i` is set when the `i`-th of them (counting
    /// from the block holding the write's first byte) did. The file's size
    /// covers the whole write — the size went ahead of the data — so the
    /// write's bytes in a block that did not persist read as what the disk
    /// held there before: zeros in space the write added. Blocks past the
    /// 64th never persist.
    Blocks(u64),
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
                    op: FileOp::Write { position, bytes },
                    ..
                } => PendingOp {
                    kind: "write",
                    path: path.clone(),
                    len: bytes.len(),
                    position: *position,
                },
                Pending::File {
                    path,
                    op: FileOp::SetLen(_),
                    ..
                } => PendingOp {
                    kind: "set_len",
                    path: path.clone(),
                    len: 0,
                    position: 0,
                },
                Pending::Dir { dir, op } => {
                    let (kind, name) = match op {
                        DirOp::Link { name, .. } => ("link", name),
                        DirOp::Unlink { name } => ("unlink", name),
                        DirOp::Rename { to, .. } => ("rename", to),
                        DirOp::MkDir { name } => ("mkdir", name),
                        DirOp::RenameDir { to, .. } => ("rename_dir", to),
                        DirOp::RmDir { name, .. } => ("rmdir", name),
                    };
                    PendingOp {
                        kind,
                        path: dir.join(name),
                        len: 0,
                        position: 0,
                    }
                }
            })
            .collect()
    }

    /// The disk a power loss would leave, following `plan`, as a new file
    /// system in which everything is durable (as after a reboot).
    pub fn crash(&self, plan: &CrashPlan) -> SimFs {
        let state = self.lock();
        // A plan names operations by their place in `pending()`: one that
        // names more than are pending, or tears one that is not a kept
        // write, was built for another moment (or another disk) and would
        // test a state no power loss leaves.
        debug_assert!(
            plan.keep.len() <= state.pending.len(),
            "crash plan keeps or drops {} operations, but {} are pending",
            plan.keep.len(),
            state.pending.len()
        );
        debug_assert!(
            plan.tear.is_none_or(|(at, _)| {
                plan.keep.get(at) == Some(&true)
                    && matches!(
                        state.pending.get(at),
                        Some(Pending::File {
                            op: FileOp::Write { .. },
                            ..
                        })
                    )
            }),
            "crash plan tears pending operation {:?}, which is not a kept write",
            plan.tear.map(|(at, _)| at)
        );
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
        // Directories removed since their parent was last synced come back
        // with what they held durably, unless the crash keeps the removal.
        for pending in &state.pending {
            if let Pending::Dir {
                dir,
                op: DirOp::RmDir { name, removed },
            } = pending
            {
                let path = dir.join(name);
                if dirs.contains_key(&path) {
                    continue;
                }
                if removed.linked {
                    made.insert(path.clone());
                }
                dirs.insert(path, removed.durable.clone());
            }
        }
        // Every path that is (or was) a directory, for the survival check.
        let mut known: BTreeSet<PathBuf> = dirs.keys().cloned().collect();
        // Directory renames the crash loses, undone after the operations
        // are applied (those inside a renamed tree already name its new
        // path).
        let mut lost_renames = Vec::new();
        for (i, pending) in state.pending.iter().enumerate() {
            if !plan.keep.get(i).copied().unwrap_or(false) {
                if let Pending::Dir {
                    dir,
                    op: DirOp::RenameDir { from, to },
                } = pending
                {
                    lost_renames.push((dir.join(from), dir.join(to)));
                }
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
                        DirOp::RenameDir { .. } => {}
                        DirOp::RmDir { name, .. } => {
                            let path = dir.join(name);
                            dirs.remove(&path);
                            made.remove(&path);
                        }
                    }
                }
            }
        }
        for (old, new) in lost_renames.into_iter().rev() {
            if dirs.contains_key(&old) {
                // A directory made later holds the old name: it stays.
                continue;
            }
            move_paths(&mut dirs, &new, &old);
            move_set(&mut made, &new, &old);
            move_set(&mut known, &new, &old);
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
                .take_while(|a| known.contains(*a))
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

/// `path` with its prefix `from` replaced by `to`, when it has it.
fn moved(path: &Path, from: &Path, to: &Path) -> Option<PathBuf> {
    let rest = path.strip_prefix(from).ok()?;
    Some(if rest.as_os_str().is_empty() {
        to.to_path_buf()
    } else {
        to.join(rest)
    })
}

/// Moves every key under `from` to the same place under `to`.
fn move_paths<V>(map: &mut BTreeMap<PathBuf, V>, from: &Path, to: &Path) {
    let keys: Vec<PathBuf> = map
        .keys()
        .filter(|p| p.starts_with(from))
        .cloned()
        .collect();
    for key in keys {
        if let (Some(value), Some(new)) = (map.remove(&key), moved(&key, from, to)) {
            map.insert(new, value);
        }
    }
}

/// [`move_paths`] for a set.
fn move_set(set: &mut BTreeSet<PathBuf>, from: &Path, to: &Path) {
    let keys: Vec<PathBuf> = set
        .iter()
        .filter(|p| p.starts_with(from))
        .cloned()
        .collect();
    for key in keys {
        set.remove(&key);
        if let Some(new) = moved(&key, from, to) {
            set.insert(new);
        }
    }
}

pub(super) fn apply_file_op(content: &mut Vec<u8>, op: &FileOp, tear: Option<Tear>) {
    match op {
        FileOp::Write { position, bytes } => {
            let start = usize::try_from(*position).unwrap_or(usize::MAX);
            let (stored, end) = match tear {
                None | Some(Tear::Blocks(_)) => (bytes.len(), start + bytes.len()),
                Some(Tear::Prefix(n)) => (n.min(bytes.len()), start + n.min(bytes.len())),
                Some(Tear::Zeros) => (0, start + bytes.len()),
            };
            if content.len() < end {
                content.resize(end, 0);
            }
            let block = usize::try_from(BLOCK_BYTES).unwrap_or(usize::MAX);
            // The write's bytes, split where block boundaries fall, each piece
            // with the index (from the write's first block) of its block.
            let mut at = 0;
            while at < stored {
                let file_at = start + at;
                let piece = (block - file_at % block).min(stored - at);
                let index = file_at / block - start / block;
                let persisted = match tear {
                    Some(Tear::Blocks(mask)) => index < 64 && mask >> index & 1 == 1,
                    _ => true,
                };
                if persisted
                    && let (Some(dst), Some(src)) = (
                        content.get_mut(file_at..file_at + piece),
                        bytes.get(at..at + piece),
                    )
                {
                    dst.copy_from_slice(src);
                }
                at += piece;
            }
        }
        FileOp::SetLen(len) => content.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
    }
}
