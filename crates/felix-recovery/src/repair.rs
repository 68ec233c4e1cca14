//! The only module of this crate that writes to a shard directory:
//! carrying out an inspection's plan when the caller chose to repair
//! ([`repair`]), the removals an open for writing makes (the clean-shutdown
//! file and our temporaries), and the clean-shutdown file a clean close
//! writes ([`write_clean_shutdown`]). Repairs and removals take the
//! directory's [`ShardLock`], so none can race a writer.

use std::io;
use std::path::Path;

use felix_format::clean::encode_clean_shutdown;
use felix_format::{
    CLEAN_SHUTDOWN_FILE_NAME, CLEAN_SHUTDOWN_TEMP_FILE_NAME, FileKind, SegmentExtent, file_name,
};
use felix_io::{FileSystem, FileType, IoError, OpenMode};
use felix_segment::SegmentError;
use felix_segment::fs::{open, sync_data, sync_dir};

use crate::classify::RepairPolicy;
use crate::error::RecoveryError;
use crate::inspection::{Inspection, SegmentSummary};
use crate::lock::ShardLock;
use crate::report::{Action, Note, TemporaryKind};

/// What [`repair`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Repaired {
    /// The plan's actions that were carried out, in order.
    pub actions: Vec<Action>,
    /// What was left undone without stopping the shard from opening:
    /// rebuilt indexes that could not be written ([`Note::IndexNotWritten`]).
    pub notes: Vec<Note>,
}

/// Carries out `inspection.plan` on the file system `fs`, if every finding
/// is repairable under `policy`; otherwise fails with
/// [`RecoveryError::Unrepairable`] having modified nothing.
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
    fs: &FileSystem,
    inspection: &Inspection,
    policy: RepairPolicy,
    lock: &ShardLock,
) -> Result<Repaired, RecoveryError> {
    debug_assert_eq!(
        lock.dir(),
        inspection.dir,
        "the lock held is the inspected directory's"
    );
    debug_assert!(
        only_newest_truncated(inspection),
        "a plan truncates the newest segment only: {:?}",
        inspection.plan
    );
    let blocking = inspection.blocking(policy);
    if !blocking.is_empty() {
        return Err(RecoveryError::Unrepairable {
            dir: inspection.dir.clone(),
            blocking: blocking.into_iter().cloned().collect(),
            policy,
        });
    }
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
            Action::RemoveBelowLogStart { path, segment, .. } => {
                // Indexes first: a crash before the directory's sync that
                // kept only some removals leaves, at worst, indexes below
                // every segment, which the next open removes.
                for kind in [FileKind::Index, FileKind::TimeIndex, FileKind::Segment] {
                    let file = path.with_file_name(file_name(*segment, kind).as_str());
                    match fs.remove_file(&file) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(IoError::new("remove", &file, e).into()),
                    }
                }
                // One removal durable at a time: should the log-start file
                // be lost later, what is left is still a run of segments.
                sync_dir(fs, &inspection.dir)?;
                tracing::info!(shard = %inspection.shard, segment, "removed a segment below the log start");
            }
            Action::RebuildTimeIndex { segment, path, .. } => {
                let extent = inspection
                    .segments
                    .iter()
                    .find(|s| s.id == *segment)
                    .and_then(SegmentSummary::extent);
                let (Some(index), Some(extent)) = (inspection.time_indexes.get(segment), extent)
                else {
                    continue;
                };
                // Like an index, only an accelerator: a failure is a note.
                if let Err(error) = index.write_file(fs, path, &extent) {
                    tracing::warn!(shard = %inspection.shard, segment, %error, "time index not rewritten; it is built from the records when needed");
                    repaired.notes.push(index_not_written(*segment, &error));
                    continue;
                }
                touched_dir = true;
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

/// Whether every truncation in the plan is of the newest segment: sealed
/// segments never change while their names exist (what a trusted
/// clean-shutdown record relies on).
fn only_newest_truncated(inspection: &Inspection) -> bool {
    let newest = inspection.segments.iter().find(|s| s.newest).map(|s| s.id);
    inspection.plan.iter().all(|action| match action {
        Action::Truncate { segment, .. } => Some(*segment) == newest,
        _ => true,
    })
}

/// Removes the clean-shutdown file of `dir` (a regular file, as the listing
/// found it; nothing when it is gone) and makes the removal durable: an open
/// for writing does it before any write, or, when asked to keep the file
/// ([`OpenOptions::keep_clean_shutdown`](crate::OpenOptions::keep_clean_shutdown)),
/// its caller before the set of segments or a sealed one changes — past
/// that the record would no longer describe the shard. Its temporary is
/// removed with the other temporaries.
pub fn remove_clean_shutdown(
    fs: &FileSystem,
    dir: &Path,
    lock: &ShardLock,
) -> Result<(), RecoveryError> {
    debug_assert_eq!(lock.dir(), dir, "the lock held is the directory's");
    let path = dir.join(CLEAN_SHUTDOWN_FILE_NAME);
    match fs.remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(IoError::new("remove", &path, e).into()),
    }
    fs.sync_dir(dir)
        .map_err(|e| IoError::new("fsync directory", dir, e).into())
}

