//! Reading a shard directory and deciding what is wrong with it, without
//! modifying a byte.
//!
//! Every descriptor opened here is read-only, so an inspection is safe to
//! run on a shard another process owns, and `felix-store verify` can promise
//! that it changes nothing.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use felix_format::{
    CorruptionKind, CorruptionSite, FileKind, IndexEntry, SegmentExtent, file_name,
};
use felix_io::{FileSystem, OpenMode};
use felix_segment::{SegmentError, SegmentFile, SparseIndex};

use crate::classify::{DamageLocation, RepairClass, RepairPolicy, is_repairable_tail};
use crate::error::{RecoveryError, unexpected_segment_error};
use crate::index_check::{IndexCheck, check_index, first_stale_entry, stale_entry_note};
use crate::key_file::{StoredKey, read_key_file};
use crate::listing::{Listing, list_dir, looks_abandoned};
use crate::report::{Action, Finding, FindingContext, IndexProblem, Note, TemporaryKind};
use crate::scan::{ScanDepth, ScanStart, SegmentScan, scan_segment, tail_is_zero};

/// How to inspect a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InspectOptions {
    /// Spacing of index entries when an index is rebuilt. Default
    /// [`felix_segment::DEFAULT_INDEX_SPACING_BYTES`].
    pub index_spacing_bytes: u64,
    /// Scan every record of every segment in full, not only the newest
    /// segment (sealed segments otherwise get a header check, index
    /// validation and a scan of their tail). Default `false`.
    pub full_verify: bool,
    /// How much of each sealed segment's index is checked against its
    /// records. Default [`IndexCheck::LastEntry`], what an open does; with
    /// `full_verify` every entry is checked whatever this says.
    pub index_check: IndexCheck,
}

impl Default for InspectOptions {
    fn default() -> Self {
        Self {
            index_spacing_bytes: felix_segment::DEFAULT_INDEX_SPACING_BYTES,
            full_verify: false,
            index_check: IndexCheck::LastEntry,
        }
    }
}

/// What one segment holds, as it will be after the planned repairs.
///
/// It holds the parts of the segment's extent that are known, not a
/// [`SegmentExtent`]: damage can hide its first offset (a damaged header)
/// or its next one (damage in a sealed segment), while its id and lengths
/// are always known. [`Self::extent`] is the extent when every part is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentSummary {
    /// Segment id.
    pub id: u64,
    /// First offset, from the header (`None` when the header is damaged).
    pub base_offset: Option<u64>,
    /// One past the last intact record (`None` when unknown).
    pub next_offset: Option<u64>,
    /// The file's length now.
    pub file_len: u64,
    /// Where its intact records end: its length after the plan's repairs.
    pub valid_len: u64,
    /// Whether it is the newest segment (the one a writer continues).
    pub newest: bool,
    /// Whether its index can be used as it is.
    pub index_ok: bool,
    /// Whether the segment is removed by the plan (abandoned creation).
    pub removed: bool,
}

impl SegmentSummary {
    /// Records the segment holds, when known.
    pub fn records(&self) -> Option<u64> {
        self.extent().map(|extent| extent.records())
    }

    /// The segment's extent after the plan (its length is
    /// [`Self::valid_len`]), when both its offsets are known.
    pub fn extent(&self) -> Option<SegmentExtent> {
        Some(SegmentExtent {
            id: self.id,
            base_offset: self.base_offset?,
            next_offset: self.next_offset?,
            len: self.valid_len,
        })
    }

    /// A sealed segment as a trusted clean-shutdown record lists it.
    pub(crate) fn trusted(extent: SegmentExtent) -> Self {
        Self {
            id: extent.id,
            base_offset: Some(extent.base_offset),
            next_offset: Some(extent.next_offset),
            file_len: extent.len,
            valid_len: extent.len,
            newest: false,
            // Not loaded here: a read loads (or rebuilds) it on first use.
            index_ok: true,
            removed: false,
        }
    }
}

