//! What recovery found and did, in terms an operator and a script can act on.

use std::fmt;
use std::io;
use std::path::PathBuf;

use felix_io::{FileType, NotRegularFile};

use felix_format::{CorruptionKind, CorruptionSite, ShardFileName};

use crate::classify::{DamageLocation, RepairClass};
use crate::location::UnwrittenBlocks;

mod problems;

pub use problems::{
    CleanShutdownUnused, IndexProblem, SideFileProblem, TemporaryKind, TimeIndexProblem,
};

/// One piece of damage to segment data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What is wrong.
    pub kind: CorruptionKind,
    /// Where the damaged record or header begins.
    pub site: CorruptionSite,
    /// Who may authorise its repair.
    pub repair: RepairClass,
    /// Further facts that decided the repair class.
    pub context: FindingContext,
}

/// The facts behind a finding's repair class.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingContext {
    /// Damage to a record, at a location that decided its class.
    Record {
        /// Newest-confined, newest-followed-by-intact, or sealed.
        location: DamageLocation,
        /// Position of the first intact record after the damage, if any.
        intact_record_at: Option<u64>,
        /// Whether every byte from the damage to the end of the file is zero
        /// (preallocated or extended space that was never written).
        tail_all_zero: bool,
        /// Bytes from the damage to the end of the file.
        tail_bytes: u64,
        /// 4 KiB blocks after the damage that read as never written, when
        /// their zeros prove records unsynced (the damaged one, for
        /// [`DamageLocation::NewestUnwrittenBlocks`], or those after it).
        unwritten: Option<UnwrittenBlocks>,
    },
    /// Damage to a segment's 32-byte header.
    SegmentHeader,
    /// The newest segment is no longer than its header and the header is
    /// incomplete or unwritten: a segment creation the crash interrupted.
    /// No record can live in it.
    AbandonedSegment {
        /// Whether an older segment exists (if not, the shard's start is
        /// unknown and the file is not removed).
        older_segment_exists: bool,
    },
    /// A segment does not begin where the previous one ended.
    OffsetGap {
        /// The previous segment's id.
        previous_segment: u64,
    },
}

impl Finding {
    /// One sentence for an operator: what the damage means and what can be
    /// done about it.
    pub fn detail(&self) -> String {
        match self.context {
            FindingContext::Record {
                location,
                intact_record_at,
                tail_all_zero,
                tail_bytes,
                unwritten,
            } => {
                let place = match (location, unwritten) {
                    (DamageLocation::NewestConfined, Some(u)) => format!(
                        "in the newest segment's tail ({tail_bytes} bytes to end of file); nothing from byte {} on was ever synced ({} from byte {}), but the zeros do not reach this record",
                        u.first_record,
                        blocks_never_written(u.blocks),
                        u.from
                    ),
                    (DamageLocation::NewestConfined, None) => format!(
                        "in the newest segment's tail ({tail_bytes} bytes to end of file, no intact record after it{})",
                        if tail_all_zero {
                            "; the tail is all zeros"
                        } else {
                            ""
                        }
                    ),
                    (DamageLocation::NewestFollowedByIntact, _) => format!(
                        "in the newest segment, followed by an intact record at byte {}",
                        intact_record_at.unwrap_or_default()
                    ),
                    (DamageLocation::NewestUnwrittenBlocks, u) => format!(
                        "in the newest segment's tail ({tail_bytes} bytes to end of file), running into {}: writes a power loss cut off, never synced",
                        u.map_or_else(
                            || "blocks never written".to_owned(),
                            |u| format!("{} from byte {}", blocks_never_written(u.blocks), u.from)
                        )
                    ),
                    (DamageLocation::NewestUnwritten, _) => match intact_record_at {
                        Some(at) => format!(
                            "in the newest segment, zeros up to an intact record at byte {at}: writes a power loss cut off, never synced"
                        ),
                        None => format!(
                            "in the newest segment's tail ({tail_bytes} bytes to end of file, all zeros): writes a power loss cut off, never synced"
                        ),
                    },
                    (DamageLocation::Sealed, _) => "in a sealed segment".to_owned(),
                };
                let action = match self.repair {
                    RepairClass::Default => {
                        format!("an unfinished write; {tail_bytes} bytes truncated on open")
                    }
                    RepairClass::OptIn => format!(
                        "may be rot of an acknowledged record; truncating {tail_bytes} bytes needs the checksum-tail repair policy"
                    ),
                    RepairClass::Never => {
                        "not repairable: restore this segment from a replica or backup".to_owned()
                    }
                };
                format!("{}: {place}; {action}", self.kind)
            }
            FindingContext::SegmentHeader => format!(
                "{}: segment header damage is never a torn write; restore this segment from a replica or backup",
                self.kind
            ),
            FindingContext::AbandonedSegment {
                older_segment_exists: true,
            } => format!(
                "{}: an interrupted segment creation holding no records; removed on open",
                self.kind
            ),
            FindingContext::AbandonedSegment {
                older_segment_exists: false,
            } => format!(
                "{}: the only segment is shorter than its header, so the shard's first offset is unknown; remove the directory or restore it",
                self.kind
            ),
            FindingContext::OffsetGap { previous_segment } => format!(
                "{}: segment does not continue segment {previous_segment}; records are missing between them",
                self.kind
            ),
        }
    }
}

