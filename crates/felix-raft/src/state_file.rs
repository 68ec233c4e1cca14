//! The raft-state file: read on open, replaced atomically (temporary,
//! sync, rename, directory sync) on every vote and purge.

use std::io;
use std::path::Path;

use felix_format::raft_state::{
    RAFT_STATE_FILE_LEN, RaftState, decode_raft_state, encode_raft_state,
};
use felix_format::{RAFT_STATE_FILE_NAME, RAFT_STATE_TEMP_FILE_NAME};
use felix_io::{FileSystem, IoError, OpenMode};

use crate::error::RaftLogError;

/// The state recorded in `dir`, or the empty state when there is no file.
///
/// A file of the wrong length is read whole (up to one byte more than the
/// layout) so the decoder names the damage.
pub(crate) fn load(fs: &FileSystem, dir: &Path) -> Result<RaftState, RaftLogError> {
    let path = dir.join(RAFT_STATE_FILE_NAME);
    let file = match fs.open(&path, OpenMode::Read) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(RaftState::default()),
        Err(e) => return Err(IoError::new("open", &path, e).into()),
    };
    let len = file
        .file_len()
        .map_err(|e| IoError::new("stat", &path, e))?;
    let keep = usize::try_from(len)
        .unwrap_or(usize::MAX)
        .min(RAFT_STATE_FILE_LEN + 1);
    let mut bytes = vec![0u8; keep];
    file.read_exact_at(&mut bytes, 0)
        .map_err(|e| IoError::new("read", &path, e))?;
    decode_raft_state(&bytes).map_err(|source| RaftLogError::RaftState { path, source })
}

/// Replaces the file in `dir` with `state`, durably: when this returns the
/// state survives a power loss, and a crash before leaves the old file.
pub(crate) fn store(fs: &FileSystem, dir: &Path, state: &RaftState) -> Result<(), RaftLogError> {
    let temp = dir.join(RAFT_STATE_TEMP_FILE_NAME);
    let path = dir.join(RAFT_STATE_FILE_NAME);
    let file = fs
        .open(&temp, OpenMode::CreateTruncate)
        .map_err(|e| IoError::new("create", &temp, e))?;
    file.write_all_at(&encode_raft_state(state), 0)
        .map_err(|e| IoError::new("write", &temp, e))?;
    file.sync_data()
        .map_err(|e| IoError::new("fdatasync", &temp, e))?;
    drop(file);
    fs.rename(&temp, &path)
        .map_err(|e| IoError::new("rename", &temp, e))?;
    fs.sync_dir(dir)
        .map_err(|e| IoError::new("fsync", dir, e))?;
    Ok(())
}
