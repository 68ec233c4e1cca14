//! Measuring a shard directory: every segment's header, records and index,
//! and what follows its first damage, gathered into [`ShardFacts`] — values
//! that the classification and the plan read. Everything here is read-only;
//! how much of a segment is read is decided here (a sealed segment's tail
//! from its last index entry, the newest in full), what the bytes mean is
//! not.
//!
//! [`scan_segment`] is the walk of one segment's records with felix-format's
//! [`felix_format::RecordCursor`] (through felix-segment's
//! [`RecordWalk`]), at two depths: [`ScanDepth::Headers`] verifies each
//! record header's CRC, its length bound and its offset, and steps on by
//! `28 + payload_len` without checksumming payloads — the cost is
//! proportional to the number of records, which is what makes index
//! rebuilds cheap; [`ScanDepth::Full`] also verifies every record checksum.
//! Both stop at the first damage and say what and where it is.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use felix_format::time_index::TimeIndexEntry;
use felix_format::{
    Damage, FileKind, IndexEntry, RecordCursor, SEGMENT_HEADER_LEN, ScanDepth, file_name,
};
use felix_io::{FileSystem, IoError, OpenMode};
use felix_segment::{
    IndexBuilder, OpenedIndex, RecordWalk, SegmentError, SegmentFile, SparseIndex, TimeIndex,
    TimeIndexBuilder, TimeIndexCheck, TimeIndexLoadError, WalkStep, first_stale_entry, header_of,
};

use crate::classify::{Role, role};
use crate::error::{RecoveryError, unexpected_segment_error};
use crate::facts::{
    IndexFacts, RecordFacts, ScannedSegment, SegmentFacts, SegmentState, ShardFacts,
};
use crate::held::{Held, Purpose};
use crate::inspection::{IndexCheck, InspectOptions};
use crate::listing::Listing;
use crate::report::{IndexProblem, TimeIndexProblem};
use felix_format::time_index::TimeIndexHeader;

/// What a scan of one segment saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentScan {
    /// Intact records found before any damage (counting from where the scan
    /// started).
    pub records: u64,
    /// One past the last intact record's offset.
    pub next_offset: u64,
    /// One past the last intact record's last byte: where valid data ends.
    pub valid_len: u64,
    /// The file's length when scanned.
    pub file_len: u64,
    /// Index entries rebuilt on the way (for a scan from the first record).
    pub index: Vec<IndexEntry>,
    /// The time index built on the way, by the rule the writer follows (for
    /// a scan from the first record; not sealed, see
    /// [`TimeIndex::sealed`]).
    pub time_index: TimeIndex,
    /// The first damage, if the scan did not reach the end cleanly.
    pub damage: Option<Damage>,
}

/// Where a scan starts: normally the first record, or an index entry when
/// only a segment's tail needs checking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanStart {
    /// Offset of the record at `position`.
    pub offset: u64,
    /// Byte position of a record boundary.
    pub position: u64,
}

impl ScanStart {
    /// The first record of `segment`.
    pub fn first_record(segment: &SegmentFile) -> Self {
        Self {
            offset: segment.base_offset(),
            position: SEGMENT_HEADER_LEN as u64,
        }
    }
}

/// Scans `segment` (of `file_len` bytes) from `start` to its end.
///
/// Index entries are emitted every `index_spacing_bytes` as a writer would,
/// and the time index is built in the same walk by the writer's rule, so a
/// scan from the first record rebuilds both of the segment's indexes
/// exactly.
pub fn scan_segment(
    segment: &SegmentFile,
    file_len: u64,
    start: ScanStart,
    depth: ScanDepth,
    index_spacing_bytes: u64,
) -> Result<SegmentScan, IoError> {
    scan_segment_checking(
        segment,
        file_len,
        start,
        depth,
        index_spacing_bytes,
        &[],
        &[],
    )
    .map(|checked| checked.scan)
}