/// "1 block never written", "3 blocks never written".
fn blocks_never_written(blocks: u64) -> String {
    let noun = if blocks == 1 { "block" } else { "blocks" };
    format!("{blocks} {noun} never written")
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} [{}] at {}",
            self.detail(),
            self.repair.as_str(),
            self.site
        )
    }
}

/// Something recovery did (or, for a dry run, would do) to the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The newest segment was cut back to its last intact record.
    Truncate {
        /// Segment id.
        segment: u64,
        /// The segment file.
        path: PathBuf,
        /// Length before.
        from_len: u64,
        /// Length after.
        to_len: u64,
    },
    /// An abandoned segment (and its index) was removed.
    RemoveSegment {
        /// Segment id.
        segment: u64,
        /// The segment file.
        path: PathBuf,
        /// Its length.
        len: u64,
    },
    /// A sealed segment's time index file was rewritten from its records.
    RebuildTimeIndex {
        /// Segment id.
        segment: u64,
        /// The time index file.
        path: PathBuf,
        /// Entries written.
        entries: usize,
    },
    /// A segment lying wholly below the log start (left by a deletion of
    /// records or a reset that a crash interrupted, or by a retention pass
    /// yet to run) was removed, with its indexes.
    RemoveBelowLogStart {
        /// Segment id.
        segment: u64,
        /// The segment file.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// Where the log begins.
        start_offset: u64,
    },
    /// An index was rebuilt from its segment.
    RebuildIndex {
        /// Segment id.
        segment: u64,
        /// The index file.
        path: PathBuf,
        /// Entries written.
        entries: usize,
    },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncate {
                path,
                from_len,
                to_len,
                ..
            } => write!(
                f,
                "truncate {} from {from_len} to {to_len} bytes ({} bytes removed)",
                path.display(),
                from_len - to_len
            ),
            Self::RemoveSegment { path, len, .. } => {
                write!(f, "remove {} ({len} bytes, no records)", path.display())
            }
            Self::RebuildIndex { path, entries, .. } => {
                write!(f, "rebuild {} ({entries} entries)", path.display())
            }
            Self::RebuildTimeIndex { path, entries, .. } => {
                write!(f, "rewrite {} ({entries} entries)", path.display())
            }
            Self::RemoveBelowLogStart {
                path,
                len,
                start_offset,
                ..
            } => write!(
                f,
                "remove {} ({len} bytes, wholly below the log start {start_offset})",
                path.display()
            ),
        }
    }
}

