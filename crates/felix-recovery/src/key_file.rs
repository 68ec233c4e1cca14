//! The `key` file: a shard directory's exact [`ShardKey`], written
//! atomically when a store creates the shard (or first opens a directory
//! that has none by a key whose directory name it is), read by the store
//! to list its keys and by an inspection to report them.
//!
//! The key file only names the shard; no record depends on it. So an
//! unusable one never stops an open: it is reported as a
//! [`Note::KeyFileUnusable`](crate::Note::KeyFileUnusable) and the shard is
//! known by its directory name alone until the file is written again.

use std::path::Path;

use felix_format::key_file::{decode_key_file, encode_key_file};
use felix_format::side_file::SideFileKind;
use felix_format::{KEY_FILE_NAME, KEY_TEMP_FILE_NAME, ShardKey};
use felix_io::{FileSystem, ReplaceError, replace_file};

use crate::error::RecoveryError;
use crate::report::SideFileProblem;
use felix_io::side_file::read_leniently;

/// What a shard directory's key file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredKey {
    /// The directory has no key file (the reference implementation writes
    /// none, and neither did felix storage before the file existed).
    Missing,
    /// The exact key.
    Key(ShardKey),
    /// A key file is there but cannot be used.
    Unusable(SideFileProblem),
}

/// Reads the key file of the shard directory `dir`. Never fails: a file
/// that cannot be used is [`StoredKey::Unusable`], saying why. Reads at
/// most [`MAX_KEY_FILE_LEN`](felix_format::key_file::MAX_KEY_FILE_LEN)
/// bytes and opens nothing but a regular file ([`crate::read_side_file`]).
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
    match read_leniently(fs, &path, SideFileKind::KeyFile, |bytes| {
        decode_key_file(bytes).map(|view| view.to_key())
    }) {
        Ok(None) => StoredKey::Missing,
        Ok(Some(key)) => StoredKey::Key(key),
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
        source: Box::new(source),
    })?;
    match replace_file(fs, dir, KEY_FILE_NAME, KEY_TEMP_FILE_NAME, &bytes) {
        Ok(()) => {}
        Err(ReplaceError::NotRegular { path, not_regular }) => {
            tracing::warn!(path = %path.display(), file_type = %not_regular.file_type, "not a regular file, left alone; no key file written");
            return Ok(false);
        }
        Err(ReplaceError::Io(e)) => return Err(RecoveryError::Io(e)),
    }
    Ok(true)
}
