//! Why a file beside the segments could not be used: values the notes
//! carry, each naming what went wrong without a formatted string.

use std::fmt;
use std::io;

use felix_format::CorruptionKind;
use felix_format::side_file::SideFileKind;
use felix_format::time_index::TimeIndexHeader;
use felix_io::NotRegularFile;
use felix_segment::{IndexLoadError, TimeIndexLoadError};

// Why a side file present in a shard directory could not be used: the
// vocabulary of felix-io's one reader of side files, which recovery's
// notes carry.
pub use felix_io::side_file::SideFileProblem;

/// Why a clean-shutdown file present in a shard directory was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CleanShutdownUnused {
    /// It could not be read, or does not decode.
    #[error("{0}")]
    Unusable(SideFileProblem),
    /// The directory's segment files are not the ones it lists: the shard
    /// was written after it.
    #[error("the directory's {found} segment file(s) are not the {listed} it lists")]
    Stale {
        /// Segments it lists.
        listed: usize,
        /// Segment files in the directory.
        found: usize,
    },
    /// Opening was asked to verify every segment.
    #[error("every segment was asked to be verified")]
    FullVerify,
    /// Opening was asked to check every entry of every index
    /// ([`IndexCheck::EveryEntry`](crate::IndexCheck::EveryEntry)), which
    /// needs the sealed segments' records.
    #[error("every index entry was asked to be checked")]
    EveryIndexEntry,
    /// The last segment it lists is an interrupted creation, so the segment
    /// appends would continue in is one it describes without a scan.
    #[error("the last segment it lists is being removed as an interrupted creation")]
    NewestRemoved,
}

/// Whose temporary a [`Note::Temporary`](crate::Note::Temporary) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TemporaryKind {
    /// `{id:020}.log.tmp`: a new segment's header, written and synced under
    /// this name before it is renamed into place; it never holds a record.
    SegmentCreation(u64),
    /// `{id:020}.log.copy`: a verified copy of sealed segment `id`, before
    /// it replaces the damaged segment (the old segment is still in place).
    SegmentReplacement(u64),
    /// `epochs.tmp`: a new epochs file, before it replaces the old one.
    EpochsUpdate,
    /// `clean-shutdown.tmp`: a clean-shutdown file, before its rename.
    CleanShutdown,
    /// `key.tmp`: a key file, before its rename.
    KeyFile,
    /// `log-start.tmp`: a log-start file, before its rename.
    LogStart,
    /// `raft-state.tmp`: a Raft log's vote and purge record, before its
    /// rename (the file it replaces is still in place).
    RaftState,
    /// `raft-snapshot.tmp`: a Raft log's snapshot, before its rename (the
    /// file it replaces is still in place).
    RaftSnapshot,
}

/// Why an index could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexProblem {
    /// No index file.
    Missing,
    /// The file exists but could not be read (for example, its permissions
    /// deny it): not the same as missing, so the error is kept.
    Unreadable {
        /// The operation that failed (`"open"`, `"read"`).
        op: &'static str,
        /// How it failed.
        kind: io::ErrorKind,
    },
    /// The file failed validation.
    Invalid(CorruptionKind),
    /// It loaded, but a scan from its last entry did not reach the end of
    /// the segment while a scan from the first record did.
    Stale,
    /// It loaded, but this entry is not where the segment's records place
    /// its offset: a walk of record headers from the first record never
    /// reaches a record there with that offset. (A record header embedded in
    /// a payload can verify, so looking only at the bytes an entry names
    /// cannot tell.)
    StaleEntry {
        /// The entry's number in the index, from 0.
        number: u64,
        /// The offset it claims.
        offset: u64,
        /// The position it claims.
        position: u64,
    },
    /// Its name is not a regular file (or leads to something that is not):
    /// it was never opened, and a rebuilt index is not written there.
    NotAFile(NotRegularFile),
}

impl IndexProblem {
    /// Why loading an index failed, as a problem to report.
    pub fn of_load_error(err: &IndexLoadError) -> Self {
        match err {
            IndexLoadError::Missing { .. } => Self::Missing,
            IndexLoadError::Invalid { kind, .. } => Self::Invalid(*kind),
            IndexLoadError::Io(err) if let Some(what) = err.not_regular_file() => {
                Self::NotAFile(what)
            }
            IndexLoadError::Io(err) => Self::Unreadable {
                op: err.op(),
                kind: err.kind(),
            },
            // Loading does nothing else that can fail; anything new is at
            // least a failure to read the file, never proof it is missing.
            _ => Self::Unreadable {
                op: "read",
                kind: io::ErrorKind::Other,
            },
        }
    }
}

/// Why a sealed segment's time index file could not be used. It is built
/// from the segment's records instead; none of these is damage to data.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeIndexProblem {
    /// It could not be read, or does not decode.
    Unusable(SideFileProblem),
    /// It describes another extent than the segment's (written before the
    /// segment changed).
    Stale {
        /// The extent it describes.
        found: TimeIndexHeader,
    },
    /// It decodes and names the segment's extent, but its entries are not
    /// what the segment's records give: the first that differs.
    Wrong {
        /// The entry's number, from 0.
        number: u64,
    },
}

impl TimeIndexProblem {
    /// Why loading a time index failed, as a problem to report (`None` for
    /// a missing file, which is no problem: the reference implementation
    /// writes none).
    pub fn of_load_error(err: &TimeIndexLoadError) -> Option<Self> {
        const FILE: SideFileKind = SideFileKind::TimeIndex;
        Some(match err {
            TimeIndexLoadError::Missing { .. } => return None,
            TimeIndexLoadError::Invalid { error, .. } => {
                Self::Unusable(SideFileProblem::Invalid(*error))
            }
            TimeIndexLoadError::TooLarge { len, .. } => Self::Unusable(SideFileProblem::TooLarge {
                file: FILE,
                len: *len,
            }),
            TimeIndexLoadError::Stale { found, .. } => Self::Stale { found: *found },
            TimeIndexLoadError::Io(err) => Self::Unusable(SideFileProblem::of_io_error(FILE, err)),
            _ => Self::Unusable(SideFileProblem::Unreadable {
                file: FILE,
                op: "read",
                kind: io::ErrorKind::Other,
            }),
        })
    }
}

impl fmt::Display for TimeIndexProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unusable(problem) => write!(f, "{problem}"),
            Self::Stale { found } => write!(
                f,
                "it describes offsets {}..{} in {} bytes, not the segment as it is",
                found.base_offset, found.next_offset, found.segment_len
            ),
            Self::Wrong { number } => {
                write!(f, "entry {number} is not what the segment's records give")
            }
        }
    }
}
