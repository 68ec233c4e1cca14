//! What recovery found and did, in terms an operator and a script can act on.

use std::fmt;
use std::io;
use std::path::PathBuf;

use felix_io::{FileType, NotRegularFile};

use felix_format::{CorruptionKind, CorruptionSite, ShardFileName};
use felix_segment::IndexLoadError;

use felix_format::clean::CleanShutdownDecodeError;
use felix_format::key_file::KeyFileDecodeError;

use crate::classify::{DamageLocation, RepairClass};
use crate::location::UnwrittenBlocks;

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
        problem: KeyFileProblem,
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

/// Whose temporary a [`Note::Temporary`] is.
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
