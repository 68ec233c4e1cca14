//! The one file-system interface felix storage uses.
//!
//! Every file and directory operation of `felix-segment`, `felix-recovery`,
//! `felix-epochs` and `felix-storage` goes through a [`FileSystem`]: a
//! cheaply cloned handle to a [`Vfs`]. Production uses [`FileSystem::os`]
//! (`pread`/`pwrite`, `fdatasync`, `fallocate`, `flock` on the real disk).
//! Tests use [`sim::SimFs`], which keeps for every file what is durable and
//! what is only written, and for every directory which entries are durable,
//! so a test can "cut the power" at any moment and inspect every state the
//! disk could be left in — or make any chosen call fail.
//!
//! Errors leave this crate as `io::Error`s; callers that name what they were
//! doing wrap them in an [`IoError`] (operation, path, and the `io::Error`
//! as its source), the one I/O error type every layer above reports.
//!
//! [`side_file`] is the one reader of the small checksummed side files
//! beside a shard's segments (every crate above reads them through it); it
//! decodes felix-format's shared frame, the one thing of ours this crate
//! depends on.
//!
//! The interface is deliberately small (open, read/write at a position,
//! length, sync, rename, remove a file or an empty directory, directory
//! sync, listing, locks): each operation is one a durability argument has
//! to reason about.
//!
//! Invariants this crate keeps:
//!
//! * The OS implementation adds no buffering: a successful `sync_data` means
//!   what the kernel's `fdatasync` means, and a failure is returned as is.
//! * The simulation never makes durable what the real disk would not: only
//!   `sync_data`/`sync_all` make file bytes durable, only `sync_dir` makes
//!   directory entries (a new subdirectory's among them) durable.
//! * Only regular files are ever opened: a FIFO, socket, device or
//!   directory under a name a caller opens is refused ([`NotRegularFile`])
//!   without blocking, and creating a file never follows a symbolic link.
//!
//! ```
//! use felix_io::{FileSystem, OpenMode};
//!
//! let dir = tempfile::tempdir()?;
//! let fs = FileSystem::os();
//! let file = fs.open(&dir.path().join("a"), OpenMode::CreateNew)?;
//! file.write_all_at(b"hello", 0)?;
//! file.sync_data()?;
//! fs.sync_dir(dir.path())?;
//! let mut buf = [0u8; 5];
//! fs.open(&dir.path().join("a"), OpenMode::Read)?.read_exact_at(&mut buf, 0)?;
//! assert_eq!(&buf, b"hello");
//! # Ok::<(), std::io::Error>(())
//! ```
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod error;
mod os;
mod os_dir;
pub mod side_file;
pub mod sim;
mod small_file;

use std::any::Any;
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

pub use error::IoError;
pub use os::OsFs;
pub use small_file::{ReadSmallError, ReplaceError, read_small_file, replace_file};

/// The largest file position a write may reach: the kernel's file offset
/// (`loff_t`) is signed, so no file is longer than `i64::MAX` bytes.
pub(crate) const MAX_FILE_END: u64 = i64::MAX as u64;

/// Asserts, in debug builds, what every writer keeps before it writes:
/// the `len` bytes it writes at `position` end within [`MAX_FILE_END`].
/// A position past it is a caller's arithmetic gone wrong, not something
/// on disk (writers compute positions from their own state), so it is
/// caught at the write that would fail, with the values that were asked.
pub(crate) fn debug_assert_write_extent(op: &str, position: u64, len: u64) {
    debug_assert!(
        position
            .checked_add(len)
            .is_some_and(|end| end <= MAX_FILE_END),
        "{op} of {len} bytes at position {position} ends past the largest file position {MAX_FILE_END}"
    );
}

/// How to open a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpenMode {
    /// Read only; the file must exist.
    Read,
    /// Read and write; the file must exist.
    ReadWrite,
    /// Read and write a file that must not exist yet (never overwrites).
    CreateNew,
    /// Read and write, creating the file or emptying an existing one.
    CreateTruncate,
    /// Read and write, creating the file if missing, keeping its bytes.
    CreateOrOpen,
}

/// What a directory entry is, as `lstat` sees it: a symbolic link is
/// reported as one, not as what it points to.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileType {
    /// A regular file: the only kind felix storage creates, reads or writes.
    Regular,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A named pipe: opening it for reading waits for a writer.
    Fifo,
    /// A Unix domain socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// Anything the platform reports that is none of the above.
    Unknown,
}

