//! The `key` file: a shard directory's exact [`ShardKey`], written
//! atomically when a store creates the shard (or first opens a directory
//! that has none by a key whose directory name it is), read by the store
//! to list its keys and by an inspection to report them.
//!
//! The key file only names the shard; no record depends on it. So an
//! unusable one never stops an open: it is reported as a
//! [`Note::KeyFileUnusable`](crate::Note::KeyFileUnusable) and the shard is
//! known by its directory name alone until the file is written again.

use std::io;
use std::path::Path;

use felix_format::key_file::{MAX_KEY_FILE_LEN, decode_key_file, encode_key_file};
use felix_format::{KEY_FILE_NAME, KEY_TEMP_FILE_NAME, ShardKey};
use felix_io::{FileSystem, FileType, IoError, OpenMode, not_regular_file};

use crate::error::RecoveryError;
use crate::report::KeyFileProblem;

/// What a shard directory's key file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredKey {
    /// The directory has no key file (the reference implementation writes
    /// none, and neither did felix storage before the file existed).
    Missing,
    /// The exact key.
    Key(ShardKey),
    /// A key file is there but cannot be used.
    Unusable(KeyFileProblem),
}

/// Reads the key file of the shard directory `dir`. Never fails: a file
/// that cannot be used is [`StoredKey::Unusable`], saying why. Reads at
/// most [`MAX_KEY_FILE_LEN`] bytes and opens nothing but a regular file.
///
/// ```
/// use felix_format::ShardKey;
/// use felix_io::FileSystem;
/// use felix_recovery::{StoredKey, read_key_file, write_key_file};
///
/// let dir = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// assert_eq!(read_key_file(&fs, dir.path()), StoredKey::Missing);
/// let key = ShardKey::new("acme", "default", "orders", 0);
/// assert!(write_key_file(&fs, dir.path(), &key)?);
/// assert_eq!(read_key_file(&fs, dir.path()), StoredKey::Key(key));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_key_file(fs: &FileSystem, dir: &Path) -> StoredKey {
    let path = dir.join(KEY_FILE_NAME);
    let unreadable = |op, e: &io::Error| match not_regular_file(e) {
        Some(what) => KeyFileProblem::NotAFile(what),
        None => KeyFileProblem::Unreadable { op, kind: e.kind() },
    };
    let file = match fs.open(&path, OpenMode::Read) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return StoredKey::Missing,
        Err(e) => return StoredKey::Unusable(unreadable("open", &e)),
    };
    let read = || -> Result<ShardKey, KeyFileProblem> {
        let len = file.file_len().map_err(|e| unreadable("stat", &e))?;
        let size = usize::try_from(len)
            .ok()
            .filter(|&n| n <= MAX_KEY_FILE_LEN)
            .ok_or(KeyFileProblem::TooLarge { len })?;
        let mut bytes = vec![0u8; size];
        file.read_exact_at(&mut bytes, 0)
            .map_err(|e| unreadable("read", &e))?;
        decode_key_file(&bytes)
            .map(|view| view.to_key())
            .map_err(KeyFileProblem::Invalid)
    };
    match read() {
        Ok(key) => StoredKey::Key(key),
        Err(problem) => StoredKey::Unusable(problem),
    }
}

/// Writes `key` as the key file of the shard directory `dir`: temporary,
/// `fsync`, rename over any old file, directory `fsync`, so a crash leaves
/// the old file (or none) or the whole new one.
///
/// Returns `Ok(false)`, having written nothing, when the file's name or its
/// temporary's is taken by something that is not a regular file: that is
/// not ours, so it is left alone (a rename would replace a FIFO and fail on
/// a directory), and the shard stays known by its directory name. Fails
/// with [`RecoveryError::KeyTooLong`], having written nothing, when a part
/// of the key is longer than the format holds.
pub fn write_key_file(fs: &FileSystem, dir: &Path, key: &ShardKey) -> Result<bool, RecoveryError> {
    let mut bytes = Vec::new();
    encode_key_file(key, &mut bytes).map_err(|source| RecoveryError::KeyTooLong {
        key: key.clone(),
        source,
    })?;
    let temp_path = dir.join(KEY_TEMP_FILE_NAME);
    let path = dir.join(KEY_FILE_NAME);
    let io_err =
        |op: &'static str, at: &Path, e: io::Error| RecoveryError::Io(IoError::new(op, at, e));
    for name in [&path, &temp_path] {
        match fs.entry_type(name) {
            Ok(None | Some(FileType::Regular)) => {}
            Ok(Some(file_type)) => {
                tracing::warn!(path = %name.display(), %file_type, "not a regular file, left alone; no key file written");
                return Ok(false);
            }
            Err(e) => return Err(io_err("stat", name, e)),
        }
    }
    let temp = fs
        .open(&temp_path, OpenMode::CreateTruncate)
        .map_err(|e| io_err("create", &temp_path, e))?;
    temp.write_all_at(&bytes, 0)
        .map_err(|e| io_err("write", &temp_path, e))?;
    // The data must be durable before the name points at it: a crash must
    // never leave `key` naming a partial file.
    temp.sync_all()
        .map_err(|e| io_err("fsync", &temp_path, e))?;
    drop(temp);
    fs.rename(&temp_path, &path)
        .map_err(|e| io_err("rename", &temp_path, e))?;
    fs.sync_dir(dir)
        .map_err(|e| io_err("fsync directory", dir, e))?;
    Ok(true)
}
