//! The pipeline composed: [`inspect`] lists a shard directory, measures
//! its segments and plans ([`crate::listing`] → [`crate::scan`] →
//! [`crate::plan`], which decides with [`crate::classify`] and
//! [`crate::location`]); [`open_shard`] then repairs what the policy allows
//! ([`crate::repair`]) and hands the writer what it needs to continue.

use std::path::Path;
use std::sync::Arc;

use felix_format::SegmentExtent;
use felix_io::{DirEntry, FileSystem, OpenMode};
use felix_segment::{OpenedIndex, SegmentError, SegmentFile, SparseIndex, TimeIndex};

use crate::classify::{RepairClass, RepairPolicy};
use crate::error::{RecoveryError, unexpected_segment_error};
use crate::held::{Held, Purpose};
use crate::inspection::{InspectOptions, Inspection};
use crate::key_file::StoredKey;
use crate::listing::list_dir;
use crate::lock::ShardLock;
use crate::repair::{remove_clean_shutdown, remove_leftover_indexes, remove_temporaries, repair};
use crate::report::{Action, CleanShutdownUnused, Finding, FindingContext, Note};
use crate::scan::segment_path;

/// Inspects the shard directory `dir` on the file system `fs`, reading but
/// never writing: every descriptor opened is read-only, so an inspection is
/// safe to run on a shard another process owns, and `felix-store verify`
/// can promise that it changes nothing.
///
/// Lists `*.log` files and sorts them by the number in their names, checks
/// every segment header, validates (or rebuilds in memory) every index,
/// scans sealed segments' tails (or all of them with `full_verify`) and the
/// newest segment in full, checks that offsets continue from segment to
/// segment, and classifies every damage found.
pub fn inspect(
    fs: &FileSystem,
    dir: &Path,
    shard: &str,
    options: &InspectOptions,
) -> Result<Inspection, RecoveryError> {
    Ok(inspect_with(fs, dir, shard, options, Purpose::default(), None)?.inspection)
}

/// What [`inspect_with`] found, with what an open's inspection kept.
struct Inspected {
    inspection: Inspection,
    /// The newest segment's descriptors (an open's inspection only).
    held: Option<Held>,
    /// Whether anything is named like the epochs file or its temporary.
    epochs_named: bool,
}

/// [`inspect`], optionally trusting a clean-shutdown file that lists
/// exactly the directory's segments for every segment but the newest (see
/// `clean.rs` for why that is safe). The newest is always scanned in full.
fn inspect_with(
    fs: &FileSystem,
    dir: &Path,
    shard: &str,
    options: &InspectOptions,
    purpose: Purpose<'_>,
    listed: Option<Vec<DirEntry>>,
) -> Result<Inspected, RecoveryError> {
    let shard: Arc<str> = Arc::from(shard);
    let listing = list_dir(fs, dir, listed)?;
    let last_id = listing.segments.last().copied();
    let epochs_named = listing.epochs_named;
    let (facts, held) = crate::scan::gather(fs, dir, &shard, listing, options, purpose)?;
    let trusted = facts.trusted_clean_shutdown;
    let inspection = crate::plan::plan(dir, &shard, facts);
    // A trusted record covers sealed segments only: if the segment it
    // lists last is going (an interrupted creation), the one a writer would
    // continue was never scanned, so everything is inspected instead.
    let last_live = inspection.live_segments().last().map(|s| s.id);
    if trusted && last_live != last_id {
        drop(held);
        let again = Purpose {
            use_clean_shutdown: false,
            ..purpose
        };
        let mut full = inspect_with(fs, dir, &shard, options, again, None)?;
        full.inspection.notes.push(Note::CleanShutdownUnused {
            reason: CleanShutdownUnused::NewestRemoved,
        });
        return Ok(full);
    }
    Ok(Inspected {
        inspection,
        held,
        epochs_named,
    })
}

/// What to do on open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenOptions {
    /// How to inspect.
    pub inspect: InspectOptions,
    /// Which damage may be repaired. Default [`RepairPolicy::Default`]:
    /// only what is provably an unfinished write.
    pub repair_policy: RepairPolicy,
    /// Trust a clean-shutdown file that lists exactly the directory's
    /// segments for the sealed ones, opening none of them (see
    /// [`write_clean_shutdown`](crate::write_clean_shutdown)). Ignored
    /// with `inspect.full_verify`. Default `false`.
    pub use_clean_shutdown: bool,
    /// Leave the clean-shutdown file in place, for a caller that removes it
    /// (durably, [`remove_clean_shutdown`]) before it changes the set of
    /// segments or a sealed one: appends to the newest segment leave the
    /// record true for the next open, which scans the newest in full
    /// anyway (see `clean.rs`). Default `false`: the open removes it.
    pub keep_clean_shutdown: bool,
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
    /// Its index file as the inspection opened (and read) it, read-write,
    /// when nothing was repaired since: for the writer to keep
    /// ([`SegmentWriter::resume_with_index_file`](felix_segment::SegmentWriter::resume_with_index_file))
    /// rather than open and read the file again.
    pub index_file: Option<OpenedIndex>,
    /// Its time index, built by the same walk (not sealed: the writer goes
    /// on from it).
    pub time_index: TimeIndex,
}

