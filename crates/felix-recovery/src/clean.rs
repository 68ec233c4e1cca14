//! The clean-shutdown file: written when a shard is closed cleanly
//! ([`crate::write_clean_shutdown`]), trusted by the next open instead of
//! opening every sealed segment, and removed by that open before anything
//! is written. This module reads it and decides whether it can be trusted;
//! writing and removing it are [`crate::repair`]'s.
//!
//! Why trusting it is safe: sealed segment files never change while their
//! names exist (a segment is sealed durably before the next one is created;
//! retention and truncation remove whole files; repair only ever touches
//! the newest segment), and segment ids only grow. So if the directory
//! holds exactly the segment files the record lists, the sealed ones are
//! the files it describes — however stale the record — and the newest one
//! is scanned in full as after any crash. Any other listing, and any record
//! that does not decode, falls back to inspecting every segment.

use std::path::Path;

use felix_format::CLEAN_SHUTDOWN_FILE_NAME;
use felix_format::SegmentExtent;
use felix_format::clean::decode_clean_shutdown;
use felix_format::side_file::SideFileKind;
use felix_io::FileSystem;

use felix_io::side_file::read_leniently;

use crate::inspection::{IndexCheck, InspectOptions};
use crate::report::{CleanShutdownUnused, Note};

/// Reads the clean-shutdown file of `dir`: `None` when there is none.
fn load(fs: &FileSystem, dir: &Path) -> Option<Result<Vec<SegmentExtent>, CleanShutdownUnused>> {
    let path = dir.join(CLEAN_SHUTDOWN_FILE_NAME);
    read_leniently(
        fs,
        &path,
        SideFileKind::CleanShutdown,
        decode_clean_shutdown,
    )
    .map_err(CleanShutdownUnused::Unusable)
    .transpose()
}

/// The clean-shutdown record's segments when it can be trusted for a
/// directory holding the segments `ids`, and the note saying whether it was
/// used (and why not) — none when the file is gone.
pub(crate) fn trusted_sealed(
    fs: &FileSystem,
    dir: &Path,
    ids: &[u64],
    options: &InspectOptions,
) -> (Option<Vec<SegmentExtent>>, Option<Note>) {
    let unused = |reason| (None, Some(Note::CleanShutdownUnused { reason }));
    if options.full_verify {
        return unused(CleanShutdownUnused::FullVerify);
    }
    if options.index_check == IndexCheck::EveryEntry {
        return unused(CleanShutdownUnused::EveryIndexEntry);
    }
    match load(fs, dir) {
        // Listed by the directory a moment ago, gone since: as if there
        // had been none.
        None => (None, None),
        Some(Ok(listed)) if listed.iter().map(|s| s.id).eq(ids.iter().copied()) => {
            let note = Note::CleanShutdownUsed {
                sealed: listed.len().saturating_sub(1),
            };
            (Some(listed), Some(note))
        }
        Some(Ok(listed)) => unused(CleanShutdownUnused::Stale {
            listed: listed.len(),
            found: ids.len(),
        }),
        Some(Err(reason)) => unused(reason),
    }
}
