//! The raft-state file: read on open, replaced atomically (temporary,
//! sync, rename, directory sync: felix-io's [`replace_file`]) on every vote
//! and purge.

use std::path::Path;

use felix_format::raft_state::{
    RAFT_LOG_ENCODING, RAFT_STATE_FILE_LEN, RaftState, RaftStateDecodeError, decode_raft_state,
    encode_raft_state,
};
use felix_format::{RAFT_STATE_FILE_NAME, RAFT_STATE_TEMP_FILE_NAME};
use felix_io::{FileSystem, ReadSmallError, ReplaceError, read_small_file, replace_file};

use crate::error::RaftLogError;

/// The state recorded in `dir`, or the empty state when there is no file.
/// A file longer than the layout is not read: its length is the damage. A
/// file recording another log encoding than this release's (a version-1
/// file: openraft 0.9's postcard entries) is refused.
pub(crate) fn load(fs: &FileSystem, dir: &Path) -> Result<RaftState, RaftLogError> {
    let path = dir.join(RAFT_STATE_FILE_NAME);
    let bytes = match read_small_file(fs, &path, RAFT_STATE_FILE_LEN) {
        Ok(None) => return Ok(RaftState::default()),
        Ok(Some(bytes)) => bytes,
        Err(ReadSmallError::TooLarge { len, .. }) => {
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            let source = RaftStateDecodeError::Length { len };
            return Err(RaftLogError::RaftState { path, source });
        }
        Err(ReadSmallError::Io(e)) => return Err(e.into()),
    };
    let state = decode_raft_state(&bytes).map_err(|source| RaftLogError::RaftState {
        path: path.clone(),
        source,
    })?;
    if state.log_encoding != RAFT_LOG_ENCODING {
        return Err(RaftLogError::LogEncoding {
            path,
            found: state.log_encoding,
        });
    }
    Ok(state)
}

/// Replaces the file in `dir` with `state`, durably: when this returns the
/// state survives a power loss, and a crash before leaves the old file.
pub(crate) fn store(fs: &FileSystem, dir: &Path, state: &RaftState) -> Result<(), RaftLogError> {
    let bytes = encode_raft_state(state);
    replace_file(
        fs,
        dir,
        RAFT_STATE_FILE_NAME,
        RAFT_STATE_TEMP_FILE_NAME,
        &bytes,
    )
    .map_err(|e| match e {
        ReplaceError::Io(e) => RaftLogError::Io(e),
        ReplaceError::NotRegular { path, not_regular } => {
            RaftLogError::RaftStateNotAFile { path, not_regular }
        }
    })
}
