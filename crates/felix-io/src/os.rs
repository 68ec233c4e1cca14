//! The real file system: `std::fs` plus `rustix` for `fallocate`, `flock`
//! and the open flags, with no unsafe code and no buffering.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use rustix::fs::{CWD, FallocateFlags, FlockOperation, Mode, OFlags, fallocate, flock, openat};
use rustix::path::Arg;

use crate::{
    DirEntry, FileSystem, FileType, LockGuard, NotRegularFile, OpenMode, Vfs, VfsFile,
    not_regular_file,
};

/// The operating system's file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsFs;

#[derive(Debug)]
struct OsFile(File);

/// `file` as a [`VfsFile`].
fn file(file: File) -> Arc<dyn VfsFile> {
    Arc::new(OsFile(file))
}

impl VfsFile for OsFile {
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, position)
    }

    fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        crate::debug_assert_write_extent("write", position, buf.len() as u64);
        self.0.write_all_at(buf, position)
    }

    fn file_len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        crate::debug_assert_write_extent("set_len", 0, len);
        self.0.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.0.sync_all()
    }

    fn preallocate(&self, len: u64) -> io::Result<bool> {
        match fallocate(&self.0, FallocateFlags::KEEP_SIZE, 0, len) {
            Ok(()) => Ok(true),
            // No support (EOPNOTSUPP, ENOSYS) or a file system that rejects
            // KEEP_SIZE (EINVAL): the file grows as it is written instead.
            Err(errno)
                if errno == rustix::io::Errno::OPNOTSUPP
                    || errno == rustix::io::Errno::NOSYS
                    || errno == rustix::io::Errno::INVAL =>
            {
                Ok(false)
            }
            Err(errno) => Err(errno.into()),
        }
    }
}

/// A standard library file type as a [`FileType`].
fn file_type_of(t: std::fs::FileType) -> FileType {
    FileType::from(t)
}

/// Refuses `path` unless it names a regular file (through a symbolic link
/// only when `follow`), looking without opening. `Ok(false)` when nothing
/// is there.
fn check_regular(path: &Path, follow: bool) -> io::Result<bool> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let (file_type, via_symlink) = match file_type_of(meta.file_type()) {
        FileType::Symlink if follow => match std::fs::metadata(path) {
            Ok(target) => (file_type_of(target.file_type()), true),
            // A dangling link: open reports it as missing.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        },
        other => (other, false),
    };
    if file_type == FileType::Regular {
        Ok(true)
    } else {
        Err(NotRegularFile {
            file_type,
            via_symlink,
        }
        .into_io_error())
    }
}

/// The access and creation flags of `mode`: what `std`'s `OpenOptions`
/// would ask for, so a file opened by path and one opened by name in a
/// directory held open are opened alike.
fn mode_flags(mode: OpenMode) -> OFlags {
    match mode {
        OpenMode::Read => OFlags::RDONLY,
        OpenMode::ReadWrite => OFlags::RDWR,
        OpenMode::CreateNew => OFlags::RDWR | OFlags::CREATE | OFlags::EXCL,
        OpenMode::CreateTruncate => OFlags::RDWR | OFlags::CREATE | OFlags::TRUNC,
        OpenMode::CreateOrOpen => OFlags::RDWR | OFlags::CREATE,
    }
}

/// The flags of a lock file's open: created if missing, never emptied,
/// opened for writing only (`flock` needs nothing more).
const LOCK_FILE_FLAGS: OFlags = OFlags::WRONLY.union(OFlags::CREATE);

/// Whether `mode` follows a symbolic link at the name: only the modes that
/// create nothing do.
fn follows(mode: OpenMode) -> bool {
    matches!(mode, OpenMode::Read | OpenMode::ReadWrite)
}

/// `openat(dir, name, flags | O_CLOEXEC, 0o666)`: `dir` is [`CWD`] for a
/// path opened as it is, or a directory held open for a name in it. New
/// files get `0o666` less the umask, and an open interrupted by a signal
/// (`EINTR`, which a network file system may return) is made again, as
/// `std` does.
fn open_file_at<Fd: AsFd, P: Arg + Copy>(dir: Fd, name: P, flags: OFlags) -> io::Result<File> {
    loop {
        match openat(
            &dir,
            name,
            flags | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o666),
        ) {
            Err(rustix::io::Errno::INTR) => {}
            opened => return opened.map(File::from).map_err(io::Error::from),
        }
    }
}

