//! Small files a shard directory keeps beside its segments (its key, its
//! log start, a Raft log's vote): read whole and bounded, replaced
//! atomically. One implementation, so every such file gets the same
//! treatment: a reader sees the old file or the new one, never a mix, and
//! nothing but a regular file is ever opened or renamed over.

use std::io;
use std::path::{Path, PathBuf};

use crate::{FileSystem, FileType, IoError, NotRegularFile, OpenMode};

/// Why [`read_small_file`] returned no bytes.
#[derive(Debug, thiserror::Error)]
pub enum ReadSmallError {
    /// The file is longer than any valid one: it was not read.
    #[error("{} is {len} bytes, longer than the {max} any valid one has", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The largest length accepted.
        max: usize,
    },
    /// Opening (`open`), measuring (`stat`) or reading (`read`) failed; a
    /// name that is not a regular file fails at `open` (see
    /// [`IoError::not_regular_file`]).
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Reads the whole of the file at `path`: `Ok(None)` when nothing has that
/// name, [`ReadSmallError::TooLarge`] without reading a byte when it is
/// longer than `max_len`.
///
/// ```
/// use felix_io::{FileSystem, ReadSmallError, read_small_file, replace_file};
///
/// let dir = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// let path = dir.path().join("note");
/// assert!(read_small_file(&fs, &path, 8)?.is_none());
/// replace_file(&fs, dir.path(), "note", "note.tmp", b"hello")?;
/// assert_eq!(read_small_file(&fs, &path, 8)?.as_deref(), Some(&b"hello"[..]));
/// assert!(matches!(
///     read_small_file(&fs, &path, 4),
///     Err(ReadSmallError::TooLarge { len: 5, max: 4, .. })
/// ));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_small_file(
    fs: &FileSystem,
    path: &Path,
    max_len: usize,
) -> Result<Option<Vec<u8>>, ReadSmallError> {
    let (file, len) = match fs.open_with_len(path, OpenMode::Read) {
        Ok(opened) => opened,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(IoError::new("open", path, e).into()),
    };
    let len = match len {
        Some(len) => len,
        None => file.file_len().map_err(|e| IoError::new("stat", path, e))?,
    };
    let size = usize::try_from(len)
        .ok()
        .filter(|&n| n <= max_len)
        .ok_or_else(|| ReadSmallError::TooLarge {
            path: path.to_path_buf(),
            len,
            max: max_len,
        })?;
    let mut bytes = vec![0u8; size];
    file.read_exact_at(&mut bytes, 0)
        .map_err(|e| IoError::new("read", path, e))?;
    // What the reader holds is the whole file, within the bound it gave.
    debug_assert!(
        bytes.len() as u64 == len && bytes.len() <= max_len,
        "read {} bytes of {}, which is {len} bytes (at most {max_len} read)",
        bytes.len(),
        path.display()
    );
    Ok(Some(bytes))
}

/// Why [`replace_file`] did not replace the file.
#[derive(Debug, thiserror::Error)]
pub enum ReplaceError {
    /// The file's name or its temporary's is taken by something that is
    /// not a regular file: not ours, so nothing was written (a rename would
    /// replace a FIFO and fail on a directory).
    #[error("{} is {not_regular}; not replaced", path.display())]
    NotRegular {
        /// The name taken.
        path: PathBuf,
        /// What it is.
        not_regular: NotRegularFile,
    },
    /// A step failed (`stat`, `create`, `write`, `fsync`, `rename`,
    /// `fsync directory`). Before the rename the old file is in place; a
    /// temporary left behind is the caller's to remove on its next open.
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Replaces `dir/name` with `bytes`, atomically and durably: the bytes go
/// to `dir/temp_name`, which is `fsync`ed, renamed over `name`, and the
/// directory `fsync`ed. A crash at any point leaves the old file (or none)
/// or the whole new one, and the new one survives a power loss once this
/// returns.
///
/// See [`read_small_file`] for an example.
pub fn replace_file(
    fs: &FileSystem,
    dir: &Path,
    name: &str,
    temp_name: &str,
    bytes: &[u8],
) -> Result<(), ReplaceError> {
    // Two names in `dir` itself, apart: a temporary named as the file
    // would be emptied in place (no longer atomic), and a name with a
    // separator would rename across directories.
    debug_assert!(
        name != temp_name && [name, temp_name].iter().all(|n| single_name(n)),
        "replace_file of {name:?} through {temp_name:?} in {}: the file and its temporary must be two plain names",
        dir.display()
    );
    let path = dir.join(name);
    let temp_path = dir.join(temp_name);
    for at in [&path, &temp_path] {
        match fs.entry_type(at) {
            Ok(None | Some(FileType::Regular)) => {}
            Ok(Some(file_type)) => {
                return Err(ReplaceError::NotRegular {
                    path: at.clone(),
                    not_regular: NotRegularFile {
                        file_type,
                        via_symlink: false,
                    },
                });
            }
            Err(e) => return Err(IoError::new("stat", at, e).into()),
        }
    }
    let temp = fs
        .open(&temp_path, OpenMode::CreateTruncate)
        .map_err(|e| IoError::new("create", &temp_path, e))?;
    temp.write_all_at(bytes, 0)
        .map_err(|e| IoError::new("write", &temp_path, e))?;
    // The data must be durable before the name points at it: otherwise a
    // crash could leave the name on an empty or partial file.
    temp.sync_all()
        .map_err(|e| IoError::new("fsync", &temp_path, e))?;
    drop(temp);
    fs.rename(&temp_path, &path)
        .map_err(|e| IoError::new("rename", &temp_path, e))?;
    fs.sync_dir(dir)
        .map_err(|e| IoError::new("fsync directory", dir, e))?;
    Ok(())
}

/// Whether `name` is one plain file name: not empty, no separator, not
/// `.` or `..`.
fn single_name(name: &str) -> bool {
    let mut parts = Path::new(name).components();
    matches!(
        (parts.next(), parts.next()),
        (Some(std::path::Component::Normal(n)), None) if n == name
    )
}