/// A shard directory after recovery.
#[derive(Debug)]
pub struct RecoveredShard {
    /// Sealed segments in offset order, as recovery left them.
    pub sealed: Vec<SegmentExtent>,
    /// The newest segment, or `None` for a directory without segments (or
    /// whose segments all lay below the log start).
    pub newest: Option<NewestSegment>,
    /// Where the log begins ([`Inspection::start_offset`]): at or above the
    /// first sealed segment's base offset; with no segment left, where the
    /// first segment is to begin (`None`: at the caller's choice).
    pub start_offset: Option<u64>,
    /// The id a new first segment takes when `newest` is `None`: above every
    /// id the directory held, so that none is used twice (`None` past
    /// `u64::MAX`).
    pub next_segment_id: Option<u64>,
    /// Whether a clean-shutdown record stood for the sealed segments: their
    /// files, and their time index files, were written by a shard that
    /// closed cleanly and have not changed since (docs/storage-format.md).
    pub clean_shutdown_trusted: bool,
    /// What was found.
    pub inspection: Inspection,
    /// What was done.
    pub actions: Vec<Action>,
    /// Whether a clean-shutdown file is still in the directory
    /// ([`OpenOptions::keep_clean_shutdown`]): its owner must remove it
    /// before changing the set of segments or a sealed one.
    pub clean_shutdown_kept: bool,
    /// Whether the shard is exactly as the clean close that wrote the
    /// trusted clean-shutdown record left it (the newest segment ends where
    /// the record says, nothing repaired): everything in it was made
    /// durable by that close, so no sync is needed before acknowledging it.
    pub as_closed: bool,
    /// Whether the directory holds nothing named like the epochs file or
    /// its temporary (felix-epochs' files): loading the generation history
    /// then has nothing to read or remove.
    pub epochs_absent: bool,
}

/// Opens the shard directory `dir` on the file system `fs` for writing
/// after a crash or a clean shutdown alike. `lock` is the directory's lock,
/// which the caller holds for as long as it writes the shard.
///
/// Inspects the directory, fails with [`RecoveryError::Unrepairable`]
/// (having modified nothing) when damage is outside what `options` allow,
/// otherwise repairs, rebuilds indexes, removes a clean-shutdown file
/// (durably), the temporaries of interrupted segment creations and clean
/// shutdowns (`{id:020}.log.tmp`, `clean-shutdown.tmp`; never another name,
/// never a directory) and the indexes of removed segments below every
/// segment held ([`Note::IndexOfRemovedSegment`](crate::Note::IndexOfRemovedSegment)),
/// and returns the segments. (`epochs.tmp` is removed by
/// felix-epochs when the history is loaded.)
pub fn open_shard(
    fs: &FileSystem,
    dir: &Path,
    shard: &str,
    options: &OpenOptions,
    lock: &ShardLock,
) -> Result<RecoveredShard, RecoveryError> {
    open_inner(fs, dir, shard, options, lock, OpenHints::default())
}

/// What a caller of [`open_shard_with`] read of the directory just before,
/// while no other writer could change it, so that the open does not read
/// it again. Default: nothing.
#[derive(Debug, Default)]
pub struct OpenHints {
    /// The key file as [`read_key_file`](crate::read_key_file) read it (a
    /// store checks a shard's key before opening it, holding its root's
    /// lock): the inspection reports it instead of reading the file again.
    pub key: Option<StoredKey>,
    /// The directory's entries, as
    /// [`ShardLock::acquire_listing`] read them through the lock's
    /// descriptor: the inspection takes them instead of listing again.
    pub listing: Option<Vec<DirEntry>>,
}

/// [`open_shard`], taking what `hints` hold instead of reading it again.
///
/// ```
/// use felix_io::FileSystem;
/// use felix_recovery::{OpenHints, OpenOptions, ShardLock, open_shard_with};
///
/// let dir = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// // The entries are read through the lock, once both its locks are held.
/// let (lock, listing) = ShardLock::acquire_listing(&fs, dir.path())?;
/// let hints = OpenHints { listing, ..OpenHints::default() };
/// let shard = open_shard_with(&fs, dir.path(), "demo", &OpenOptions::default(), &lock, hints)?;
/// assert!(shard.newest.is_none() && shard.sealed.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_shard_with(
    fs: &FileSystem,
    dir: &Path,
    shard: &str,
    options: &OpenOptions,
    lock: &ShardLock,
    hints: OpenHints,
) -> Result<RecoveredShard, RecoveryError> {
    open_inner(fs, dir, shard, options, lock, hints)
}