/// The result of inspecting a shard directory.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The file system the shard lives on.
    pub fs: FileSystem,
    /// The shard directory.
    pub dir: PathBuf,
    /// The label errors carry.
    pub shard: Arc<str>,
    /// Segments in id order.
    pub segments: Vec<SegmentSummary>,
    /// Damage to data, in the order found.
    pub findings: Vec<Finding>,
    /// Facts that are not damage.
    pub notes: Vec<Note>,
    /// What a repair would do.
    pub plan: Vec<Action>,
    /// The shard's exact key, from its key file, when the directory has a
    /// usable one naming a key whose directory name is the directory's own
    /// (see [`Note::KeyFileUnusable`] and [`Note::KeyFileDisagrees`] for
    /// why it may be `None` with a file present).
    pub key: Option<felix_format::ShardKey>,
    /// Rebuilt indexes by segment id, for the plan's `RebuildIndex` actions
    /// and for the newest segment.
    pub(crate) rebuilt: BTreeMap<u64, SparseIndex>,
    /// Whether the directory holds a clean-shutdown file, which an open for
    /// writing removes.
    pub(crate) clean_shutdown_present: bool,
    /// Our temporaries, which an open for writing removes.
    pub(crate) temporaries: Vec<(PathBuf, TemporaryKind)>,
    /// Segments whose index name is not a regular file: no rebuilt index
    /// is written there.
    pub(crate) unwritable_indexes: HashSet<u64>,
}

/// Reads the key file into `inspection.key`, noting why not when it cannot
/// be used. A directory whose name cannot be compared (`.`, `/`) takes the
/// key as it is.
fn read_key(inspection: &mut Inspection) {
    match read_key_file(&inspection.fs, &inspection.dir) {
        StoredKey::Missing => {}
        StoredKey::Unusable(problem) => {
            inspection.notes.push(Note::KeyFileUnusable { problem });
        }
        StoredKey::Key(key) => {
            let expected_dir = key.dir_name();
            match inspection.dir.file_name().map(|n| n.to_string_lossy()) {
                Some(name) if name != expected_dir.as_str() => {
                    inspection.notes.push(Note::KeyFileDisagrees {
                        key,
                        expected_dir,
                        dir_name: name.into_owned(),
                    });
                }
                _ => inspection.key = Some(key),
            }
        }
    }
}

impl Inspection {
    /// Findings `policy` does not allow repairing: if any, opening fails.
    pub fn blocking(&self, policy: RepairPolicy) -> Vec<&Finding> {
        self.findings
            .iter()
            .filter(|f| !policy.allows(f.repair))
            .collect()
    }

    /// Whether opening with `policy` would succeed.
    pub fn would_open(&self, policy: RepairPolicy) -> bool {
        self.blocking(policy).is_empty()
    }

    /// The segments that remain after the plan.
    pub fn live_segments(&self) -> impl Iterator<Item = &SegmentSummary> {
        self.segments.iter().filter(|s| !s.removed)
    }

    /// The shard's first offset after the plan, if any segment remains.
    pub fn base_offset(&self) -> Option<u64> {
        self.live_segments().next()?.base_offset
    }

    /// The shard's next offset after the plan, if known.
    pub fn next_offset(&self) -> Option<u64> {
        self.live_segments().last()?.next_offset
    }

    /// Records across the remaining segments, if every count is known.
    pub fn records(&self) -> Option<u64> {
        self.live_segments().map(SegmentSummary::records).sum()
    }
}

/// Inspects the shard directory `dir` on the file system `fs`, reading but
/// never writing.
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
    inspect_with(fs, dir, shard, options, false)
}

