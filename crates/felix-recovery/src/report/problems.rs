//! Why a file beside the segments could not be used: values the notes
//! carry, each naming what went wrong without a formatted string.

use std::fmt;
use std::io;

use felix_format::CorruptionKind;
use felix_format::clean::CleanShutdownDecodeError;
use felix_format::key_file::KeyFileDecodeError;
use felix_format::log_start::LogStartDecodeError;
use felix_format::raft_state::RaftStateDecodeError;
use felix_format::time_index::{TimeIndexDecodeError, TimeIndexHeader};
use felix_io::NotRegularFile;
use felix_segment::{IndexLoadError, TimeIndexLoadError};

/// Why a clean-shutdown file present in a shard directory was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CleanShutdownUnused {
    /// Its bytes do not decode.
    #[error("it does not decode: {0}")]
    Invalid(CleanShutdownDecodeError),
    /// It is larger than any valid file.
    #[error("it is {len} bytes, larger than any valid one")]
    TooLarge {
        /// Its length.
        len: u64,
    },
    /// It could not be read.
    #[error("it could not be read ({op}: {kind})")]
    Unreadable {
        /// What failed: open, stat or read.
        op: &'static str,
        /// How.
        kind: io::ErrorKind,
    },
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

/// Why a key file could not be used.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFileProblem {
    /// Its bytes do not decode.
    #[error("it does not decode ({}: {})", .0.name(), .0)]
    Invalid(KeyFileDecodeError),
    /// It is larger than any valid key file.
    #[error("it is {len} bytes, larger than any valid one")]
    TooLarge {
        /// Its length.
        len: u64,
    },
    /// Its name is not a regular file: never opened.
    #[error("it is {0}")]
    NotAFile(NotRegularFile),
    /// It could not be read.
    #[error("it could not be read ({op}: {kind})")]
    Unreadable {
        /// What failed: open, stat or read.
        op: &'static str,
        /// How.
        kind: io::ErrorKind,
    },
}

impl KeyFileProblem {
    /// A stable name for the problem, for reports and scripts: the decode
    /// error's name (`KeyFileChecksum`, ...), or `KeyFileTooLarge`,
    /// `KeyFileNotAFile`, `KeyFileUnreadable`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Invalid(err) => err.name(),
            Self::TooLarge { .. } => "KeyFileTooLarge",
            Self::NotAFile(_) => "KeyFileNotAFile",
            Self::Unreadable { .. } => "KeyFileUnreadable",
        }
    }
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
    /// The file does not decode.
    Invalid(TimeIndexDecodeError),
    /// It is longer than any time index of its segment.
    TooLarge {
        /// Its length.
        len: u64,
    },
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
    /// It could not be read.
    Unreadable {
        /// The operation that failed.
        op: &'static str,
        /// How it failed.
        kind: io::ErrorKind,
    },
    /// Its name is not a regular file: never opened, and no time index is
    /// written there.
    NotAFile(NotRegularFile),
}

impl TimeIndexProblem {
    /// Why loading a time index failed, as a problem to report (`None` for
    /// a missing file, which is no problem: the reference implementation
    /// writes none).
    pub fn of_load_error(err: &TimeIndexLoadError) -> Option<Self> {
        Some(match err {
            TimeIndexLoadError::Missing { .. } => return None,
            TimeIndexLoadError::Invalid { error, .. } => Self::Invalid(*error),
            TimeIndexLoadError::TooLarge { len, .. } => Self::TooLarge { len: *len },
            TimeIndexLoadError::Stale { found, .. } => Self::Stale { found: *found },
            TimeIndexLoadError::Io(err) if let Some(what) = err.not_regular_file() => {
                Self::NotAFile(what)
            }
            TimeIndexLoadError::Io(err) => Self::Unreadable {
                op: err.op(),
                kind: err.kind(),
            },
            _ => Self::Unreadable {
                op: "read",
                kind: io::ErrorKind::Other,
            },
        })
    }
}

impl fmt::Display for TimeIndexProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid(error) => write!(f, "it does not decode ({}: {error})", error.name()),
            Self::TooLarge { len } => {
                write!(f, "it is {len} bytes, longer than any of its segment")
            }
            Self::Stale { found } => write!(
                f,
                "it describes offsets {}..{} in {} bytes, not the segment as it is",
                found.base_offset, found.next_offset, found.segment_len
            ),
            Self::Wrong { number } => {
                write!(f, "entry {number} is not what the segment's records give")
            }
            Self::Unreadable { op, kind } => write!(f, "it could not be read ({op}: {kind})"),
            Self::NotAFile(what) => write!(f, "it is {what}"),
        }
    }
}

/// Why a log-start file could not be used. The log then begins at its
/// first segment's base offset: records deleted before the recorded start
/// reappear, none vanish.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LogStartProblem {
    /// Its bytes do not decode.
    #[error("it does not decode ({}: {})", .0.name(), .0)]
    Invalid(LogStartDecodeError),
    /// It is longer than the file's 28 bytes.
    #[error("it is {len} bytes, longer than a log-start file")]
    TooLarge {
        /// Its length.
        len: u64,
    },
    /// Its name is not a regular file: never opened.
    #[error("it is {0}")]
    NotAFile(NotRegularFile),
    /// It could not be read.
    #[error("it could not be read ({op}: {kind})")]
    Unreadable {
        /// What failed: open, stat or read.
        op: &'static str,
        /// How.
        kind: io::ErrorKind,
    },
}

impl LogStartProblem {
    /// A stable name for the problem, for reports and scripts: the decode
    /// error's name (`LogStartChecksum`, ...), or `LogStartTooLarge`,
    /// `LogStartNotAFile`, `LogStartUnreadable`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Invalid(err) => err.name(),
            Self::TooLarge { .. } => "LogStartTooLarge",
            Self::NotAFile(_) => "LogStartNotAFile",
            Self::Unreadable { .. } => "LogStartUnreadable",
        }
    }
}

/// Why a raft-state file (a Raft log's vote and last purged entry) could
/// not be used. No record depends on it; the Raft log kept in the shard
/// refuses to open until it is restored.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RaftStateProblem {
    /// Its bytes do not decode.
    #[error("it does not decode ({}: {})", .0.name(), .0)]
    Invalid(RaftStateDecodeError),
    /// It is longer than the longest raft-state file (`RAFT_STATE_FILE_LEN`, 64 bytes).
    #[error("it is {len} bytes, longer than a raft-state file")]
    TooLarge {
        /// Its length.
        len: u64,
    },
    /// Its name is not a regular file: never opened.
    #[error("it is {0}")]
    NotAFile(NotRegularFile),
    /// It could not be read.
    #[error("it could not be read ({op}: {kind})")]
    Unreadable {
        /// What failed: open, stat or read.
        op: &'static str,
        /// How.
        kind: io::ErrorKind,
    },
}

impl RaftStateProblem {
    /// A stable name for the problem, for reports and scripts: the decode
    /// error's name (`RaftStateChecksum`, ...), or `RaftStateTooLarge`,
    /// `RaftStateNotAFile`, `RaftStateUnreadable`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Invalid(err) => err.name(),
            Self::TooLarge { .. } => "RaftStateTooLarge",
            Self::NotAFile(_) => "RaftStateNotAFile",
            Self::Unreadable { .. } => "RaftStateUnreadable",
        }
    }
}