fn open_inner(
    fs: &FileSystem,
    dir: &Path,
    shard: &str,
    options: &OpenOptions,
    lock: &ShardLock,
    hints: OpenHints,
) -> Result<RecoveredShard, RecoveryError> {
    // The hints are only as good as their source: the lock of this very
    // directory, held since they were read.
    debug_assert_eq!(lock.dir(), dir, "the lock held is the opened directory's");
    let purpose = Purpose {
        use_clean_shutdown: options.use_clean_shutdown,
        for_writer: true,
        key: hints.key.as_ref(),
    };
    let Inspected {
        mut inspection,
        mut held,
        epochs_named,
    } = inspect_with(fs, dir, shard, &options.inspect, purpose, hints.listing)?;
    let repaired = repair(fs, &inspection, options.repair_policy, lock)?;
    let actions = repaired.actions;
    inspection.notes.extend(repaired.notes);
    // The shard is about to be written: a clean-shutdown record would no
    // longer describe it. Its removal is durable before any write.
    // Kept only when trusted: a stale record left in place could come to
    // list exactly the directory's segments again after a roll, while a
    // sealed one differs from it.
    let clean_shutdown_kept = inspection.clean_shutdown_present
        && options.keep_clean_shutdown
        && inspection.clean_newest.is_some();
    if inspection.clean_shutdown_present && !clean_shutdown_kept {
        remove_clean_shutdown(fs, dir, lock)?;
    }
    remove_temporaries(fs, &inspection, lock)?;
    remove_leftover_indexes(fs, &inspection, lock)?;
    let live: Vec<_> = inspection.live_segments().cloned().collect();
    let mut sealed = Vec::with_capacity(live.len());
    let mut newest = None;
    for (i, summary) in live.iter().enumerate() {
        // A truncation cuts a segment to where its intact records end,
        // which is the summary's length already.
        debug_assert!(actions.iter().all(|a| match a {
            Action::Truncate {
                segment, to_len, ..
            } => *segment != summary.id || *to_len == summary.valid_len,
            _ => true,
        }));
        if i + 1 < live.len() {
            // Every field is known: an unknown one is a Never finding that
            // `repair` refused above.
            if let Some(extent) = summary.extent() {
                sealed.push(extent);
            }
            continue;
        }
        // The descriptors the inspection kept, when nothing was planned
        // (so nothing attempted: a rebuild that renamed its index and then
        // failed to sync the directory is a note, not an action, and the
        // kept index would be the unlinked one): the files are those it
        // checked, under the lock.
        let (kept, index_file) = match held.take() {
            Some(held) if held.id == summary.id && inspection.plan.is_empty() => {
                (Some(held.segment), held.index)
            }
            _ => (None, None),
        };
        let opened = match kept {
            Some(file) => Ok((file, summary.file_len)),
            None => SegmentFile::open(
                fs,
                dir,
                summary.id,
                Arc::clone(&inspection.shard),
                OpenMode::ReadWrite,
            ),
        };
        let file = match opened {
            Ok((file, _)) => file,
            Err(SegmentError::Io(err)) => return Err(err.into()),
            // The header verified when inspected, and the lock keeps
            // writers out: only something outside felix changed it since.
            // It is header damage all the same, never repaired.
            Err(SegmentError::Corrupt { site, kind }) => {
                return Err(RecoveryError::Unrepairable {
                    dir: dir.to_path_buf(),
                    blocking: vec![Finding {
                        kind,
                        site,
                        repair: RepairClass::Never,
                        context: FindingContext::SegmentHeader,
                    }],
                    policy: options.repair_policy,
                });
            }
            Err(other) => {
                return Err(unexpected_segment_error(
                    &other,
                    &segment_path(dir, summary.id),
                ));
            }
        };
        // `inspect` scanned the segment a writer continues in full and kept
        // its rebuilt index. An index is only an accelerator, so were it
        // missing, an empty one (reads start at the first record) is correct.
        let index = inspection
            .rebuilt
            .get(&summary.id)
            .cloned()
            .unwrap_or_else(|| SparseIndex::empty(file.base_offset()));
        let time_index = inspection
            .time_indexes
            .get(&summary.id)
            .cloned()
            .unwrap_or_default();
        newest = Some(NewestSegment {
            next_offset: summary.next_offset.unwrap_or(file.base_offset()),
            len: summary.valid_len,
            index,
            index_file,
            time_index,
            file: Arc::new(file),
        });
    }
    let as_closed = actions.is_empty()
        && inspection.clean_newest.is_some()
        && inspection.clean_newest
            == live
                .last()
                .and_then(crate::inspection::SegmentSummary::extent);
    Ok(RecoveredShard {
        sealed,
        newest,
        start_offset: inspection.start_offset(),
        next_segment_id: inspection.next_segment_id,
        clean_shutdown_trusted: inspection.trusted_clean_shutdown,
        inspection,
        actions,
        clean_shutdown_kept,
        as_closed,
        epochs_absent: !epochs_named,
    })
}
