//! Carrying out an inspection's plan: the only code in this crate that
//! writes to a shard directory, and only when the caller chose to repair.

use felix_format::{FileKind, file_name};
use felix_io::{IoError, OpenMode};
use felix_segment::SegmentError;
use felix_segment::fs::{open, sync_data, sync_dir};

use crate::classify::RepairPolicy;
use crate::error::RecoveryError;
use crate::inspect::Inspection;
use crate::lock::ShardLock;
use crate::report::{Action, Note};

/// What [`repair`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Repaired {
    /// The plan's actions that were carried out, in order.
    pub actions: Vec<Action>,
    /// What was left undone without stopping the shard from opening:
    /// rebuilt indexes that could not be written ([`Note::IndexNotWritten`]).
    pub notes: Vec<Note>,
}

/// Carries out `inspection.plan`, if every finding is repairable under
/// `policy`; otherwise fails with [`RecoveryError::Unrepairable`] having
/// modified nothing.
///
/// `lock` is the shard directory's lock: a repair must not race a writer,
/// so it cannot be made without holding it.
///
/// Truncations are synced (`fdatasync`) before the directory is, and the
/// directory is synced after removals, so a crash during repair leaves a
/// directory that a second recovery finishes the same way.
///
/// A rebuilt index that cannot be written (a full disk, or its name taken
/// by something that is not a regular file) does not fail the repair: an
/// index only speeds reads up, and one that is missing or bad is rebuilt
/// when it is next needed. It is left out of the actions and reported in
/// the notes instead.
pub fn repair(
    inspection: &Inspection,
    policy: RepairPolicy,
    lock: &ShardLock,
) -> Result<Repaired, RecoveryError> {
    debug_assert_eq!(
        lock.dir(),
        inspection.dir,
        "the lock held is the inspected directory's"
    );
    let blocking = inspection.blocking(policy);
    if !blocking.is_empty() {
        return Err(RecoveryError::Unrepairable {
            dir: inspection.dir.clone(),
            blocking: blocking.into_iter().cloned().collect(),
            policy,
        });
    }
    let fs = &inspection.fs;
    let mut touched_dir = false;
    let mut repaired = Repaired::default();
    for action in &inspection.plan {
        match action {
            Action::Truncate {
                path,
                to_len,
                segment,
                from_len,
            } => {
                let file = open(fs, path, OpenMode::ReadWrite)?;
                // What stays may be only in the page cache (a process crash
                // leaves it there): make it durable first, so the length
                // change cannot reach the disk ahead of the bytes it keeps.
                sync_data(&*file, path)?;
                file.set_len(*to_len)
                    .map_err(|e| IoError::new("truncate", path, e))?;
                sync_data(&*file, path)?;
                tracing::warn!(shard = %inspection.shard, segment, from_len, to_len, "truncated damaged tail");
            }
            Action::RemoveSegment { path, segment, .. } => {
                fs.remove_file(path)
                    .map_err(|e| IoError::new("remove", path, e))?;
                let index = inspection
                    .dir
                    .join(file_name(*segment, FileKind::Index).as_str());
                match fs.remove_file(&index) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(IoError::new("remove", &index, e).into()),
                }
                touched_dir = true;
                tracing::warn!(shard = %inspection.shard, segment, "removed abandoned segment");
            }
            Action::RebuildIndex {
                segment,
                path,
                entries,
            } => {
                let Some(index) = inspection.rebuilt.get(segment) else {
                    continue;
                };
                if let Err(error) = index.write_file(fs, path) {
                    tracing::warn!(shard = %inspection.shard, segment, %error, "rebuilt index not written; it is rebuilt again when needed");
                    repaired.notes.push(index_not_written(*segment, &error));
                    continue;
                }
                touched_dir = true;
                tracing::info!(shard = %inspection.shard, segment, entries, "rebuilt index");
            }
        }
        repaired.actions.push(action.clone());
    }
    if touched_dir {
        sync_dir(fs, &inspection.dir)?;
    }
    Ok(repaired)
}

/// The note for an index of `segment` that `error` kept from being written.
pub(crate) fn index_not_written(segment: u64, error: &SegmentError) -> Note {
    let not_regular = match error {
        SegmentError::Io(err) => err.not_regular_file(),
        _ => None,
    };
    Note::IndexNotWritten {
        segment,
        kind: error.io_kind().unwrap_or(std::io::ErrorKind::Other),
        not_regular,
    }
}