impl FileType {
    /// The kind in words, with its article: "a FIFO", "a directory".
    pub fn describe(self) -> &'static str {
        match self {
            Self::Regular => "a regular file",
            Self::Directory => "a directory",
            Self::Symlink => "a symbolic link",
            Self::Fifo => "a FIFO",
            Self::Socket => "a socket",
            Self::CharDevice => "a character device",
            Self::BlockDevice => "a block device",
            Self::Unknown => "a file of unknown type",
        }
    }
}

impl From<std::fs::FileType> for FileType {
    fn from(t: std::fs::FileType) -> Self {
        use std::os::unix::fs::FileTypeExt;
        if t.is_file() {
            Self::Regular
        } else if t.is_dir() {
            Self::Directory
        } else if t.is_symlink() {
            Self::Symlink
        } else if t.is_fifo() {
            Self::Fifo
        } else if t.is_socket() {
            Self::Socket
        } else if t.is_char_device() {
            Self::CharDevice
        } else if t.is_block_device() {
            Self::BlockDevice
        } else {
            Self::Unknown
        }
    }
}

impl fmt::Display for FileType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Why [`Vfs::open`] (or [`Vfs::try_lock`]) refused a path: it names
/// something other than a regular file, which is never opened, so that a
/// FIFO cannot block a reader and a device is never read as data.
///
/// Carried inside the `io::Error` the call returns; [`not_regular_file`]
/// gets it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotRegularFile {
    /// What the path names (the target, when reached through a link).
    pub file_type: FileType,
    /// Whether it was reached through a symbolic link.
    pub via_symlink: bool,
}

impl fmt::Display for NotRegularFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}, not a regular file",
            self.file_type,
            if self.via_symlink {
                " behind a symbolic link"
            } else {
                ""
            }
        )
    }
}

impl std::error::Error for NotRegularFile {}

impl NotRegularFile {
    /// The `io::Error` a refused call returns.
    pub fn into_io_error(self) -> io::Error {
        let kind = if self.file_type == FileType::Directory {
            io::ErrorKind::IsADirectory
        } else {
            io::ErrorKind::InvalidInput
        };
        io::Error::new(kind, self)
    }
}

/// The [`NotRegularFile`] inside `err`, if a call refused a path for naming
/// something other than a regular file.
///
/// ```
/// # use felix_io::{FileSystem, FileType, OpenMode, not_regular_file};
/// let dir = tempfile::tempdir()?;
/// let err = FileSystem::os().open(dir.path(), OpenMode::Read).unwrap_err();
/// assert_eq!(not_regular_file(&err).map(|n| n.file_type), Some(FileType::Directory));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn not_regular_file(err: &io::Error) -> Option<NotRegularFile> {
    err.get_ref()?.downcast_ref::<NotRegularFile>().copied()
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name.
    pub name: OsString,
    /// What the entry itself is (a symbolic link is not followed).
    pub file_type: FileType,
}

impl DirEntry {
    /// Whether the entry is a directory (not a link to one).
    pub fn is_dir(&self) -> bool {
        self.file_type == FileType::Directory
    }

    /// Whether the entry is a regular file (not a link to one).
    pub fn is_file(&self) -> bool {
        self.file_type == FileType::Regular
    }
}

/// An open file. Positioned reads and writes only, so one handle serves
/// concurrent readers without a lock or a seek.
pub trait VfsFile: Send + Sync + fmt::Debug {
    /// Reads exactly `buf.len()` bytes at `position` (`UnexpectedEof` when
    /// the file is shorter).
    fn read_exact_at(&self, buf: &mut [u8], position: u64) -> io::Result<()>;
    /// Writes all of `buf` at `position`, extending the file as needed.
    fn write_all_at(&self, buf: &[u8], position: u64) -> io::Result<()>;
    /// The file's current length.
    fn file_len(&self) -> io::Result<u64>;
    /// Truncates or extends (with zeros) the file to `len`.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes the file's data (and the size needed to read it) durable:
    /// `fdatasync`.
    fn sync_data(&self) -> io::Result<()>;
    /// Makes the file's data and metadata durable: `fsync`.
    fn sync_all(&self) -> io::Result<()>;
    /// Reserves `len` bytes of disk without changing the length; returns
    /// whether the file system supports it.
    fn preallocate(&self, len: u64) -> io::Result<bool>;
}