/// [`inspect`], optionally trusting a clean-shutdown file that lists
/// exactly the directory's segments for every segment but the newest (see
/// `clean.rs` for why that is safe). The newest is always scanned in full.
pub(crate) fn inspect_with(
    fs: &FileSystem,
    dir: &Path,
    shard: &str,
    options: &InspectOptions,
    use_clean_shutdown: bool,
) -> Result<Inspection, RecoveryError> {
    let shard: Arc<str> = Arc::from(shard);
    let mut inspection = Inspection {
        fs: fs.clone(),
        dir: dir.to_path_buf(),
        shard: Arc::clone(&shard),
        segments: Vec::new(),
        findings: Vec::new(),
        notes: Vec::new(),
        plan: Vec::new(),
        key: None,
        rebuilt: BTreeMap::new(),
        clean_shutdown_present: false,
        temporaries: Vec::new(),
        unwritable_indexes: HashSet::new(),
    };
    let listing = list_dir(fs, dir)?;
    inspection.clean_shutdown_present = listing.clean_shutdown;
    let trusted = if use_clean_shutdown && listing.clean_shutdown {
        crate::clean::trusted_sealed(&mut inspection, &listing.segments, options)
    } else {
        None
    };
    inspection.notes.extend(listing.notes());
    if listing.key_file {
        read_key(&mut inspection);
    }
    inspection.temporaries = listing
        .temporaries
        .iter()
        .map(|(name, kind)| (dir.join(name), *kind))
        .collect();
    let Listing {
        segments: ids,
        unwritable_indexes,
        ..
    } = listing;
    inspection.unwritable_indexes = unwritable_indexes;

    let count = ids.len();
    // When the last segment is an abandoned creation, the one before it is
    // the newest: it is what a writer continues, so it is scanned in full
    // and its damage classified as the newest segment's. (A trusted record
    // lists the last segment as one the shard wrote, not an abandoned one.)
    let abandoned_last = match ids.last() {
        Some(&last) if count > 1 && trusted.is_none() => {
            looks_abandoned(fs, &dir.join(file_name(last, FileKind::Segment).as_str()))
        }
        _ => false,
    };
    let newest_at = if abandoned_last {
        count.saturating_sub(2)
    } else {
        count.saturating_sub(1)
    };
    let mut previous: Option<(u64, Option<u64>)> = None;
    for (i, &id) in ids.iter().enumerate() {
        let role = Role {
            last: i + 1 == count,
            newest: i == newest_at,
            older_exists: i > 0,
        };
        let listed = trusted
            .as_ref()
            .and_then(|t| t.get(i))
            .filter(|_| !role.newest);
        let summary = match listed {
            Some(s) => SegmentSummary::trusted(*s),
            None => inspect_segment(&mut inspection, id, role, options)?,
        };
        if let (Some((prev_id, Some(prev_next))), Some(base)) = (previous, summary.base_offset)
            && prev_next != base
        {
            inspection.findings.push(Finding {
                kind: CorruptionKind::OffsetOutOfOrder {
                    expected: prev_next,
                    found: base,
                },
                site: CorruptionSite::new(&*shard, id, 0),
                repair: RepairClass::Never,
                context: FindingContext::OffsetGap {
                    previous_segment: prev_id,
                },
            });
        }
        if !summary.removed {
            previous = Some((id, summary.next_offset));
        }
        inspection.segments.push(summary);
    }
    // A trusted record covers sealed segments only: if the segment it
    // lists last is going (an interrupted creation), the one a writer would
    // continue was never scanned, so everything is inspected instead.
    let last_live = inspection.live_segments().last().map(|s| s.id);
    if trusted.is_some() && last_live != ids.last().copied() {
        let mut full = inspect_with(fs, dir, &shard, options, false)?;
        full.notes.push(Note::CleanShutdownUnused {
            reason: crate::clean::CleanShutdownUnused::NewestRemoved,
        });
        return Ok(full);
    }
    Ok(inspection)
}

/// A segment's place in the shard, as far as recovery is concerned.
#[derive(Debug, Clone, Copy)]
struct Role {
    /// The highest id: the only file that can be an abandoned creation.
    last: bool,
    /// The segment a writer continues: scanned in full, its confined tail
    /// damage repairable.
    newest: bool,
    /// Whether a segment with a lower id exists.
    older_exists: bool,
}