/// What [`scan_segment_checking`] saw: the scan, and which loaded entries
/// the records do not bear out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedScan {
    /// The scan.
    pub scan: SegmentScan,
    /// The first offset index entry the walk found no record at (with its
    /// offset), with its number, as [`first_stale_entry`] says.
    pub stale_index_entry: Option<(u64, IndexEntry)>,
    /// The number of the first time index entry the records do not bear
    /// out (see [`TimeIndexCheck`]); meaningful for a walk of the whole
    /// segment that met no damage.
    pub wrong_time_entry: Option<usize>,
}

/// [`scan_segment`] from the first record, checking on the way the entries
/// of an index file (`index_entries`) and of a time index file
/// (`time_entries`) against the records: one walk where a check of every
/// entry and a scan of the whole segment would otherwise be two or three.
pub fn scan_segment_checking(
    segment: &SegmentFile,
    file_len: u64,
    start: ScanStart,
    depth: ScanDepth,
    index_spacing_bytes: u64,
    index_entries: &[IndexEntry],
    time_entries: &[TimeIndexEntry],
) -> Result<CheckedScan, IoError> {
    let vouch = index_entries;
    let mut time_check = TimeIndexCheck::new(time_entries);
    let cursor = RecordCursor::new(start.position, start.offset, file_len, depth);
    let mut walk = RecordWalk::new(segment, cursor);
    let mut index = IndexBuilder::new(index_spacing_bytes);
    let mut time = TimeIndexBuilder::default();
    let mut records = 0u64;
    let mut next_vouched = 0usize;
    let mut stale = None;
    let damage = loop {
        match walk.step()? {
            WalkStep::Record(record) => {
                let (offset, position) = (record.header.offset, record.position);
                let timestamp = record.header.timestamp_micros;
                let due = index.observe(offset, position);
                time.observe(due, offset, timestamp);
                time_check.observe(offset, timestamp);
                records += 1;
                if stale.is_none()
                    && let Some(&entry) = vouch.get(next_vouched)
                    && entry.position <= position
                {
                    if entry.position == position && entry.offset == offset {
                        next_vouched += 1;
                    } else {
                        // The walk passed the entry's position without a
                        // record beginning there with its offset.
                        stale = Some((next_vouched as u64, entry));
                    }
                }
            }
            WalkStep::End => break None,
            WalkStep::Damage(damage) => break Some(damage),
        }
    };
    // An entry the walk never reached (damage or the end came first) is
    // vouched for by nothing.
    if stale.is_none()
        && let Some(&entry) = vouch.get(next_vouched)
    {
        stale = Some((next_vouched as u64, entry));
    }
    let cursor = walk.cursor();
    debug_assert!(cursor.position() <= file_len && cursor.position() >= start.position);
    debug_assert_eq!(cursor.next_offset() - start.offset, records);
    Ok(CheckedScan {
        scan: SegmentScan {
            records,
            next_offset: cursor.next_offset(),
            valid_len: cursor.position(),
            file_len,
            index: index.into_entries(),
            time_index: time.finish(),
            damage,
        },
        stale_index_entry: stale,
        wrong_time_entry: time_check.finish(),
    })
}