/// A file system: the operations storage needs, nothing more.
pub trait Vfs: Send + Sync + fmt::Debug {
    /// Opens (or creates) the regular file at `path`.
    ///
    /// Anything else there — a directory, FIFO, socket or device, or a
    /// symbolic link to one — is refused with a [`NotRegularFile`] error
    /// without being opened, so a FIFO never blocks the caller and a device
    /// is never read as data. [`OpenMode::Read`] and [`OpenMode::ReadWrite`]
    /// follow a symbolic link to a regular file; the creating modes never
    /// follow one (a link is refused as [`FileType::Symlink`]), so nothing
    /// is ever created or emptied outside the directory named.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>>;

    /// [`Vfs::open`], and the file's length when the open learnt it on the
    /// way (`None`: ask [`VfsFile::file_len`]). The real file system's open
    /// `fstat`s the descriptor to refuse anything but a regular file, and
    /// that answer holds the length: a caller that needs it at once (a
    /// small file read whole, a segment's header check) asks once, not
    /// twice. The default learns nothing.
    fn open_with_len(
        &self,
        path: &Path,
        mode: OpenMode,
    ) -> io::Result<(Arc<dyn VfsFile>, Option<u64>)> {
        Ok((self.open(path, mode)?, None))
    }
    /// Renames `from` to `to`, replacing `to` atomically if it exists.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes the file at `path`. Open handles keep working.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes the empty directory at `path` (`rmdir`): one that still
    /// holds an entry is refused (`DirectoryNotEmpty`). Like every change
    /// to a directory's entries, the removal is durable only once the
    /// parent is synced. See [`remove_dir_all`] for a whole tree.
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Lists the directory's entries (order unspecified).
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<DirEntry>>;
    /// Creates the directory and its parents; existing ones are fine. The
    /// new entries are durable only once each parent is synced.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Whether a directory exists at `path` (following a symbolic link).
    fn is_dir(&self, path: &Path) -> bool;
    /// What the entry at `path` itself is (`lstat`: a symbolic link is not
    /// followed), or `None` when nothing has that name. Opens nothing.
    fn entry_type(&self, path: &Path) -> io::Result<Option<FileType>>;
    /// Takes an exclusive advisory lock on the regular file at `path`
    /// (created if missing) without waiting; `Ok(None)` when someone else
    /// holds it. Like the creating [`OpenMode`]s it never follows a
    /// symbolic link and refuses anything but a regular file
    /// ([`NotRegularFile`]). The lock lasts as long as the returned guard.
    ///
    /// A file's lock is only as good as its name: once the file is unlinked,
    /// the next caller creates a new file and locks that. Prefer
    /// [`Vfs::try_lock_dir`].
    fn try_lock(&self, path: &Path) -> io::Result<Option<LockGuard>>;
    /// Takes an exclusive advisory lock on the directory `dir` itself
    /// without waiting; `Ok(None)` when someone else holds it. The lock is
    /// held on the directory's own inode, so removing, renaming or replacing
    /// any file inside it cannot release it, which is what makes it a
    /// writer's lock. The lock lasts as long as the returned guard.
    fn try_lock_dir(&self, dir: &Path) -> io::Result<Option<LockGuard>>;

    /// [`Vfs::try_lock_dir`], and once the lock is held the directory's
    /// entries as [`Vfs::list_dir`] gives them (the listing's own error
    /// apart from the lock's). The real file system reads them through the
    /// locked descriptor, opening the directory once rather than twice; the
    /// default locks, then lists.
    #[allow(clippy::type_complexity)]
    fn try_lock_dir_listing(
        &self,
        dir: &Path,
    ) -> io::Result<Option<(LockGuard, io::Result<Vec<DirEntry>>)>> {
        Ok(self
            .try_lock_dir(dir)?
            .map(|guard| (guard, self.list_dir(dir))))
    }
    /// The size in bytes of the file system holding `dir` (free or not):
    /// no file there can be larger. `Ok(None)` when the file system does
    /// not say, as the simulation does not.
    fn capacity_bytes(&self, dir: &Path) -> io::Result<Option<u64>> {
        let _ = dir;
        Ok(None)
    }
    /// This file system with the directory `dir` held open, for
    /// [`FileSystem::through_dir`]; `None` (the default) when it has no
    /// such thing or `dir` cannot be opened now.
    fn through_dir(&self, dir: &Path) -> Option<FileSystem> {
        let _ = dir;
        None
    }
}