/// A read-only descriptor of the directory `dir` itself (following a link
/// to one, as a path through it would), for `flock` and listings.
pub(crate) fn open_directory(dir: &Path) -> io::Result<File> {
    open_file_at(CWD, dir, OFlags::RDONLY | OFlags::DIRECTORY)
}

/// Opens the regular file `name` in `dir` ([`CWD`] for a path opened as
/// it is, or a directory held open: `os_dir.rs`) with `mode`; `path` names
/// it in errors. The one open of both, with [`open_regular_by`]'s checks.
pub(crate) fn open_at<Fd: AsFd, P: Arg + Copy>(
    dir: Fd,
    name: P,
    path: &Path,
    mode: OpenMode,
) -> io::Result<(Arc<dyn VfsFile>, Option<u64>)> {
    let flags = mode_flags(mode);
    let (file, len) = open_regular_by(
        |extra| open_file_at(&dir, name, flags | extra),
        path,
        follows(mode),
        true,
    )?;
    Ok((self::file(file), Some(len)))
}

/// Locks the regular file `name` in `dir` (created if missing, never
/// followed through a link), as [`open_at`] opens one; `path` names it in
/// errors.
pub(crate) fn lock_at<Fd: AsFd, P: Arg + Copy>(
    dir: Fd,
    name: P,
    path: &Path,
) -> io::Result<Option<LockGuard>> {
    let (file, _) = open_regular_by(
        |extra| open_file_at(&dir, name, LOCK_FILE_FLAGS | extra),
        path,
        false,
        false,
    )?;
    // An advisory lock dies with its process, so a crash never leaves a
    // stale lock behind (unlike a pid file).
    lock_exclusive(file)
}

/// Opens a regular file with `open`, which adds the flags it is given to
/// its own, never blocking on a FIFO and never keeping a descriptor of
/// anything but a regular file; `path` names the file in errors and in the
/// look that says what is there when the open fails.
///
/// `O_NONBLOCK` keeps a FIFO from blocking the open, `O_NOFOLLOW` (unless
/// `follow`) refuses a link at the name itself, and one `fstat` of the
/// opened descriptor refuses anything but a regular file; only then does
/// the descriptor go back to blocking I/O. Three system calls for a file
/// that is what it should be (a look before the open, a second `fstat`
/// and a `fcntl` to read the flags made it six, most of a shard's open:
/// see docs/performance.md). When the open fails, or opens something
/// else, a look at the name says what is there, so the error names the
/// file type and whether a link led to it exactly as before.
///
/// Returns the file and its length, from that `fstat`.
///
/// `blocking: false` leaves `O_NONBLOCK` set, one system call fewer, for a
/// descriptor only ever `flock`ed (whose `LOCK_NB` says itself whether to
/// wait), never read or written.
fn open_regular_by(
    open: impl FnOnce(OFlags) -> io::Result<File>,
    path: &Path,
    follow: bool,
    blocking: bool,
) -> io::Result<(File, u64)> {
    let mut flags = OFlags::NONBLOCK;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let file = match open(flags) {
        Ok(file) => file,
        // O_NOFOLLOW met a link.
        Err(e) if !follow && e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(NotRegularFile {
                file_type: FileType::Symlink,
                via_symlink: false,
            }
            .into_io_error());
        }
        // Whatever an exclusive create finds is `AlreadyExists`.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(e),
        // A directory opened for writing (`EISDIR`), a socket (`ENXIO`):
        // say what the name holds when it is not a regular file.
        Err(e) => {
            return Err(match check_regular(path, follow) {
                Err(refused) if not_regular_file(&refused).is_some() => refused,
                _ => e,
            });
        }
    };
    let meta = file.metadata()?;
    let file_type = file_type_of(meta.file_type());
    if file_type != FileType::Regular {
        drop(file);
        return Err(match check_regular(path, follow) {
            Err(refused) if not_regular_file(&refused).is_some() => refused,
            // The name changed since the open: what the descriptor was.
            _ => NotRegularFile {
                file_type,
                via_symlink: false,
            }
            .into_io_error(),
        });
    }
    // O_NONBLOCK has no meaning for a regular file on Linux, but a file
    // system may give it one; the descriptor goes back to blocking I/O.
    // Nothing else `fcntl` can set was asked for, so no flags are read.
    if blocking {
        rustix::fs::fcntl_setfl(&file, OFlags::empty())?;
    }
    Ok((file, meta.len()))
}

