//! The `raft-state` and `raft-snapshot` files a Raft log kept in the
//! shard writes (felix-raft: the vote and the last purged entry; the
//! snapshot the log is purged up to. felix-format's [`raft_state`] and
//! [`raft_snapshot`] have the bytes). No record depends on it, so an inspection only reads it to
//! say whether it is usable: a damaged one is a [`Note`], and the Raft log
//! refuses to open on it (a guessed vote could mean two votes in one term).
//!
//! [`raft_state`]: felix_format::raft_state
//! [`raft_snapshot`]: felix_format::raft_snapshot
//! [`Note`]: crate::Note

use std::path::Path;

use felix_format::raft_snapshot::decode_raft_snapshot;
use felix_format::raft_state::{RaftLogId, RaftState, decode_raft_state};
use felix_format::side_file::SideFileKind;
use felix_format::{RAFT_SNAPSHOT_FILE_NAME, RAFT_STATE_FILE_NAME};
use felix_io::FileSystem;

use crate::report::SideFileProblem;
use felix_io::side_file::read_leniently;

/// What a shard directory's raft-state file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredRaftState {
    /// There is none (the shard is not a Raft log, or holds no vote yet).
    Missing,
    /// The recorded state.
    State(RaftState),
    /// A file is there but cannot be used.
    Unusable(SideFileProblem),
}

/// Reads the raft-state file of the shard directory `dir`. Never fails: a
/// file that cannot be used is [`StoredRaftState::Unusable`], saying why.
/// Opens nothing but a regular file and reads at most the longest raft-state file's bytes.
///
/// ```
/// use felix_format::raft_state::{RaftState, encode_raft_state};
/// use felix_io::FileSystem;
/// use felix_recovery::{StoredRaftState, read_raft_state};
///
/// let dir = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// assert_eq!(read_raft_state(&fs, dir.path()), StoredRaftState::Missing);
/// let state = RaftState::default();
/// std::fs::write(dir.path().join("raft-state"), encode_raft_state(&state))?;
/// assert_eq!(read_raft_state(&fs, dir.path()), StoredRaftState::State(state));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_raft_state(fs: &FileSystem, dir: &Path) -> StoredRaftState {
    let path = dir.join(RAFT_STATE_FILE_NAME);
    match read_leniently(fs, &path, SideFileKind::RaftState, decode_raft_state) {
        Ok(None) => StoredRaftState::Missing,
        Ok(Some(state)) => StoredRaftState::State(state),
        Err(problem) => StoredRaftState::Unusable(problem),
    }
}

/// What a shard directory's raft-snapshot file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredRaftSnapshot {
    /// There is none (the Raft log was never purged, or the shard is not
    /// one).
    Missing,
    /// The id of the last entry the snapshot covers.
    Snapshot(RaftLogId),
    /// A file is there but cannot be used.
    Unusable(SideFileProblem),
}

/// Reads the raft-snapshot file of the shard directory `dir`. Never fails:
/// a file that cannot be used is [`StoredRaftSnapshot::Unusable`], saying
/// why. Opens nothing but a regular file and reads at most the longest
/// raft-snapshot file's bytes.
///
/// ```
/// use felix_format::raft_snapshot::{RaftSnapshot, encode_raft_snapshot};
/// use felix_format::raft_state::RaftLogId;
/// use felix_io::FileSystem;
/// use felix_recovery::{StoredRaftSnapshot, read_raft_snapshot};
///
/// let dir = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// assert_eq!(read_raft_snapshot(&fs, dir.path()), StoredRaftSnapshot::Missing);
/// let last = RaftLogId { term: 2, index: 99 };
/// let mut bytes = Vec::new();
/// encode_raft_snapshot(&RaftSnapshot { last, membership_id: None, membership: b"m" }, &mut bytes)?;
/// std::fs::write(dir.path().join("raft-snapshot"), bytes)?;
/// assert_eq!(read_raft_snapshot(&fs, dir.path()), StoredRaftSnapshot::Snapshot(last));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_raft_snapshot(fs: &FileSystem, dir: &Path) -> StoredRaftSnapshot {
    let path = dir.join(RAFT_SNAPSHOT_FILE_NAME);
    match read_leniently(fs, &path, SideFileKind::RaftSnapshot, |bytes| {
        decode_raft_snapshot(bytes).map(|s| s.last)
    }) {
        Ok(None) => StoredRaftSnapshot::Missing,
        Ok(Some(last)) => StoredRaftSnapshot::Snapshot(last),
        Err(problem) => StoredRaftSnapshot::Unusable(problem),
    }
}
