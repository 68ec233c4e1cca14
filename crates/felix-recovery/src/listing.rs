//! What a shard directory holds, by name: segment ids in numeric order,
//! orphan indexes, stray files, the files other layers own, and whether the
//! last segment looks like an interrupted creation.

use std::collections::BTreeSet;
use std::path::Path;

use felix_format::{FileKind, SEGMENT_HEADER_LEN, parse_file_name};
use felix_io::{FileSystem, OpenMode};
use felix_segment::SegmentError;

use crate::error::RecoveryError;

/// File names in a shard directory that are not segments, indexes or
/// strays: the generation history and its temporary, the writer's lock, and
/// the clean-shutdown file and its temporary.
pub const KNOWN_NON_SEGMENT_FILES: &[&str] = &[
    "epochs",
    "epochs.tmp",
    "lock",
    crate::clean::CLEAN_SHUTDOWN_FILE_NAME,
    crate::clean::CLEAN_SHUTDOWN_TEMP_FILE_NAME,
];

/// What a shard directory holds, by name.
pub(crate) struct Listing {
    /// Segment ids, sorted numerically (not by name: iteration order is
    /// filesystem-defined).
    pub(crate) segments: Vec<u64>,
    /// Ids of index files with no segment.
    pub(crate) orphans: Vec<u64>,
    /// Names that are neither ours nor known to other layers.
    pub(crate) strays: Vec<String>,
    /// Whether a clean-shutdown file or its temporary is present.
    pub(crate) clean_shutdown: bool,
}

pub(crate) fn list_dir(fs: &FileSystem, dir: &Path) -> Result<Listing, RecoveryError> {
    let entries = fs
        .list_dir(dir)
        .map_err(|e| RecoveryError::Io(SegmentError::io("list directory", dir, e)))?;
    let mut logs = BTreeSet::new();
    let mut indexes = BTreeSet::new();
    let mut strays = Vec::new();
    let mut clean_shutdown = false;
    for entry in entries {
        let name = entry.name.to_string_lossy();
        if name == crate::clean::CLEAN_SHUTDOWN_FILE_NAME
            || name == crate::clean::CLEAN_SHUTDOWN_TEMP_FILE_NAME
        {
            clean_shutdown = true;
        }
        match parse_file_name(&name) {
            Some((id, FileKind::Segment)) => {
                logs.insert(id);
            }
            Some((id, FileKind::Index)) => {
                indexes.insert(id);
            }
            None if KNOWN_NON_SEGMENT_FILES.contains(&&*name) => {}
            None => strays.push(name.into_owned()),
        }
    }
    strays.sort();
    let orphans = indexes.difference(&logs).copied().collect();
    Ok(Listing {
        segments: logs.into_iter().collect(),
        orphans,
        strays,
        clean_shutdown,
    })
}

/// Whether the file at `path` has the shape of an interrupted creation:
/// shorter than a header, or a header's length of zeros.
pub(crate) fn looks_abandoned(fs: &FileSystem, path: &Path) -> bool {
    match fs
        .open(path, OpenMode::Read)
        .and_then(|f| Ok((f.file_len()?, f)))
    {
        Ok((len, _)) if len < SEGMENT_HEADER_LEN as u64 => true,
        Ok((len, file)) if len == SEGMENT_HEADER_LEN as u64 => {
            let mut header = [0u8; SEGMENT_HEADER_LEN];
            // An unreadable file is not assumed to be zeros: its damage is
            // then reported, not removed.
            file.read_exact_at(&mut header, 0).is_ok() && header.iter().all(|&b| b == 0)
        }
        _ => false,
    }
}