/// Removes the directory `dir` and everything in it: each entry that is
/// not a directory is unlinked (a symbolic link itself, never what it
/// points to), each subdirectory removed the same way, then `dir`.
///
/// Nothing is synced: the caller syncs `dir`'s parent to make the removal
/// durable. A crash part way leaves some of the tree, so a caller that must
/// not leave half a tree under a name that means something renames it to a
/// name that does not first (as a store's delete does).
///
/// ```
/// # use felix_io::{FileSystem, OpenMode, remove_dir_all};
/// let root = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// let dir = root.path().join("doomed");
/// fs.create_dir_all(&dir.join("inner"))?;
/// fs.open(&dir.join("inner/a"), OpenMode::CreateNew)?;
/// remove_dir_all(&fs, &dir)?;
/// assert!(!dir.exists());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn remove_dir_all(fs: &FileSystem, dir: &Path) -> io::Result<()> {
    for entry in fs.list_dir(dir)? {
        let path = dir.join(&entry.name);
        let removed = if entry.is_dir() {
            remove_dir_all(fs, &path)
        } else {
            fs.remove_file(&path)
        };
        match removed {
            // Gone already (another remover got there first): what we want.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            other => other?,
        }
    }
    fs.remove_dir(dir)
}

/// Holds a lock taken with [`Vfs::try_lock`] until dropped.
pub struct LockGuard {
    _held: Box<dyn Any + Send + Sync>,
}

impl LockGuard {
    /// A guard keeping `held` (whatever releases the lock on drop) alive.
    pub fn new(held: impl Any + Send + Sync) -> Self {
        Self {
            _held: Box::new(held),
        }
    }
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LockGuard")
    }
}

/// A cheaply cloned handle to a [`Vfs`].
#[derive(Clone, Debug)]
pub struct FileSystem(Arc<dyn Vfs>);

impl FileSystem {
    /// The real file system.
    pub fn os() -> Self {
        Self(Arc::new(OsFs))
    }

    /// A handle to `vfs`.
    pub fn new(vfs: impl Vfs + 'static) -> Self {
        Self(Arc::new(vfs))
    }

    /// A handle sharing an existing `Arc`.
    pub fn from_arc(vfs: Arc<dyn Vfs>) -> Self {
        Self(vfs)
    }

    /// This file system with the directory `dir` held open while the
    /// returned handle (or a clone of it, or a file opened through it)
    /// lives: the real file system opens `dir`'s entries by name relative
    /// to one descriptor of it, so each open looks up one name instead of
    /// walking `dir`'s path again, and locks `dir` (with or without its
    /// listing, [`Vfs::try_lock_dir_listing`]) through that same
    /// descriptor the first time it is asked to. Everything else, and
    /// every other path, goes as through `self`; where the file system has
    /// nothing of the kind or `dir` cannot be opened now, the handle is
    /// `self`'s, and the calls made through it say what fails.
    ///
    /// For opens in one directory that nobody renames meanwhile (a shard's
    /// directory while its lock is held): opens reach the directory held,
    /// whatever its name has become, while renames and removals go by
    /// name. The descriptor lives as long as the handle or any file opened
    /// through it that keeps a clone (a segment file keeps the file system
    /// it was opened with); a lock taken through it shares it, so a locked
    /// shard holds no descriptor more.
    ///
    /// ```
    /// # use felix_io::{FileSystem, OpenMode};
    /// let dir = tempfile::tempdir()?;
    /// let fs = FileSystem::os();
    /// fs.open(&dir.path().join("a"), OpenMode::CreateNew)?.write_all_at(b"hi", 0)?;
    /// let held = fs.through_dir(dir.path());
    /// let (file, len) = held.open_with_len(&dir.path().join("a"), OpenMode::Read)?;
    /// assert_eq!(len, Some(2));
    /// let mut buf = [0u8; 2];
    /// file.read_exact_at(&mut buf, 0)?;
    /// assert_eq!(&buf, b"hi");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn through_dir(&self, dir: &Path) -> Self {
        self.0.through_dir(dir).unwrap_or_else(|| self.clone())
    }
}

impl Default for FileSystem {
    fn default() -> Self {
        Self::os()
    }
}

impl Deref for FileSystem {
    type Target = dyn Vfs;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}