impl Vfs for OsFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        Ok(self.open_with_len(path, mode)?.0)
    }

    fn open_with_len(
        &self,
        path: &Path,
        mode: OpenMode,
    ) -> io::Result<(Arc<dyn VfsFile>, Option<u64>)> {
        open_at(CWD, path, path, mode)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        std::fs::read_dir(dir)?
            .map(|entry| {
                let entry = entry?;
                // The entry's own type (`d_type`, or `lstat` where the file
                // system does not fill it in): a link is not followed.
                Ok(DirEntry {
                    name: entry.file_name(),
                    file_type: file_type_of(entry.file_type()?),
                })
            })
            .collect()
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn entry_type(&self, path: &Path) -> io::Result<Option<FileType>> {
        match std::fs::symlink_metadata(path) {
            Ok(meta) => Ok(Some(file_type_of(meta.file_type()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn try_lock(&self, path: &Path) -> io::Result<Option<LockGuard>> {
        lock_at(CWD, path, path)
    }

    fn try_lock_dir(&self, dir: &Path) -> io::Result<Option<LockGuard>> {
        // A read-only descriptor of the directory itself: `flock` locks its
        // inode, which no change to the directory's entries can replace.
        lock_exclusive(open_directory(dir)?)
    }

    fn try_lock_dir_listing(
        &self,
        dir: &Path,
    ) -> io::Result<Option<(LockGuard, io::Result<Vec<DirEntry>>)>> {
        let file = open_directory(dir)?;
        Ok(lock_then_list(&file)?.map(|listing| (LockGuard::new(file), listing)))
    }

    fn capacity_bytes(&self, dir: &Path) -> io::Result<Option<u64>> {
        let stat = rustix::fs::statvfs(dir)?;
        Ok(Some(stat.f_blocks.saturating_mul(stat.f_frsize)))
    }

    fn through_dir(&self, dir: &Path) -> Option<FileSystem> {
        crate::os_dir::OsDirFs::open(dir).ok().map(FileSystem::new)
    }
}

/// The entries of the directory open as `dir` (from its current read
/// position), as [`Vfs::list_dir`] gives them: `.` and `..` left out, each
/// entry's own type from the listing (`d_type`), or from an `lstat` of it
/// where the file system does not fill that in.
fn list_descriptor(dir: &File) -> io::Result<Vec<DirEntry>> {
    use std::os::unix::ffi::OsStringExt;

    // Room for many entries a call; one entry needs at most 280 bytes.
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut entries = Vec::new();
    let mut raw = rustix::fs::RawDir::new(dir, buf.spare_capacity_mut());
    while let Some(entry) = raw.next() {
        let entry = entry?;
        let name = entry.file_name();
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let file_type = match entry.file_type() {
            rustix::fs::FileType::Unknown => {
                let stat = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
                rustix::fs::FileType::from_raw_mode(stat.st_mode)
            }
            known => known,
        };
        entries.push(DirEntry {
            name: std::ffi::OsString::from_vec(bytes.to_vec()),
            file_type: file_type_of_raw(file_type),
        });
    }
    Ok(entries)
}

/// `flock(LOCK_EX | LOCK_NB)` on the directory open as `dir`, then, once
/// it is held, its entries read through the same descriptor (a fresh one,
/// whose reads start at the first entry); `None` when someone else holds
/// the lock. The listing's own error is apart from the lock's.
pub(crate) fn lock_then_list(dir: &File) -> io::Result<Option<io::Result<Vec<DirEntry>>>> {
    match flock(dir, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(list_descriptor(dir))),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(errno) => Err(errno.into()),
    }
}

/// A `rustix` file type as a [`FileType`].
fn file_type_of_raw(t: rustix::fs::FileType) -> FileType {
    use rustix::fs::FileType as Raw;
    match t {
        Raw::RegularFile => FileType::Regular,
        Raw::Directory => FileType::Directory,
        Raw::Symlink => FileType::Symlink,
        Raw::Fifo => FileType::Fifo,
        Raw::Socket => FileType::Socket,
        Raw::CharacterDevice => FileType::CharDevice,
        Raw::BlockDevice => FileType::BlockDevice,
        Raw::Unknown => FileType::Unknown,
    }
}

/// `flock(LOCK_EX | LOCK_NB)` on `file`, kept in the guard.
fn lock_exclusive(file: File) -> io::Result<Option<LockGuard>> {
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(LockGuard::new(file))),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(errno) => Err(errno.into()),
    }
}
