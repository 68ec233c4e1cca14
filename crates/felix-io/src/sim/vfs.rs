//! The simulated file system seen through the `Vfs` and `VfsFile` traits.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::crash::apply_file_op;
use super::fault::errno_of;
use super::{DirOp, FaultEffect, FaultOp, FileOp, Inode, Pending, SimFs, not_found, split};
use crate::{DirEntry, LockGuard, OpenMode, Vfs, VfsFile};

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
