//! The raft-state file: read on open (with felix-io's one reader of
//! side files, [`read_side_file`]), replaced atomically (temporary,
//! sync, rename, directory sync: felix-io's [`replace_file`]) on every vote
//! and purge.

use std::path::Path;

use felix_format::raft_state::{
    RAFT_LOG_ENCODING, RaftState, decode_raft_state, encode_raft_state,
};
use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
use felix_format::{RAFT_STATE_FILE_NAME, RAFT_STATE_TEMP_FILE_NAME};
use felix_io::side_file::{ReadSideFileError, read_side_file};
use felix_io::{FileSystem, ReplaceError, replace_file};

use crate::error::RaftLogError;

/// The state recorded in `dir`, or the empty state when there is no file.
/// A file longer than the layout is not read: its length is the damage. A
/// file recording another log encoding than this release's (a version-1
/// file: openraft 0.9's postcard entries) is refused.
pub(crate) fn load(fs: &FileSystem, dir: &Path) -> Result<RaftState, RaftLogError> {
    let path = dir.join(RAFT_STATE_FILE_NAME);
    let state = match read_side_file(fs, &path, SideFileKind::RaftState, decode_raft_state) {
        Ok(None) => return Ok(RaftState::default()),
        Ok(Some(state)) => state,
        Err(ReadSideFileError::TooLarge { len, .. }) => {
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            let source =
                SideFileError::new(SideFileKind::RaftState, SideFileDefect::Length { len });
            return Err(RaftLogError::RaftState { path, source });
        }
        Err(ReadSideFileError::Invalid { source, .. }) => {
            return Err(RaftLogError::RaftState { path, source });
        }
        Err(ReadSideFileError::Io(e)) => return Err(e.into()),
    };
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
