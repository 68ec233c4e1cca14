//! What a shard directory holds, by name: segment ids in numeric order,
//! orphan indexes, stray files, our temporaries, the files other layers
//! own, and entries under our names that are not regular files. Nothing
//! is opened: this is the first step of the pipeline, and only reads the
//! directory itself. Every name is
//! classified by felix-format's [`ShardFileName::parse`], the one place a
//! shard directory's names are defined.
//!
//! Every file felix storage writes is a regular file, so an entry under one
//! of our names that is anything else (a directory, FIFO, socket or device)
//! is not ours: it is never opened — a FIFO would block the reader — and is
//! left alone, except that one named like a segment stops the inspection,
//! since the records the name claims cannot be read.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use felix_format::ShardFileName;
use felix_io::{DirEntry, FileSystem, FileType, IoError, NotRegularFile};

use crate::error::RecoveryError;
use crate::report::{Note, TemporaryKind};

/// What a shard directory holds, by name.
#[derive(Debug)]
pub(crate) struct Listing {
    /// Segment ids, sorted numerically (not by name: iteration order is
    /// filesystem-defined).
    pub(crate) segments: Vec<u64>,
    /// Ids of index files with no segment, above the first segment's id.
    pub(crate) orphans: Vec<u64>,
    /// Names of index and time index files with no segment whose ids lie
    /// below every segment's: left by a removal of the oldest segments
    /// (retention, or segments below the log start) that a crash cut
    /// short. An open for writing removes them.
    pub(crate) leftover_indexes: Vec<String>,
    /// Ids of segments with a time index file (a regular file, or a link).
    pub(crate) time_indexes: HashSet<u64>,
    /// Ids of time index files with no segment, above the first
    /// segment's id.
    pub(crate) orphan_time_indexes: Vec<u64>,
    /// Segments whose time index name is taken by something that is not a
    /// regular file (nor a link): none is written there.
    pub(crate) unwritable_time_indexes: HashSet<u64>,
    /// Whether a log-start file (a regular file) is present.
    pub(crate) log_start: bool,
    /// Names that are neither ours nor known to other layers.
    pub(crate) strays: Vec<String>,
    /// Whether a clean-shutdown file (a regular file) is present.
    pub(crate) clean_shutdown: bool,
    /// Whether a key file (a regular file) is present.
    pub(crate) key_file: bool,
    /// Whether a raft-state file (a regular file) is present.
    pub(crate) raft_state: bool,
    /// Whether a raft-snapshot file (a regular file) is present.
    pub(crate) raft_snapshot: bool,
    /// Whether anything (of any type) is named like the epochs file or its
    /// temporary: when not, loading the history has nothing to read or
    /// remove.
    pub(crate) epochs_named: bool,
    /// Temporaries an interrupted write of ours left, sorted by name: an
    /// open removes them (unlinking opens nothing). A directory under such
    /// a name cannot be unlinked and is in `not_files` instead.
    pub(crate) temporaries: Vec<(String, TemporaryKind)>,
    /// Entries under our names (other than segments) that are not regular
    /// files, sorted by name: never opened, left alone.
    pub(crate) not_files: Vec<(String, FileType)>,
    /// Segments whose index name is taken by something that is not a
    /// regular file (nor a link): a rebuilt index is not written there.
    pub(crate) unwritable_indexes: HashSet<u64>,
}

impl Listing {
    /// The notes the listing alone gives: strays, orphan indexes,
    /// temporaries and names that are not regular files.
    pub(crate) fn notes(&self) -> Vec<Note> {
        let strays = self
            .strays
            .iter()
            .map(|name| Note::StrayFile { name: name.clone() });
        let orphans = self
            .orphans
            .iter()
            .map(|&segment| Note::OrphanIndex { segment });
        let time_orphans = self
            .orphan_time_indexes
            .iter()
            .map(|&segment| Note::OrphanTimeIndex { segment });
        let leftovers = self
            .leftover_indexes
            .iter()
            .map(|name| Note::IndexOfRemovedSegment { name: name.clone() });
        let temporaries = self.temporaries.iter().map(|(name, kind)| Note::Temporary {
            name: name.clone(),
            kind: *kind,
        });
        let not_files = self
            .not_files
            .iter()
            .map(|(name, file_type)| Note::NotAFile {
                name: name.clone(),
                file_type: *file_type,
            });
        strays
            .chain(orphans)
            .chain(time_orphans)
            .chain(leftovers)
            .chain(temporaries)
            .chain(not_files)
            .collect()
    }
}

