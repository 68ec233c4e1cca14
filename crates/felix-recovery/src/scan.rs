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

use felix_format::{
    Damage, FileKind, IndexEntry, RecordCursor, SEGMENT_HEADER_LEN, ScanDepth, file_name,
};
use felix_io::{FileSystem, IoError, OpenMode};
use felix_segment::{
    IndexBuilder, RecordWalk, SegmentError, SegmentFile, SparseIndex, WalkStep, first_stale_entry,
};

use crate::classify::{Role, role};
use crate::error::{RecoveryError, unexpected_segment_error};
use crate::facts::{
    IndexFacts, RecordFacts, ScannedSegment, SegmentFacts, SegmentState, ShardFacts,
};
use crate::inspection::{IndexCheck, InspectOptions};
use crate::listing::Listing;
use crate::report::IndexProblem;

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
/// so a scan from the first record rebuilds the segment's index exactly.
pub fn scan_segment(
    segment: &SegmentFile,
    file_len: u64,
    start: ScanStart,
    depth: ScanDepth,
    index_spacing_bytes: u64,
) -> Result<SegmentScan, IoError> {
    let cursor = RecordCursor::new(start.position, start.offset, file_len, depth);
    let mut walk = RecordWalk::new(segment, cursor);
    let mut index = IndexBuilder::new(index_spacing_bytes);
    let mut records = 0u64;
    let damage = loop {
        match walk.step()? {
            WalkStep::Record(record) => {
                index.observe(record.header.offset, record.position);
                records += 1;
            }
            WalkStep::End => break None,
            WalkStep::Damage(damage) => break Some(damage),
        }
    };
    let cursor = walk.cursor();
    debug_assert!(cursor.position() <= file_len && cursor.position() >= start.position);
    debug_assert_eq!(cursor.next_offset() - start.offset, records);
    Ok(SegmentScan {
        records,
        next_offset: cursor.next_offset(),
        valid_len: cursor.position(),
        file_len,
        index: index.into_entries(),
        damage,
    })
}

/// Measures the shard directory `dir` whose names `listing` holds. With
/// `use_clean_shutdown`, a clean-shutdown record that lists exactly the
/// directory's segments stands for every sealed one (see `clean.rs` for why
/// that is safe); the newest is always scanned in full.
pub(crate) fn gather(
    fs: &FileSystem,
    dir: &Path,
    shard: &Arc<str>,
    listing: Listing,
    options: &InspectOptions,
    use_clean_shutdown: bool,
) -> Result<ShardFacts, RecoveryError> {
    let (trusted, clean_shutdown_note) = if use_clean_shutdown && listing.clean_shutdown {
        crate::clean::trusted_sealed(fs, dir, &listing.segments, options)
    } else {
        (None, None)
    };
    let key = listing
        .key_file
        .then(|| crate::key_file::read_key_file(fs, dir));
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
    for (i, &id) in ids.iter().enumerate() {
        let role = role(i, count, last_abandoned);
        let listed = trusted
            .as_ref()
            .and_then(|t| t.get(i))
            .filter(|_| !role.newest);
        let state = match listed {
            Some(extent) => SegmentState::Trusted(*extent),
            None => measure_segment(fs, dir, shard, id, role, options)?,
        };
        segments.push(SegmentFacts { id, role, state });
    }
    Ok(ShardFacts {
        listing,
        trusted_clean_shutdown: trusted.is_some(),
        clean_newest: trusted.as_ref().and_then(|t| t.last().copied()),
        clean_shutdown_note,
        key,
        segments,
    })
}

/// Opens segment `id` read-only and measures it.
fn measure_segment(
    fs: &FileSystem,
    dir: &Path,
    shard: &Arc<str>,
    id: u64,
    role: Role,
    options: &InspectOptions,
) -> Result<SegmentState, RecoveryError> {
    let path = segment_path(dir, id);
    let (segment, file_len) =
        match SegmentFile::open(fs, dir, id, Arc::clone(shard), OpenMode::Read) {
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
    let (scan, index) = if role.newest {
        let first = ScanStart::first_record(&segment);
        let spacing = options.index_spacing_bytes;
        let scan = scan_segment(&segment, file_len, first, ScanDepth::Full, spacing)?;
        let index = check_index(&segment, scan.valid_len)?;
        (scan, index)
    } else {
        scan_sealed(&segment, file_len, options)?
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
    Ok(SegmentState::Scanned(Box::new(ScannedSegment {
        base_offset: segment.base_offset(),
        file_len,
        records: RecordFacts {
            next_offset: scan.next_offset,
            valid_len: scan.valid_len,
            entries: scan.index,
            damage: scan.damage,
        },
        index,
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
fn load_index(segment: &SegmentFile, valid_len: u64) -> Result<SparseIndex, IndexProblem> {
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
fn check_index(segment: &SegmentFile, valid_len: u64) -> Result<IndexFacts, RecoveryError> {
    let index = match load_index(segment, valid_len) {
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
/// only, or everything in full when asked. When the tail scan meets damage,
/// the segment is rescanned from its first record before anything is called
/// damage: a clean rescan means the index entry was stale, not the data.
/// With [`IndexCheck::EveryEntry`] the entries are first vouched for by a
/// walk from the first record up to the last entry, which the tail scan then
/// continues, so the segment is still read once.
fn scan_sealed(
    segment: &SegmentFile,
    file_len: u64,
    options: &InspectOptions,
) -> Result<(SegmentScan, IndexFacts), RecoveryError> {
    let first = ScanStart::first_record(segment);
    let spacing = options.index_spacing_bytes;
    if options.full_verify {
        let scan = scan_segment(segment, file_len, first, ScanDepth::Full, spacing)?;
        let index = check_index(segment, scan.valid_len)?;
        return Ok((scan, index));
    }
    let index = load_index(segment, file_len);
    if let Ok(index) = &index
        && let Some(&IndexEntry { offset, position }) = index.entries().last()
    {
        // Damage found by the rescan from the first record is reported as
        // such and does not make the index stale.
        let rescan = |problem: IndexProblem| -> Result<(SegmentScan, IndexFacts), RecoveryError> {
            let full = scan_segment(segment, file_len, first, ScanDepth::Headers, spacing)?;
            let facts = match full.damage {
                None => unusable(problem),
                Some(_) => IndexFacts {
                    usable: true,
                    problem: None,
                },
            };
            Ok((full, facts))
        };
        if options.index_check == IndexCheck::EveryEntry
            && let Some((number, entry)) = first_stale_entry(segment, file_len, index.entries())?
        {
            // The walk that failed to vouch for the entry may have met real
            // damage: the rescan says which.
            return rescan(stale_entry(number, entry));
        }
        let tail_start = ScanStart { offset, position };
        let tail = scan_segment(segment, file_len, tail_start, ScanDepth::Headers, spacing)?;
        if tail.damage.is_none() {
            let facts = IndexFacts {
                usable: true,
                problem: None,
            };
            return Ok((tail, facts));
        }
        return rescan(IndexProblem::Stale);
    }
    let scan = scan_segment(segment, file_len, first, ScanDepth::Headers, spacing)?;
    let facts = match index {
        Ok(_) => IndexFacts {
            usable: true,
            problem: None,
        },
        Err(problem) => unusable(problem),
    };
    Ok((scan, facts))
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