/// Measures the shard directory `dir` whose names `listing` holds. With
/// `use_clean_shutdown`, a clean-shutdown record that lists exactly the
/// directory's segments stands for every sealed one (see `clean.rs` for why
/// that is safe); the newest is always scanned in full.
/// For an open (`purpose.for_writer`), the newest segment's descriptors
/// come back too (see `held.rs`).
pub(crate) fn gather(
    fs: &FileSystem,
    dir: &Path,
    shard: &Arc<str>,
    listing: Listing,
    options: &InspectOptions,
    purpose: Purpose<'_>,
) -> Result<(ShardFacts, Option<Held>), RecoveryError> {
    let (trusted, clean_shutdown_note) = if purpose.use_clean_shutdown && listing.clean_shutdown {
        crate::clean::trusted_sealed(fs, dir, &listing.segments, options)
    } else {
        (None, None)
    };
    // A key the caller read just before is the file's: taken as read,
    // unless it read none (a file that appeared since is read).
    let key = listing.key_file.then(|| match purpose.key {
        Some(known) if *known != crate::StoredKey::Missing => known.clone(),
        _ => crate::key_file::read_key_file(fs, dir),
    });
    let log_start = if listing.log_start {
        crate::log_start::read_log_start(fs, dir)
    } else {
        crate::log_start::StoredLogStart::Missing
    };
    let raft_state = listing
        .raft_state
        .then(|| crate::raft_state::read_raft_state(fs, dir));
    let raft_snapshot = listing
        .raft_snapshot
        .then(|| crate::raft_state::read_raft_snapshot(fs, dir));
    let ids = &listing.segments;
    let count = ids.len();
    // A trusted record lists the last segment as one the shard wrote, not
    // an abandoned one.
    let last_abandoned = match ids.last() {
        Some(&last) if count > 1 && trusted.is_none() => {
            looks_abandoned(fs, &segment_path(dir, last))
        }
        _ => false,
    };
    let mut segments = Vec::with_capacity(count);
    let mut held = None;
    for (i, &id) in ids.iter().enumerate() {
        let role = role(i, count, last_abandoned);
        let listed = trusted
            .as_ref()
            .and_then(|t| t.get(i))
            .filter(|_| !role.newest);
        let state = match listed {
            Some(extent) => SegmentState::Trusted(*extent),
            None => {
                let keep = (purpose.for_writer && role.newest).then_some(&mut held);
                measure_segment(fs, dir, shard, id, role, options, keep)?
            }
        };
        segments.push(SegmentFacts { id, role, state });
    }
    let facts = ShardFacts {
        listing,
        trusted_clean_shutdown: trusted.is_some(),
        clean_newest: trusted.as_ref().and_then(|t| t.last().copied()),
        clean_shutdown_note,
        key,
        log_start,
        raft_state,
        raft_snapshot,
        segments,
    };
    Ok((facts, held))
}

