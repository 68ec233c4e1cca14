//! The simulated file system seen through the `Vfs` and `VfsFile` traits.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::crash::apply_file_op;
use super::fault::errno_of;
use super::{Dir, DirOp, FaultEffect, FaultOp, FileOp, Inode, Pending, SimFs, not_found, split};
use crate::{DirEntry, FileType, LockGuard, NotRegularFile, OpenMode, Vfs, VfsFile};

/// The refusal of a path naming something other than a regular file.
fn not_regular(file_type: FileType) -> io::Error {
    NotRegularFile {
        file_type,
        via_symlink: false,
    }
    .into_io_error()
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
        // Once synced, what a crash keeps of the file is what a reader
        // reads now: no write of it is still pending.
        debug_assert!(
            state.inodes.get(me).is_some_and(|i| i.durable == i.data)
                && !state
                    .pending
                    .iter()
                    .any(|p| matches!(p, Pending::File { inode, .. } if *inode == me)),
            "{op} of {}: durable bytes differ from the written ones, or a write is still pending",
            self.path.display()
        );
        state.record(op, &self.path, true);
        Ok(())
    }

    fn file_op(&self, op: FileOp) {
        let mut state = self.fs.lock();
        if let Some(inode) = state.inodes.get_mut(self.inode) {
            apply_file_op(&mut inode.data, &op, None);
            // The bytes written are what a read at their position returns.
            if let FileOp::Write { position, bytes } = &op {
                let start = usize::try_from(*position).unwrap_or(usize::MAX);
                debug_assert!(
                    inode.data.get(start..start.saturating_add(bytes.len())) == Some(&bytes[..]),
                    "write of {} bytes at position {position} to {}: the file ({} bytes) does not hold them",
                    bytes.len(),
                    self.path.display(),
                    inode.data.len()
                );
            }
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
        let mut state = self.fs.lock();
        state.reads.calls += 1;
        state.reads.bytes += buf.len() as u64;
        let data = state
            .inodes
            .get(self.inode)
            .map(|i| &i.data[..])
            .unwrap_or_default();
        let start = usize::try_from(position).unwrap_or(usize::MAX);
        match data.get(start..start.saturating_add(buf.len())) {
            Some(src) => {
                // As a write's bytes: within the file, and as many as asked.
                debug_assert!(
                    src.len() == buf.len() && start + src.len() <= data.len(),
                    "read of {} bytes at position {position} from {} ({} bytes) got {}",
                    buf.len(),
                    self.path.display(),
                    data.len(),
                    src.len()
                );
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
        crate::debug_assert_write_extent("write", position, buf.len() as u64);
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
        crate::debug_assert_write_extent("set_len", 0, len);
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

impl Vfs for SimFs {
    fn open_with_len(
        &self,
        path: &Path,
        mode: OpenMode,
    ) -> io::Result<(Arc<dyn VfsFile>, Option<u64>)> {
        // The length the open saw, as the real file system gives it: the
        // sweeps then run the branch production runs.
        let file = self.open(path, mode)?;
        let len = file.file_len()?;
        Ok((file, Some(len)))
    }

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
        if state.dirs.contains_key(path) {
            return Err(if mode == OpenMode::CreateNew {
                io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists", path.display()),
                )
            } else {
                not_regular(FileType::Directory)
            });
        }
        let existing = state.lookup(path).ok();
        // Like the real file system: nothing but a regular file is opened,
        // and a link (which leads nowhere here) is missing to a reader and
        // refused to a creator.
        match (existing.and_then(|i| state.special(i)), mode) {
            (None, _) | (Some(_), OpenMode::CreateNew) => {}
            (Some(FileType::Symlink), OpenMode::Read | OpenMode::ReadWrite) => {
                return Err(not_found(path));
            }
            (Some(file_type), _) => return Err(not_regular(file_type)),
        }
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
        if state.dirs.contains_key(from) {
            if state.dirs.contains_key(to) {
                // ENOTEMPTY: the simulation renames a directory to a free name only.
                return Err(state.fail("rename", to, 39));
            }
            if state.lookup(to).is_ok() {
                // ENOTDIR
                return Err(state.fail("rename", to, 20));
            }
            state.move_tree(from, to);
            state.pending.push(Pending::Dir {
                dir: from_dir,
                op: DirOp::RenameDir {
                    from: from_name,
                    to: to_name,
                },
            });
            state.record("rename", to, true);
            return Ok(());
        }
        let inode = state.lookup(from)?;
        if state.dirs.contains_key(to) {
            return Err(state.fail("rename", to, 21));
        }
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
        if state.dirs.contains_key(path) {
            return Err(state.fail("remove", path, 21));
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

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let mut state = self.lock();
        state.power("remove_dir", path)?;
        if let Some(errno) = state.fault(FaultOp::Remove, path).and_then(errno_of) {
            return Err(state.fail("remove_dir", path, errno));
        }
        let Some(dir) = state.dirs.get(path) else {
            if state.lookup(path).is_ok() {
                // ENOTDIR
                return Err(state.fail("remove_dir", path, 20));
            }
            return Err(not_found(path));
        };
        let has_subdir = state.dirs.keys().any(|p| p.parent() == Some(path));
        if !dir.live.is_empty() || has_subdir {
            // ENOTEMPTY
            return Err(state.fail("remove_dir", path, 39));
        }
        let removed = state.dirs.remove(path).unwrap_or_default();
        // A lock on the removed directory's inode guards nothing any more;
        // a directory made under the name later is a new one.
        state.dir_locks.remove(path);
        if let Some((parent, name)) = split(path)
            .ok()
            .filter(|(parent, _)| state.dirs.contains_key(parent))
        {
            state.pending.push(Pending::Dir {
                dir: parent,
                op: DirOp::RmDir { name, removed },
            });
        }
        state.record("remove_dir", path, true);
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
        // The entries of its subdirectories are durable now too.
        for (path, child) in state.dirs.iter_mut() {
            if path.parent() == Some(dir) {
                child.linked = true;
            }
        }
        // A removal made durable takes the removed tree's pending
        // operations with it: nothing of that tree can come back.
        let removed: Vec<PathBuf> = state
            .pending
            .iter()
            .filter_map(|p| match p {
                Pending::Dir {
                    dir: pd,
                    op: DirOp::RmDir { name, .. },
                } if pd == dir => Some(pd.join(name)),
                _ => None,
            })
            .collect();
        state.pending.retain(|p| match p {
            Pending::Dir { dir: pd, .. } => pd != dir && !removed.iter().any(|r| pd.starts_with(r)),
            Pending::File { path, .. } => !removed.iter().any(|r| path.starts_with(r)),
        });
        state.record("sync_dir", dir, true);
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        let state = self.lock();
        let d = state.dirs.get(dir).ok_or_else(|| not_found(dir))?;
        let mut entries: Vec<DirEntry> = d
            .live
            .iter()
            .map(|(name, &inode)| DirEntry {
                name: name.clone(),
                file_type: state.special(inode).unwrap_or(FileType::Regular),
            })
            .collect();
        for path in state.dirs.keys() {
            if path.parent() == Some(dir)
                && let Some(name) = path.file_name()
            {
                entries.push(DirEntry {
                    name: name.to_os_string(),
                    file_type: FileType::Directory,
                });
            }
        }
        Ok(entries)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        let missing: Vec<PathBuf> = dir
            .ancestors()
            .take_while(|a| !a.as_os_str().is_empty() && !state.dirs.contains_key(*a))
            .map(Path::to_path_buf)
            .collect();
        if let Some(file) = missing.iter().find(|a| state.lookup(a).is_ok()) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a directory", file.display()),
            ));
        }
        // Outermost first, as `mkdir -p` creates them. Each new entry is
        // pending in its parent until the parent is synced; a directory
        // with no parent here has no entry to lose.
        for path in missing.into_iter().rev() {
            let parent = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty() && state.dirs.contains_key(*p))
                .map(Path::to_path_buf);
            let linked = parent.is_none();
            if let (Some(parent), Some(name)) = (parent, path.file_name()) {
                state.pending.push(Pending::Dir {
                    dir: parent,
                    op: DirOp::MkDir {
                        name: name.to_os_string(),
                    },
                });
            }
            state.dirs.insert(
                path,
                Dir {
                    linked,
                    ..Dir::default()
                },
            );
        }
        state.record("create_dir", dir, true);
        Ok(())
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.lock().dirs.contains_key(path)
    }

    fn entry_type(&self, path: &Path) -> io::Result<Option<FileType>> {
        let state = self.lock();
        if state.dirs.contains_key(path) {
            return Ok(Some(FileType::Directory));
        }
        Ok(state
            .lookup(path)
            .ok()
            .map(|inode| state.special(inode).unwrap_or(FileType::Regular)))
    }

    fn try_lock(&self, path: &Path) -> io::Result<Option<LockGuard>> {
        let mut state = self.lock();
        if state.dirs.contains_key(path) {
            return Err(not_regular(FileType::Directory));
        }
        if let Some(file_type) = state.lookup(path).ok().and_then(|i| state.special(i)) {
            return Err(not_regular(file_type));
        }
        if state.locks.contains_key(path) {
            return Ok(None);
        }
        let id = state.lock_id();
        state.locks.insert(path.to_path_buf(), id);
        Ok(Some(LockGuard::new(SimLock {
            fs: self.clone(),
            id,
            dir: false,
        })))
    }

    fn try_lock_dir(&self, dir: &Path) -> io::Result<Option<LockGuard>> {
        let mut state = self.lock();
        if !state.dirs.contains_key(dir) {
            return Err(not_found(dir));
        }
        if state.dir_locks.contains_key(dir) {
            return Ok(None);
        }
        let id = state.lock_id();
        state.dir_locks.insert(dir.to_path_buf(), id);
        Ok(Some(LockGuard::new(SimLock {
            fs: self.clone(),
            id,
            dir: true,
        })))
    }
}

/// Releases a simulated lock when dropped. It is found by id, not by
/// path: the path changes when a directory on the way is renamed.
#[derive(Debug)]
struct SimLock {
    fs: SimFs,
    id: u64,
    /// A directory's lock, not a file's.
    dir: bool,
}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut state = self.fs.lock();
        let held = if self.dir {
            &mut state.dir_locks
        } else {
            &mut state.locks
        };
        held.retain(|_, id| *id != self.id);
    }
}