/// Removes the temporaries the inspection found, except `epochs.tmp`, whose
/// owner removes it. A segment's holds at most a header, never a record; a
/// clean shutdown's only repeats what the segments say. Nothing needs the
/// removals to be durable: a temporary that comes back is removed again.
pub(crate) fn remove_temporaries(
    fs: &FileSystem,
    inspection: &Inspection,
    lock: &ShardLock,
) -> Result<(), RecoveryError> {
    debug_assert_eq!(
        lock.dir(),
        inspection.dir,
        "the lock held is the directory's"
    );
    for (path, kind) in &inspection.temporaries {
        if *kind == TemporaryKind::EpochsUpdate {
            continue;
        }
        match fs.remove_file(path) {
            Ok(()) => {
                tracing::info!(shard = %inspection.shard, file = %path.display(), "removed the temporary of an interrupted write");
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(IoError::new("remove", path, e).into()),
        }
    }
    Ok(())
}

/// Removes the index and time index files of removed segments the
/// inspection found ([`Note::IndexOfRemovedSegment`](crate::Note::IndexOfRemovedSegment)):
/// they describe no segment, and none can come to hold their ids again
/// (a new segment takes an id above every one held). Nothing needs the
/// removals to be durable: one that comes back is removed again.
pub(crate) fn remove_leftover_indexes(
    fs: &FileSystem,
    inspection: &Inspection,
    lock: &ShardLock,
) -> Result<(), RecoveryError> {
    debug_assert_eq!(
        lock.dir(),
        inspection.dir,
        "the lock held is the directory's"
    );
    for path in &inspection.leftover_indexes {
        match fs.remove_file(path) {
            Ok(()) => {
                tracing::info!(shard = %inspection.shard, file = %path.display(), "removed the index of a segment removed before a crash");
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(IoError::new("remove", path, e).into()),
        }
    }
    Ok(())
}

/// Writes the clean-shutdown file for `segments` (in id order, the active
/// one last) into `dir`: temporary, `fsync`, rename, directory `fsync`, so
/// a crash leaves either no file or a whole one.
///
/// Returns `Ok(false)`, having written nothing, when the file's name or its
/// temporary's is taken by something that is not a regular file: that is
/// not ours, so it is left alone (a rename would replace a FIFO and fail
/// on a directory), and the next open inspects every segment instead.
///
/// ```
/// use felix_format::SegmentExtent;
/// use felix_io::FileSystem;
/// use felix_format::CLEAN_SHUTDOWN_FILE_NAME;
/// use felix_recovery::write_clean_shutdown;
///
/// let dir = tempfile::tempdir()?;
/// let segments = [SegmentExtent { id: 0, base_offset: 0, next_offset: 0, len: 32 }];
/// assert!(write_clean_shutdown(&FileSystem::os(), dir.path(), &segments)?);
/// assert!(dir.path().join(CLEAN_SHUTDOWN_FILE_NAME).exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_clean_shutdown(
    fs: &FileSystem,
    dir: &Path,
    segments: &[SegmentExtent],
) -> Result<bool, RecoveryError> {
    write_record(fs, dir, segments, true)
}

/// [`write_clean_shutdown`] without its syncs, for a shard whose
/// clean-shutdown file is already in place and true but for the newest
/// segment's end (one an open kept): the record is written over the old
/// one in place when it has the same length (the same number of segments),
/// through a temporary and a rename otherwise. Nothing depends on the new
/// record reaching the disk: every segment it lists was durable before it
/// was written, so whichever record a crash leaves is true, and a torn one
/// fails its checksum and is not used. Only the quick open it buys may be
/// lost.
pub fn write_clean_shutdown_unsynced(
    fs: &FileSystem,
    dir: &Path,
    segments: &[SegmentExtent],
) -> Result<bool, RecoveryError> {
    write_record(fs, dir, segments, false)
}

fn write_record(
    fs: &FileSystem,
    dir: &Path,
    segments: &[SegmentExtent],
    sync: bool,
) -> Result<bool, RecoveryError> {
    let temp_path = dir.join(CLEAN_SHUTDOWN_TEMP_FILE_NAME);
    let path = dir.join(CLEAN_SHUTDOWN_FILE_NAME);
    let io_err =
        |op: &'static str, at: &Path, e: io::Error| RecoveryError::Io(IoError::new(op, at, e));
    // Only a regular file under either name is ours to replace: the
    // record's name is looked at first, the temporary's only when it is
    // about to be used (not for a write in place).
    let ours = |name: &Path| match fs.entry_type(name) {
        Ok(None | Some(FileType::Regular)) => Ok(true),
        Ok(Some(file_type)) => {
            tracing::warn!(path = %name.display(), %file_type, "not a regular file, left alone; no clean-shutdown file written");
            Ok(false)
        }
        Err(e) => Err(io_err("stat", name, e)),
    };
    if !ours(&path)? {
        return Ok(false);
    }
    let mut bytes = Vec::new();
    // A shard's segments always form a valid list; a refusal here is a
    // broken invariant, reported rather than written.
    encode_clean_shutdown(segments, &mut bytes)
        .map_err(|e| io_err("encode clean-shutdown", &temp_path, io::Error::other(e)))?;
    if !sync
        && let Ok((file, len)) = fs.open_with_len(&path, OpenMode::ReadWrite)
        && len
            .map_or_else(|| file.file_len(), Ok)
            .is_ok_and(|len| len == bytes.len() as u64)
    {
        // A rename over the old record would start writeback of the new
        // one at once (ext4 does, for replace-by-rename), on every close.
        file.write_all_at(&bytes, 0)
            .map_err(|e| io_err("write", &path, e))?;
        return Ok(true);
    }
    if !ours(&temp_path)? {
        return Ok(false);
    }
    let temp = fs
        .open(&temp_path, OpenMode::CreateTruncate)
        .map_err(|e| io_err("create", &temp_path, e))?;
    temp.write_all_at(&bytes, 0)
        .map_err(|e| io_err("write", &temp_path, e))?;
    // The data must be durable before the name: otherwise a crash could
    // leave the final name on a partial file (which would only be ignored,
    // but then the work of closing cleanly is lost).
    if sync {
        temp.sync_all()
            .map_err(|e| io_err("fsync", &temp_path, e))?;
    }
    drop(temp);
    fs.rename(&temp_path, &path)
        .map_err(|e| io_err("rename", &temp_path, e))?;
    if sync {
        fs.sync_dir(dir)
            .map_err(|e| io_err("fsync directory", dir, e))?;
    }
    Ok(true)
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