/// Opens segment `id` read-only and measures it; with `keep`, read-write,
/// keeping its descriptors there for the writer (see `held.rs`).
fn measure_segment(
    fs: &FileSystem,
    dir: &Path,
    shard: &Arc<str>,
    id: u64,
    role: Role,
    options: &InspectOptions,
    keep: Option<&mut Option<Held>>,
) -> Result<SegmentState, RecoveryError> {
    let path = segment_path(dir, id);
    let writable = keep
        .is_some()
        .then(|| crate::held::open_segment(fs, dir, id, shard))
        .flatten();
    let read_write = writable.is_some();
    let opened = match writable {
        Some(opened) => Ok(opened),
        None => SegmentFile::open(fs, dir, id, Arc::clone(shard), OpenMode::Read),
    };
    let mut index_file = None;
    let (segment, file_len) = match opened {
        Ok(opened) => opened,
        Err(SegmentError::Corrupt { kind, .. }) => {
            let file_len = felix_segment::fs::open(fs, &path, OpenMode::Read)
                .and_then(|f| felix_segment::fs::file_len(&*f, &path))?;
            return Ok(SegmentState::HeaderDamaged {
                file_len,
                kind,
                abandoned_shape: role.last && looks_abandoned(fs, &path),
            });
        }
        Err(other) => return Err(segment_open_error(other, &path)),
    };
    // Only a sealed segment has a time index file, and only a walk of all
    // its records can say whether it is right: loaded first, for the walk
    // to check.
    let checks_time =
        !role.newest && (options.full_verify || options.index_check == IndexCheck::EveryEntry);
    let loaded_time = checks_time.then(|| {
        let most_records = file_len.saturating_sub(SEGMENT_HEADER_LEN as u64)
            / felix_format::RECORD_HEADER_LEN as u64;
        TimeIndex::load_any(fs, &segment.time_index_path(), most_records)
    });
    let time_entries = match &loaded_time {
        Some(Ok((_, index))) => index.entries(),
        _ => &[],
    };
    let (scan, index, wrong_time, whole) = if role.newest {
        let first = ScanStart::first_record(&segment);
        let spacing = options.index_spacing_bytes;
        let scan = scan_segment(&segment, file_len, first, ScanDepth::Full, spacing)?;
        let kept = read_write.then_some(&mut index_file);
        let index = check_index(&segment, scan.valid_len, kept)?;
        (scan, index, None, true)
    } else {
        let (scan, index, wrong) = scan_sealed(&segment, file_len, options, time_entries)?;
        let whole = wrong.is_some();
        (scan, index, wrong.flatten(), whole)
    };
    let time_index = match &loaded_time {
        Some(loaded) if scan.damage.is_none() => {
            time_index_problem(&segment, &scan, loaded, wrong_time)
        }
        _ => None,
    };
    let tail = match &scan.damage {
        Some(damage) => Some(crate::tail::measure(
            &segment,
            file_len,
            damage,
            role.newest,
        )?),
        None => None,
    };
    let base_offset = segment.base_offset();
    if let Some(keep) = keep.filter(|_| read_write) {
        *keep = Some(Held {
            id,
            segment,
            index: index_file,
        });
    }
    Ok(SegmentState::Scanned(Box::new(ScannedSegment {
        base_offset,
        file_len,
        records: RecordFacts {
            next_offset: scan.next_offset,
            valid_len: scan.valid_len,
            entries: scan.index,
            time_index: whole.then_some(scan.time_index),
            damage: scan.damage,
        },
        index,
        time_index,
        tail,
    })))
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

/// Loads a segment's index; why it cannot be used, when it cannot.
fn load_index(
    segment: &SegmentFile,
    valid_len: u64,
    kept: Option<&mut Option<OpenedIndex>>,
) -> Result<SparseIndex, IndexProblem> {
    if let Some(loaded) = kept.and_then(|kept| crate::held::load_index(segment, valid_len, kept)) {
        return loaded.map_err(|err| IndexProblem::of_load_error(&err));
    }
    // An unreadable index is rebuilt like a missing one (the data is what
    // matters), but it is reported as what it is.
    SparseIndex::load(
        segment.fs(),
        &segment.index_path(),
        segment.base_offset(),
        valid_len,
    )
    .map_err(|err| IndexProblem::of_load_error(&err))
}

/// Whether a segment's index loads and the records vouch for every entry
/// (see [`first_stale_entry`]). An index may lag its segment, but never lead
/// it or disagree with it.
fn check_index(
    segment: &SegmentFile,
    valid_len: u64,
    kept: Option<&mut Option<OpenedIndex>>,
) -> Result<IndexFacts, RecoveryError> {
    let index = match load_index(segment, valid_len, kept) {
        Ok(index) => index,
        Err(problem) => return Ok(unusable(problem)),
    };
    Ok(
        match first_stale_entry(segment, valid_len, index.entries())? {
            None => IndexFacts {
                usable: true,
                problem: None,
            },
            Some((number, entry)) => unusable(stale_entry(number, entry)),
        },
    )
}

fn unusable(problem: IndexProblem) -> IndexFacts {
    IndexFacts {
        usable: false,
        problem: Some(problem),
    }
}

/// The problem of entry `number` of an index, which the records do not
/// vouch for.
fn stale_entry(number: u64, entry: IndexEntry) -> IndexProblem {
    IndexProblem::StaleEntry {
        number,
        offset: entry.offset,
        position: entry.position,
    }
}

/// Scans a sealed segment: its tail from the last index entry with headers
/// only, or, when asked to check every index entry or every record, the
/// whole segment from its first record in one walk that checks every entry
/// of its index and of its time index (`time`, the file's, when it loaded)
/// on the way. When the tail scan meets damage, the segment is rescanned
/// from its first record before anything is called damage: a clean rescan
/// means the index entry was stale, not the data.
///
/// Returns, for a walk that checked the time index, the first of its
/// entries the records do not bear out (`Some(None)`: all do).
fn scan_sealed(
    segment: &SegmentFile,
    file_len: u64,
    options: &InspectOptions,
    time: &[TimeIndexEntry],
) -> Result<(SegmentScan, IndexFacts, Option<Option<usize>>), RecoveryError> {
    let first = ScanStart::first_record(segment);
    let spacing = options.index_spacing_bytes;
    if options.full_verify {
        let checked = scan_segment_checking(
            segment,
            file_len,
            first,
            ScanDepth::Full,
            spacing,
            &[],
            time,
        )?;
        let index = check_index(segment, checked.scan.valid_len, None)?;
        return Ok((checked.scan, index, Some(checked.wrong_time_entry)));
    }
    let index = load_index(segment, file_len, None);
    if options.index_check == IndexCheck::EveryEntry {
        let entries = index.as_ref().map_or(&[][..], SparseIndex::entries);
        let checked = scan_segment_checking(
            segment,
            file_len,
            first,
            ScanDepth::Headers,
            spacing,
            entries,
            time,
        )?;
        let facts = match (index, checked.stale_index_entry) {
            (Err(problem), _) => unusable(problem),
            // Damage the walk met is reported as such and does not make the
            // index stale.
            (Ok(_), _) if checked.scan.damage.is_some() => usable(),
            (Ok(_), Some((number, entry))) => unusable(stale_entry(number, entry)),
            (Ok(_), None) => usable(),
        };
        return Ok((checked.scan, facts, Some(checked.wrong_time_entry)));
    }
    if let Ok(index) = &index
        && let Some(&IndexEntry { offset, position }) = index.entries().last()
    {
        let tail_start = ScanStart { offset, position };
        let tail = scan_segment(segment, file_len, tail_start, ScanDepth::Headers, spacing)?;
        if tail.damage.is_none() {
            return Ok((tail, usable(), None));
        }
        let full = scan_segment(segment, file_len, first, ScanDepth::Headers, spacing)?;
        // Damage found by the rescan from the first record is reported as
        // such and does not make the index stale.
        let facts = match full.damage {
            None => unusable(IndexProblem::Stale),
            Some(_) => usable(),
        };
        return Ok((full, facts, None));
    }
    let scan = scan_segment(segment, file_len, first, ScanDepth::Headers, spacing)?;
    let facts = match index {
        Ok(_) => usable(),
        Err(problem) => unusable(problem),
    };
    Ok((scan, facts, None))
}

fn usable() -> IndexFacts {
    IndexFacts {
        usable: true,
        problem: None,
    }
}

/// What is wrong with a sealed segment's time index file, as a walk of
/// its whole segment that met no damage (`scan`) found it: `loaded` is the
/// file as it decoded, `wrong` the first entry the records did not bear
/// out. A missing file is no problem (the reference implementation writes
/// none).
fn time_index_problem(
    segment: &SegmentFile,
    scan: &SegmentScan,
    loaded: &Result<(TimeIndexHeader, TimeIndex), TimeIndexLoadError>,
    wrong: Option<usize>,
) -> Option<TimeIndexProblem> {
    let extent = felix_format::SegmentExtent {
        id: segment.id(),
        base_offset: segment.base_offset(),
        next_offset: scan.next_offset,
        len: scan.valid_len,
    };
    match loaded {
        Err(err) => TimeIndexProblem::of_load_error(err),
        Ok((header, _)) if *header != header_of(&extent) => {
            Some(TimeIndexProblem::Stale { found: *header })
        }
        Ok(_) => wrong.map(|number| TimeIndexProblem::Wrong {
            number: number as u64,
        }),
    }
}

/// Whether the file at `path` has the shape of an interrupted creation:
/// shorter than a header, or a header's length of zeros.
fn looks_abandoned(fs: &FileSystem, path: &Path) -> bool {
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

/// The path of segment `id`'s file in `dir`.
pub(crate) fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(file_name(id, FileKind::Segment).as_str())
}