fn inspect_segment(
    inspection: &mut Inspection,
    id: u64,
    role: Role,
    options: &InspectOptions,
) -> Result<SegmentSummary, RecoveryError> {
    let Role { newest, .. } = role;
    let shard = Arc::clone(&inspection.shard);
    let (segment, file_len) = match SegmentFile::open(
        &inspection.fs,
        &inspection.dir,
        id,
        Arc::clone(&shard),
        OpenMode::Read,
    ) {
        Ok(opened) => opened,
        Err(SegmentError::Corrupt { site, kind }) => {
            let path = inspection
                .dir
                .join(file_name(id, FileKind::Segment).as_str());
            let file_len = felix_segment::fs::open(&inspection.fs, &path, OpenMode::Read)
                .and_then(|f| felix_segment::fs::file_len(&*f, &path))?;
            return Ok(header_damage(
                inspection, id, path, file_len, site, kind, role,
            ));
        }
        Err(other) => {
            let path = inspection
                .dir
                .join(file_name(id, FileKind::Segment).as_str());
            return Err(segment_open_error(other, &path));
        }
    };
    let base = segment.base_offset();
    let (scan, index_ok) = if newest {
        let scan = scan_segment(
            &segment,
            file_len,
            ScanStart::first_record(&segment),
            ScanDepth::Full,
            options.index_spacing_bytes,
        )?;
        let index_ok = check_index(inspection, &segment, scan.valid_len)?;
        (scan, index_ok)
    } else {
        scan_sealed(inspection, &segment, file_len, options)?
    };

    if let Some(damage) = scan.damage {
        let located = if newest {
            crate::unwritten::locate_newest(&segment, file_len, &damage)?
        } else {
            crate::unwritten::Located {
                location: DamageLocation::Sealed,
                intact_record_at: None,
                unwritten: None,
            }
        };
        let repair = is_repairable_tail(&damage.kind, located.location);
        let tail_all_zero = tail_is_zero(&segment, file_len, damage.position)?;
        inspection.findings.push(Finding {
            kind: damage.kind,
            site: segment.site(damage.position),
            repair,
            context: FindingContext::Record {
                location: located.location,
                intact_record_at: located.intact_record_at,
                tail_all_zero,
                tail_bytes: file_len - damage.position,
                unwritten: located.unwritten,
            },
        });
        if repair != RepairClass::Never {
            inspection.plan.push(Action::Truncate {
                segment: id,
                path: segment.path().to_path_buf(),
                from_len: file_len,
                to_len: damage.position,
            });
        }
    }
    if !index_ok && !inspection.unwritable_indexes.contains(&id) {
        inspection.plan.push(Action::RebuildIndex {
            segment: id,
            path: segment.index_path(),
            entries: scan.index.len(),
        });
    }
    // The newest segment's index goes to its writer; a rebuilt one to disk.
    if newest || !index_ok {
        inspection
            .rebuilt
            .insert(id, SparseIndex::from_entries(base, scan.index));
    }
    let known_next = scan.damage.is_none() || newest;
    Ok(SegmentSummary {
        id,
        base_offset: Some(base),
        next_offset: known_next.then_some(scan.next_offset),
        file_len,
        valid_len: scan.valid_len,
        newest,
        index_ok,
        removed: false,
    })
}

/// Why a segment could not be opened: a name that leads to something other
/// than a regular file (a symbolic link to a FIFO, say) is reported as what
/// it is; anything else as the I/O error it is.
fn segment_open_error(err: SegmentError, path: &Path) -> RecoveryError {
    match err {
        SegmentError::Io(err) => match err.not_regular_file() {
            Some(not_regular) => RecoveryError::NotRegularFile {
                path: err.path().to_path_buf(),
                not_regular,
            },
            None => RecoveryError::Io(err),
        },
        other => unexpected_segment_error(&other, path),
    }
}