/// Something worth knowing that is not damage to data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// An index could not be used and will be (or was) rebuilt.
    IndexUnusable {
        /// Segment id.
        segment: u64,
        /// Why.
        reason: IndexProblem,
    },
    /// A file in the shard directory that is not one of ours; left alone.
    StrayFile {
        /// Its name.
        name: String,
    },
    /// An index file with no segment beside it; left alone.
    OrphanIndex {
        /// Segment id in its name.
        segment: u64,
    },
    /// The shard was closed cleanly: its clean-shutdown file listed exactly
    /// the directory's segments, so the sealed ones were taken as listed
    /// (not opened) and only the newest was scanned.
    CleanShutdownUsed {
        /// Sealed segments taken from the record.
        sealed: usize,
    },
    /// A clean-shutdown file was present but not used; every segment was
    /// inspected.
    CleanShutdownUnused {
        /// Why.
        reason: CleanShutdownUnused,
    },
    /// A temporary an interrupted write of ours left behind; an open
    /// removes it.
    Temporary {
        /// Its name.
        name: String,
        /// Whose temporary it is.
        kind: TemporaryKind,
    },
    /// An entry under one of our names (other than a segment's or an
    /// index's) that is not a regular file: never opened, left alone.
    NotAFile {
        /// Its name.
        name: String,
        /// What it is.
        file_type: FileType,
    },
    /// The shard's key file cannot be used; the shard is known by its
    /// directory name only. Nothing depends on it: the shard opens all the
    /// same, and a store that opens it by a key whose directory name this
    /// is writes the file again.
    KeyFileUnusable {
        /// Why.
        problem: SideFileProblem,
    },
    /// The shard's key file names a key whose directory would have another
    /// name: the directory was renamed or copied, or the file belongs
    /// elsewhere. The key is not taken as this shard's.
    KeyFileDisagrees {
        /// The key the file holds.
        key: felix_format::ShardKey,
        /// The directory name that key gives.
        expected_dir: String,
        /// The directory's actual name.
        dir_name: String,
    },
    /// A sealed segment's time index file cannot be used; the time index is
    /// built from the segment's records instead (and `recover` rewrites the
    /// file).
    TimeIndexUnusable {
        /// Segment id.
        segment: u64,
        /// Why.
        reason: TimeIndexProblem,
    },
    /// An index or time index file whose segment was removed, lying below
    /// every segment the directory holds: a removal of the oldest segments
    /// (retention, or segments below the log start) that a crash cut short
    /// left it. An open for writing removes it.
    IndexOfRemovedSegment {
        /// Its name.
        name: String,
    },
    /// A time index file with no segment beside it; left alone.
    OrphanTimeIndex {
        /// Segment id in its name.
        segment: u64,
    },
    /// The log-start file cannot be used: the log begins at its first
    /// segment's base offset, so records deleted before the recorded start
    /// reappear (none vanish).
    LogStartUnusable {
        /// Why.
        problem: SideFileProblem,
    },
    /// The raft-state file (the vote and last purged entry of a Raft log
    /// kept in the shard) cannot be used. No record depends on it, so the
    /// shard opens; the Raft log refuses to open until it is restored.
    RaftStateUnusable {
        /// Why.
        problem: SideFileProblem,
    },
    /// The raft-snapshot file (the snapshot a Raft log kept in the shard
    /// was purged up to: its last entry and membership) cannot be used. No
    /// record depends on it, so the shard opens; the Raft log refuses to
    /// open until it is restored (the membership cannot be read back from
    /// purged entries).
    RaftSnapshotUnusable {
        /// Why.
        problem: SideFileProblem,
    },
    /// The log-start file records a start past the end of the log's records
    /// (a crash lost the records written after them): the log begins at the
    /// start, empty, and the next record gets that offset.
    LogStartPastEnd {
        /// The recorded start.
        start_offset: u64,
        /// One past the last record the segments hold.
        next_offset: u64,
    },
    /// A rebuilt index could not be written. Indexes only speed reads up,
    /// so the shard opens all the same: the index is held in memory (or
    /// rebuilt when the segment is read), and writing it is tried again.
    IndexNotWritten {
        /// Segment id.
        segment: u64,
        /// How the write failed.
        kind: io::ErrorKind,
        /// When it failed because its name is not a regular file: what it is.
        not_regular: Option<NotRegularFile>,
    },
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::IndexUnusable { segment, reason } => {
                let name = felix_format::file_name(*segment, felix_format::FileKind::Index);
                match reason {
                    IndexProblem::Missing => {
                        write!(f, "index {name} is missing; rebuilt from its segment")
                    }
                    IndexProblem::Unreadable { op, kind } => write!(
                        f,
                        "index {name} could not be read ({op}: {kind}); rebuilt from its segment"
                    ),
                    IndexProblem::Invalid(kind) => write!(
                        f,
                        "index {name} is invalid ({kind}); rebuilt from its segment"
                    ),
                    IndexProblem::Stale => write!(
                        f,
                        "index {name} does not match its segment; rebuilt from it"
                    ),
                    IndexProblem::StaleEntry {
                        number,
                        offset,
                        position,
                    } => write!(
                        f,
                        "index {name} entry {number} (offset {offset}, position {position}) is not where the segment's records place offset {offset}; rebuilt from its segment"
                    ),
                    IndexProblem::NotAFile(what) => write!(
                        f,
                        "index {name} is {what}: never opened; rebuilt in memory from its segment, not written"
                    ),
                }
            }
            Self::StrayFile { name } => write!(f, "stray file {name:?} left alone"),
            Self::OrphanIndex { segment } => write!(
                f,
                "index {} has no segment beside it; left alone",
                felix_format::file_name(*segment, felix_format::FileKind::Index)
            ),
            Self::CleanShutdownUsed { sealed } => write!(
                f,
                "closed cleanly: {sealed} sealed segment(s) taken from the clean-shutdown file, the newest scanned"
            ),
            Self::CleanShutdownUnused { reason } => write!(
                f,
                "clean-shutdown file not used ({reason}); every segment inspected"
            ),
            Self::Temporary { name, kind } => {
                let whose = match kind {
                    TemporaryKind::SegmentCreation(id) => {
                        format!("an interrupted creation of segment {id} (it holds no record)")
                    }
                    TemporaryKind::SegmentReplacement(id) => format!(
                        "an interrupted replacement of segment {id} (the segment itself is unchanged)"
                    ),
                    TemporaryKind::EpochsUpdate => "an interrupted epochs update".to_owned(),
                    TemporaryKind::CleanShutdown => "an interrupted clean shutdown".to_owned(),
                    TemporaryKind::KeyFile => "an interrupted key file write".to_owned(),
                    TemporaryKind::LogStart => "an interrupted log-start write".to_owned(),
                    TemporaryKind::RaftState => "an interrupted raft-state write".to_owned(),
                    TemporaryKind::RaftSnapshot => "an interrupted raft-snapshot write".to_owned(),
                };
                write!(f, "{name:?} is the temporary of {whose}; removed on open")
            }
            Self::NotAFile { name, file_type } => {
                let never = if *file_type == FileType::Symlink {
                    "followed"
                } else {
                    "opened"
                };
                write!(
                    f,
                    "{name:?} is {file_type}, not a regular file: never {never}, left alone"
                )?;
                match ShardFileName::parse(name) {
                    ShardFileName::Lock => {
                        f.write_str("; the shard directory's own lock keeps one writer")
                    }
                    ShardFileName::Epochs => f.write_str("; the generation history reads as empty"),
                    ShardFileName::CleanShutdown => f.write_str(
                        "; not used, and a clean close writes no clean-shutdown file while it is there",
                    ),
                    ShardFileName::Key => {
                        f.write_str("; the shard is known by its directory name only")
                    }
                    ShardFileName::LogStart => f.write_str(
                        "; the log begins at its first segment's base offset",
                    ),
                    ShardFileName::RaftState | ShardFileName::RaftSnapshot => {
                        f.write_str("; a Raft log kept in the shard will not open")
                    }
                    _ => Ok(()),
                }
            }
            Self::KeyFileUnusable { problem } => write!(
                f,
                "key file unusable: {problem}; the shard is known by its directory name only, and a store opening it by its key writes the file again"
            ),
            Self::KeyFileDisagrees {
                key,
                expected_dir,
                dir_name,
            } => write!(
                f,
                "key file names key {key}, whose directory is {expected_dir:?}, not {dir_name:?}; the key is not taken as this shard's"
            ),
            Self::TimeIndexUnusable { segment, reason } => write!(
                f,
                "time index {} cannot be used ({reason}); built from its segment's records",
                felix_format::file_name(*segment, felix_format::FileKind::TimeIndex)
            ),
            Self::IndexOfRemovedSegment { name } => write!(
                f,
                "{name} is left from the removal of its segment, below every segment held; removed on open"
            ),
            Self::OrphanTimeIndex { segment } => write!(
                f,
                "time index {} has no segment beside it; left alone",
                felix_format::file_name(*segment, felix_format::FileKind::TimeIndex)
            ),
            Self::LogStartUnusable { problem } => write!(
                f,
                "log-start file unusable: {problem}; the log begins at its first segment's base offset (records deleted before the recorded start reappear)"
            ),
            Self::RaftStateUnusable { problem } => write!(
                f,
                "raft-state file unusable: {problem}; the shard's records are unaffected, but a Raft log kept in the shard will not open until it is restored"
            ),
            Self::RaftSnapshotUnusable { problem } => write!(
                f,
                "raft-snapshot file unusable: {problem}; the shard's records are unaffected, but a Raft log kept in the shard will not open until it is restored"
            ),
            Self::LogStartPastEnd {
                start_offset,
                next_offset,
            } => write!(
                f,
                "the log-start file records offset {start_offset}, past the records' end {next_offset} (a crash lost those written after them): the log begins at {start_offset}, empty"
            ),
            Self::IndexNotWritten {
                segment,
                kind,
                not_regular,
            } => {
                let name = felix_format::file_name(*segment, felix_format::FileKind::Index);
                match not_regular {
                    Some(what) => write!(
                        f,
                        "index {name} is {what}, so the rebuilt index was not written"
                    )?,
                    None => write!(f, "index {name} could not be written ({kind})")?,
                }
                f.write_str("; held in memory instead, and written again later")
            }
        }
    }
}
