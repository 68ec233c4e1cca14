//! The raft-snapshot file: the snapshot of a log whose state machine is
//! the stream (the last entry it covers and the membership there), read
//! with felix-io's one reader of side files and replaced atomically
//! (temporary, sync, rename, directory sync: felix-io's [`replace_file`]).

use std::path::Path;

use felix_format::raft_snapshot::{RaftSnapshot, decode_raft_snapshot, encode_raft_snapshot};
use felix_format::raft_state::RaftLogId;
use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
use felix_format::{RAFT_SNAPSHOT_FILE_NAME, RAFT_SNAPSHOT_TEMP_FILE_NAME};
use felix_io::side_file::{ReadSideFileError, read_side_file};
use felix_io::{FileSystem, ReplaceError, replace_file};
use openraft::vote::leader_id_std::CommittedLeaderId;
use openraft::{Membership, StoredMembership};

use crate::error::RaftLogError;
use crate::log_ids::{log_id, raft_log_id};

/// The snapshot's meta, as openraft's (node ids `u64`, one leader per
/// term).
pub(crate) type Meta<N> = openraft::storage::SnapshotMeta<CommittedLeaderId<u64>, u64, N>;

/// What a recorded snapshot holds before its membership is decoded: the
/// last entry, the membership's entry, and the membership's bytes.
type Recorded = (RaftLogId, Option<RaftLogId>, Vec<u8>);

/// Reads the file in `dir` and checks its frame (not the membership inside
/// it): `None` when there is no file. An open checks this much, so a
/// damaged file stops the log opening as a damaged raft-state file does.
pub(crate) fn read(fs: &FileSystem, dir: &Path) -> Result<Option<Recorded>, RaftLogError> {
    let path = dir.join(RAFT_SNAPSHOT_FILE_NAME);
    let decoded = read_side_file(fs, &path, SideFileKind::RaftSnapshot, |bytes| {
        decode_raft_snapshot(bytes).map(|s| (s.last, s.membership_id, s.membership.to_vec()))
    });
    match decoded {
        Ok(recorded) => Ok(recorded),
        Err(ReadSideFileError::TooLarge { len, .. }) => {
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            let source =
                SideFileError::new(SideFileKind::RaftSnapshot, SideFileDefect::Length { len });
            Err(RaftLogError::RaftSnapshot { path, source })
        }
        Err(ReadSideFileError::Invalid { source, .. }) => {
            Err(RaftLogError::RaftSnapshot { path, source })
        }
        Err(ReadSideFileError::Io(e)) => Err(e.into()),
    }
}

/// The snapshot recorded in `dir`, or `None` when there is no file.
pub(crate) fn load<N>(fs: &FileSystem, dir: &Path) -> Result<Option<Meta<N>>, RaftLogError>
where
    N: openraft::Node,
{
    let Some((last, membership_id, body)) = read(fs, dir)? else {
        return Ok(None);
    };
    let membership: Membership<u64, N> =
        postcard::from_bytes(&body).map_err(|source| RaftLogError::SnapshotMembership {
            path: dir.join(RAFT_SNAPSHOT_FILE_NAME),
            source,
        })?;
    Ok(Some(Meta {
        last_log_id: Some(log_id(last)),
        last_membership: StoredMembership::new(membership_id.map(log_id), membership),
    }))
}

/// Replaces the file in `dir` with `meta`, durably: when this returns the
/// snapshot survives a power loss, and a crash before leaves the old file.
/// A meta that covers no entry is not recorded.
pub(crate) fn store<N>(fs: &FileSystem, dir: &Path, meta: &Meta<N>) -> Result<(), RaftLogError>
where
    N: openraft::Node,
{
    let Some(last) = meta.last_log_id else {
        return Ok(());
    };
    let membership_id = meta.last_membership.log_id().map(|id| raft_log_id(&id));
    let body = postcard::to_allocvec(meta.last_membership.membership()).map_err(|source| {
        RaftLogError::Encode {
            index: membership_id.map_or(0, |id| id.index),
            source,
        }
    })?;
    let snapshot = RaftSnapshot {
        last: raft_log_id(&last),
        membership_id,
        membership: &body,
    };
    let path = dir.join(RAFT_SNAPSHOT_FILE_NAME);
    let mut bytes =
        Vec::with_capacity(felix_format::raft_snapshot::RAFT_SNAPSHOT_HEADER_LEN + body.len());
    encode_raft_snapshot(&snapshot, &mut bytes)
        .map_err(|source| RaftLogError::RaftSnapshot { path, source })?;
    replace_file(
        fs,
        dir,
        RAFT_SNAPSHOT_FILE_NAME,
        RAFT_SNAPSHOT_TEMP_FILE_NAME,
        &bytes,
    )
    .map_err(|e| match e {
        ReplaceError::Io(e) => RaftLogError::Io(e),
        ReplaceError::NotRegular { path, not_regular } => {
            RaftLogError::RaftSnapshotNotAFile { path, not_regular }
        }
    })
}