/// Records damage to a segment header, recognising an abandoned creation.
fn header_damage(
    inspection: &mut Inspection,
    id: u64,
    path: PathBuf,
    file_len: u64,
    site: CorruptionSite,
    kind: CorruptionKind,
    role: Role,
) -> SegmentSummary {
    let Role {
        last,
        newest,
        older_exists,
    } = role;
    // The last segment, shorter than its header or exactly a header's length
    // of zeros (its size reached the disk, its bytes did not), was being
    // created when the process died: the header is synced before any record
    // is written, so no record can live in it. A complete header with a bad
    // field is damage, never an interrupted creation.
    let abandoned = last && looks_abandoned(&inspection.fs, &path);
    let (repair, context) = if abandoned {
        let repair = if older_exists {
            RepairClass::Default
        } else {
            RepairClass::Never
        };
        (
            repair,
            FindingContext::AbandonedSegment {
                older_segment_exists: older_exists,
            },
        )
    } else {
        (RepairClass::Never, FindingContext::SegmentHeader)
    };
    inspection.findings.push(Finding {
        kind,
        site,
        repair,
        context,
    });
    let removed = abandoned && older_exists;
    if removed {
        inspection.plan.push(Action::RemoveSegment {
            segment: id,
            path,
            len: file_len,
        });
    }
    SegmentSummary {
        id,
        base_offset: None,
        next_offset: None,
        file_len,
        valid_len: 0,
        newest,
        index_ok: false,
        removed,
    }
}

/// Loads a segment's index, noting why when it cannot be used.
pub(crate) fn load_index(
    inspection: &mut Inspection,
    segment: &SegmentFile,
    valid_len: u64,
) -> Result<SparseIndex, ()> {
    match SparseIndex::load(
        segment.fs(),
        &segment.index_path(),
        segment.base_offset(),
        valid_len,
    ) {
        Ok(index) => Ok(index),
        Err(err) => {
            // An unreadable index is rebuilt like a missing one (the data is
            // what matters), but it is reported as what it is.
            inspection.notes.push(Note::IndexUnusable {
                segment: segment.id(),
                reason: IndexProblem::of_load_error(&err),
            });
            Err(())
        }
    }
}

/// Scans a sealed segment: its tail from the last index entry with headers
/// only, or everything in full when asked. When the tail scan meets damage,
/// the segment is rescanned from its first record before anything is called
/// damage: a clean rescan means the index entry was stale, not the data.
/// With [`IndexCheck::EveryEntry`] the entries are first vouched for by a
/// walk from the first record up to the last entry, which the tail scan then
/// continues, so the segment is still read once.
fn scan_sealed(
    inspection: &mut Inspection,
    segment: &SegmentFile,
    file_len: u64,
    options: &InspectOptions,
) -> Result<(SegmentScan, bool), RecoveryError> {
    let first = ScanStart::first_record(segment);
    let spacing = options.index_spacing_bytes;
    if options.full_verify {
        let scan = scan_segment(segment, file_len, first, ScanDepth::Full, spacing)?;
        let index_ok = check_index(inspection, segment, scan.valid_len)?;
        return Ok((scan, index_ok));
    }
    let index = load_index(inspection, segment, file_len);
    if let Ok(index) = &index
        && let Some(&IndexEntry { offset, position }) = index.entries().last()
    {
        if options.index_check == IndexCheck::EveryEntry
            && let Some((number, entry)) = first_stale_entry(segment, file_len, index.entries())?
        {
            // The walk that failed to vouch for the entry may have met real
            // damage: a full scan says which. Damage is reported as such and
            // does not make the index stale.
            let full = scan_segment(segment, file_len, first, ScanDepth::Headers, spacing)?;
            let stale = full.damage.is_none();
            if stale {
                inspection
                    .notes
                    .push(stale_entry_note(segment.id(), number, entry));
            }
            return Ok((full, !stale));
        }
        let tail_start = ScanStart { offset, position };
        let tail = scan_segment(segment, file_len, tail_start, ScanDepth::Headers, spacing)?;
        if tail.damage.is_none() {
            return Ok((tail, true));
        }
        let full = scan_segment(segment, file_len, first, ScanDepth::Headers, spacing)?;
        let stale = full.damage.is_none();
        if stale {
            inspection.notes.push(Note::IndexUnusable {
                segment: segment.id(),
                reason: IndexProblem::Stale,
            });
        }
        return Ok((full, !stale));
    }
    let scan = scan_segment(segment, file_len, first, ScanDepth::Headers, spacing)?;
    Ok((scan, index.is_ok()))
}
