//! Carrying out an inspection's plan: the only code in this crate that
//! writes to a shard directory, and only when the caller chose to repair.

use felix_io::OpenMode;
use felix_segment::SegmentError;
use felix_segment::fs::{open, sync_data, sync_dir};

use crate::error::RecoveryError;
use crate::inspect::Inspection;
use crate::report::Action;

/// Carries out `inspection.plan`, if every finding is repairable under the
/// policy; otherwise fails with [`RecoveryError::Unrepairable`] having
/// modified nothing.
///
/// Truncations are synced (`fdatasync`) before the directory is, and the
/// directory is synced after removals, so a crash during repair leaves a
/// directory that a second recovery finishes the same way.
pub fn repair(
    inspection: &Inspection,
    repair_checksum_tail: bool,
) -> Result<Vec<Action>, RecoveryError> {
    let blocking = inspection.blocking(repair_checksum_tail);
    if !blocking.is_empty() {
        return Err(RecoveryError::Unrepairable {
            dir: inspection.dir.clone(),
            blocking: blocking.into_iter().cloned().collect(),
            repair_checksum_tail,
        });
    }
    let fs = &inspection.fs;
    let mut touched_dir = false;
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
                    .map_err(|e| SegmentError::io("truncate", path, e))?;
                sync_data(&*file, path)?;
                tracing::warn!(shard = %inspection.shard, segment, from_len, to_len, "truncated damaged tail");
            }
            Action::RemoveSegment { path, segment, .. } => {
                fs.remove_file(path)
                    .map_err(|e| SegmentError::io("remove", path, e))?;
                let index = path.with_extension("index");
                match fs.remove_file(&index) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(SegmentError::io("remove", &index, e).into()),
                }
                touched_dir = true;
                tracing::warn!(shard = %inspection.shard, segment, "removed abandoned segment");
            }
            Action::RebuildIndex {
                segment,
                path,
                entries,
            } => {
                if let Some(index) = inspection.rebuilt.get(segment) {
                    index.write_file_in(fs, path)?;
                    touched_dir = true;
                    tracing::info!(shard = %inspection.shard, segment, entries, "rebuilt index");
                }
            }
        }
    }
    if touched_dir {
        sync_dir(fs, &inspection.dir)?;
    }
    Ok(inspection.plan.clone())
}