/// Lists `dir`, or takes `listed`, its entries as the caller just read them
/// (through the lock's descriptor: [`crate::ShardLock::acquire_listing`]).
pub(crate) fn list_dir(
    fs: &FileSystem,
    dir: &Path,
    listed: Option<Vec<DirEntry>>,
) -> Result<Listing, RecoveryError> {
    let entries = match listed {
        Some(entries) => entries,
        None => fs
            .list_dir(dir)
            .map_err(|e| IoError::new("list directory", dir, e))?,
    };
    let mut logs = BTreeSet::new();
    let mut indexes = BTreeSet::new();
    let mut time_indexes = BTreeSet::new();
    let mut listing = Listing {
        segments: Vec::new(),
        orphans: Vec::new(),
        leftover_indexes: Vec::new(),
        time_indexes: HashSet::new(),
        orphan_time_indexes: Vec::new(),
        unwritable_time_indexes: HashSet::new(),
        log_start: false,
        strays: Vec::new(),
        clean_shutdown: false,
        key_file: false,
        raft_state: false,
        raft_snapshot: false,
        epochs_named: false,
        temporaries: Vec::new(),
        not_files: Vec::new(),
        unwritable_indexes: HashSet::new(),
    };
    for entry in entries {
        let name = entry.name.to_string_lossy();
        let file_type = entry.file_type;
        // A link is followed where a file of ours is read (segments,
        // indexes, epochs): the open refuses one to anything but a regular
        // file. Everything else must be a regular file itself.
        let regular = file_type == FileType::Regular;
        let readable = regular || file_type == FileType::Symlink;
        let kind = ShardFileName::parse(&name);
        listing.epochs_named |= matches!(kind, ShardFileName::Epochs | ShardFileName::EpochsTemp);
        let temporary = match kind {
            ShardFileName::SegmentTemp(id) => Some(TemporaryKind::SegmentCreation(id)),
            ShardFileName::SegmentCopy(id) => Some(TemporaryKind::SegmentReplacement(id)),
            ShardFileName::EpochsTemp => Some(TemporaryKind::EpochsUpdate),
            ShardFileName::CleanShutdownTemp => Some(TemporaryKind::CleanShutdown),
            ShardFileName::KeyTemp => Some(TemporaryKind::KeyFile),
            ShardFileName::LogStartTemp => Some(TemporaryKind::LogStart),
            ShardFileName::RaftStateTemp => Some(TemporaryKind::RaftState),
            ShardFileName::RaftSnapshotTemp => Some(TemporaryKind::RaftSnapshot),
            _ => None,
        };
        if let Some(kind) = temporary {
            if file_type == FileType::Directory {
                listing.not_files.push((name.into_owned(), file_type));
            } else {
                listing.temporaries.push((name.into_owned(), kind));
            }
            continue;
        }
        match kind {
            ShardFileName::Segment(id) => {
                if !readable {
                    return Err(RecoveryError::NotRegularFile {
                        path: dir.join(&*name),
                        not_regular: NotRegularFile {
                            file_type,
                            via_symlink: false,
                        },
                    });
                }
                logs.insert(id);
            }
            ShardFileName::Index(id) => {
                // Reported by the index check, which finds it unusable.
                if !readable {
                    listing.unwritable_indexes.insert(id);
                }
                indexes.insert(id);
            }
            ShardFileName::TimeIndex(id) => {
                // Checked against its segment's records where a walk reads
                // them; one that is not a file is never opened nor written.
                if readable {
                    listing.time_indexes.insert(id);
                } else {
                    listing.unwritable_time_indexes.insert(id);
                }
                time_indexes.insert(id);
            }
            ShardFileName::LogStart => {
                // Read by the inspection only when it is a regular file.
                if regular {
                    listing.log_start = true;
                } else {
                    listing.not_files.push((name.into_owned(), file_type));
                }
            }
            ShardFileName::CleanShutdown => {
                // Only a regular file is ours: anything else is not read,
                // not trusted and not removed.
                if regular {
                    listing.clean_shutdown = true;
                } else {
                    listing.not_files.push((name.into_owned(), file_type));
                }
            }
            ShardFileName::Key => {
                // Read by the inspection only when it is a regular file.
                if regular {
                    listing.key_file = true;
                } else {
                    listing.not_files.push((name.into_owned(), file_type));
                }
            }
            ShardFileName::Epochs if !readable => {
                listing.not_files.push((name.into_owned(), file_type));
            }
            ShardFileName::RaftState => {
                // Another layer's (felix-raft's), checked by the inspection
                // only when it is a regular file.
                if regular {
                    listing.raft_state = true;
                } else {
                    listing.not_files.push((name.into_owned(), file_type));
                }
            }
            ShardFileName::RaftSnapshot => {
                // felix-raft's too, checked the same way.
                if regular {
                    listing.raft_snapshot = true;
                } else {
                    listing.not_files.push((name.into_owned(), file_type));
                }
            }
            ShardFileName::Lock if !regular => {
                listing.not_files.push((name.into_owned(), file_type));
            }
            // Files other layers own, as they should be.
            ShardFileName::Epochs | ShardFileName::Lock => {}
            // Classified as temporaries above.
            ShardFileName::SegmentTemp(_)
            | ShardFileName::SegmentCopy(_)
            | ShardFileName::EpochsTemp
            | ShardFileName::CleanShutdownTemp
            | ShardFileName::KeyTemp
            | ShardFileName::LogStartTemp
            | ShardFileName::RaftStateTemp
            | ShardFileName::RaftSnapshotTemp => {}
            ShardFileName::Other => listing.strays.push(name.into_owned()),
        }
    }
    listing.strays.sort();
    listing.temporaries.sort();
    listing.not_files.sort();
    // The oldest segments are removed one at a time, each removal durable
    // before the next: a crash leaves at most one segment's files half
    // removed, and only below every segment still there. Its indexes
    // describe nothing any more (an index is only ever rebuilt from its
    // own segment), so they are the removal's to finish, not orphans.
    // Something that is not a regular file is not ours to unlink.
    let first_log = logs.first().copied();
    let leftover = |id: u64, unwritable: &HashSet<u64>| {
        first_log.is_some_and(|first| id < first) && !unwritable.contains(&id)
    };
    for id in indexes.difference(&logs).copied() {
        if leftover(id, &listing.unwritable_indexes) {
            let name = felix_format::file_name(id, felix_format::FileKind::Index);
            listing.leftover_indexes.push(name.as_str().to_owned());
        } else {
            listing.orphans.push(id);
        }
    }
    for id in time_indexes.difference(&logs).copied() {
        if leftover(id, &listing.unwritable_time_indexes) {
            let name = felix_format::file_name(id, felix_format::FileKind::TimeIndex);
            listing.leftover_indexes.push(name.as_str().to_owned());
        } else {
            listing.orphan_time_indexes.push(id);
        }
    }
    listing.leftover_indexes.sort();
    listing.segments = logs.into_iter().collect();
    Ok(listing)
}
