//! Opening a shard directory after a crash: inspect, repair what the policy
//! allows, and hand the writer what it needs to continue.

use std::path::Path;
use std::sync::Arc;

use felix_io::{FileSystem, OpenMode};
use felix_segment::{SegmentError, SegmentFile, SparseIndex};

use crate::error::RecoveryError;
use crate::inspect::{InspectOptions, Inspection, inspect_with};
use crate::repair::repair;
use crate::report::{Action, TemporaryKind};

/// What to do on open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenOptions {
    /// How to inspect.
    pub inspect: InspectOptions,
    /// Also repair damage that may be rot of an acknowledged record
    /// (checksum failures, out-of-order offsets, impossible lengths)
    /// confined to the newest segment's tail.
    pub repair_checksum_tail: bool,
    /// Trust a clean-shutdown file that lists exactly the directory's
    /// segments for the sealed ones, opening none of them (see
    /// [`write_clean_shutdown_in`](crate::write_clean_shutdown_in)). Ignored
    /// with `inspect.full_verify`.
    pub use_clean_shutdown: bool,
}

/// A sealed segment as recovery left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealedInfo {
    /// Segment id.
    pub id: u64,
    /// First offset.
    pub base_offset: u64,
    /// One past the last offset.
    pub next_offset: u64,
    /// Length in bytes.
    pub len: u64,
}

/// The newest segment, ready for a writer to continue.
#[derive(Debug)]
pub struct NewestSegment {
    /// The segment, opened read-write.
    pub file: Arc<SegmentFile>,
    /// One past its last record's offset.
    pub next_offset: u64,
    /// Where its records end (the file's length after repair).
    pub len: u64,
    /// Its index, rebuilt by the scan.
    pub index: SparseIndex,
}

/// A shard directory after recovery.
#[derive(Debug)]
pub struct RecoveredShard {
    /// Sealed segments in offset order.
    pub sealed: Vec<SealedInfo>,
    /// The newest segment, or `None` for a directory without segments.
    pub newest: Option<NewestSegment>,
    /// What was found.
    pub inspection: Inspection,
    /// What was done.
    pub actions: Vec<Action>,
}

/// Opens the shard directory `dir` for writing after a crash or a clean
/// shutdown alike.
///
/// Inspects the directory, fails with [`RecoveryError::Unrepairable`]
/// (having modified nothing) when damage is outside what `options` allow,
/// otherwise repairs, rebuilds indexes, removes a clean-shutdown file
/// (durably) and the temporaries of interrupted segment creations and clean
/// shutdowns (`{id:020}.log.tmp`, `clean-shutdown.tmp`; never another name,
/// never a directory), and returns the segments. (`epochs.tmp` is removed by
/// felix-epochs when the history is loaded.)
pub fn open_shard(
    dir: &Path,
    shard: &str,
    options: &OpenOptions,
) -> Result<RecoveredShard, RecoveryError> {
    open_shard_in(&FileSystem::os(), dir, shard, options)
}

/// [`open_shard`] on the file system `fs`.
pub fn open_shard_in(
    fs: &FileSystem,
    dir: &Path,
    shard: &str,
    options: &OpenOptions,
) -> Result<RecoveredShard, RecoveryError> {
    let mut inspection =
        inspect_with(fs, dir, shard, &options.inspect, options.use_clean_shutdown)?;
    let repaired = repair(&inspection, options.repair_checksum_tail)?;
    let actions = repaired.actions;
    inspection.notes.extend(repaired.notes);
    // The shard is about to be written: a clean-shutdown record would no
    // longer describe it. Its removal is durable before any write.
    if inspection.clean_shutdown_present {
        crate::clean::remove_in(fs, dir)?;
    }
    remove_temporaries(&inspection)?;
    let live: Vec<_> = inspection.live_segments().cloned().collect();
    let mut sealed = Vec::with_capacity(live.len());
    let mut newest = None;
    for (i, summary) in live.iter().enumerate() {
        let truncated_to = actions.iter().find_map(|a| match a {
            Action::Truncate {
                segment, to_len, ..
            } if *segment == summary.id => Some(*to_len),
            _ => None,
        });
        let len = truncated_to.unwrap_or(summary.valid_len);
        if i + 1 < live.len() {
            // Every field is known: an unknown one is a Never finding that
            // `repair` refused above.
            let (Some(base_offset), Some(next_offset)) = (summary.base_offset, summary.next_offset)
            else {
                continue;
            };
            sealed.push(SealedInfo {
                id: summary.id,
                base_offset,
                next_offset,
                len,
            });
            continue;
        }
        let (file, _) = SegmentFile::open_in(
            &inspection.fs,
            dir,
            summary.id,
            Arc::clone(&inspection.shard),
            OpenMode::ReadWrite,
        )?;
        // `inspect` scanned the segment a writer continues in full and kept
        // its rebuilt index. An index is only an accelerator, so were it
        // missing, an empty one (reads start at the first record) is correct.
        let index = inspection
            .rebuilt
            .get(&summary.id)
            .cloned()
            .unwrap_or_else(|| SparseIndex::empty(file.base_offset()));
        newest = Some(NewestSegment {
            next_offset: summary.next_offset.unwrap_or(file.base_offset()),
            len,
            index,
            file: Arc::new(file),
        });
    }
    Ok(RecoveredShard {
        sealed,
        newest,
        inspection,
        actions,
    })
}

/// Removes the temporaries the inspection found, except `epochs.tmp`, whose
/// owner removes it. A segment's holds at most a header, never a record; a
/// clean shutdown's only repeats what the segments say. Nothing needs the
/// removals to be durable: a temporary that comes back is removed again.
fn remove_temporaries(inspection: &Inspection) -> Result<(), RecoveryError> {
    for (path, kind) in &inspection.temporaries {
        if *kind == TemporaryKind::EpochsUpdate {
            continue;
        }
        match inspection.fs.remove_file(path) {
            Ok(()) => {
                tracing::info!(shard = %inspection.shard, file = %path.display(), "removed the temporary of an interrupted write");
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(SegmentError::io("remove", path, e).into()),
        }
    }
    Ok(())
}
