//! Every single-bit flip of every byte of a small three-segment shard — its
//! segments and their indexes.
//!
//! A flip in a segment must be reported with the kind its byte's role
//! implies, at the right segment and position, and classified as the spec
//! says; a flip in an index is never damage. Whatever happens, no flipped
//! byte is ever read back as data.

mod common;

use std::collections::BTreeMap;

use common::{
    LABEL, RecordAt, build_shard, crc32, expected_record_kind, index_entries, index_name,
    index_path, inspect_unchanged, materialise, open_refused, read_damage, seg_name, seg_path,
    shard_layout, snapshot, try_read_back, u16_at, u32_at, u64_at,
};
use felix_format::{
    CorruptionKind, CorruptionSite, INDEX_ENTRY_LEN, INDEX_HEADER_LEN, IndexEntry,
    SEGMENT_HEADER_LEN,
};
use felix_recovery::{
    Action, DamageLocation, Finding, FindingContext, IndexProblem, InspectOptions, Note,
    OpenOptions, RecoveredShard, RepairClass, open_shard,
};
use felix_segment::SegmentError;

/// Three segments of three records (offsets 0..9), payloads of 9 to 17 bytes.
const SEGMENTS: &[u64] = &[3, 3, 3];
/// Two index entries per segment: the first record and the last.
const SPACING: u64 = 64;
const NEWEST: u64 = 2;
const RECORDS: u64 = 9;

struct Shard {
    files: BTreeMap<String, Vec<u8>>,
    layout: Vec<Vec<RecordAt>>,
}

impl Shard {
    fn build() -> Self {
        let dir = tempfile::tempdir().unwrap();
        build_shard(dir.path(), 0, SEGMENTS, SPACING);
        let files = snapshot(dir.path());
        let layout = shard_layout(0, SEGMENTS);
        assert_eq!(
            files.len(),
            8,
            "three segments, three indexes, the sealed two's time indexes"
        );
        for (id, records) in layout.iter().enumerate() {
            let id = id as u64;
            assert_eq!(
                files[&seg_name(id)].len() as u64,
                common::segment_len(records),
                "layout model"
            );
            assert_eq!(
                files[&index_name(id)].len(),
                INDEX_HEADER_LEN + INDEX_ENTRY_LEN * index_entries(records, SPACING).len(),
                "index model"
            );
        }
        Self { files, layout }
    }

    /// A fresh directory holding the shard with `name` replaced by `bytes`.
    fn with(&self, name: &str, bytes: &[u8]) -> tempfile::TempDir {
        let mut files = self.files.clone();
        files.insert(name.to_owned(), bytes.to_vec());
        materialise(&files)
    }

    fn entries(&self, segment: u64) -> Vec<IndexEntry> {
        index_entries(&self.layout[segment as usize], SPACING)
    }
}

fn full() -> InspectOptions {
    InspectOptions {
        index_spacing_bytes: SPACING,
        full_verify: true,
        ..InspectOptions::default()
    }
}

fn quick() -> InspectOptions {
    InspectOptions {
        index_spacing_bytes: SPACING,
        full_verify: false,
        ..InspectOptions::default()
    }
}

/// The one finding a flip at `byte` of segment `segment` (now `flipped`)
/// must produce, and the record it lies in (`None` for the header).
fn expected_segment_finding(
    shard: &Shard,
    segment: u64,
    byte: u64,
    flipped: &[u8],
) -> (Finding, Option<RecordAt>) {
    let file_len = flipped.len() as u64;
    if byte < SEGMENT_HEADER_LEN as u64 {
        // Header fields, in the order the spec lists them. The header CRC
        // covers bytes 0..24, but magic, version and flags are checked first.
        let kind = match byte {
            0..4 => CorruptionKind::SegmentMagic {
                found: u32_at(flipped, 0),
            },
            4..6 => CorruptionKind::SegmentVersion {
                found: u16_at(flipped, 4),
            },
            6..8 => CorruptionKind::SegmentFlags {
                found: u16_at(flipped, 6),
            },
            8..28 => CorruptionKind::SegmentHeaderChecksum {
                expected: u32_at(flipped, 24),
                found: crc32(&[&flipped[..24]]),
            },
            _ => CorruptionKind::SegmentReserved {
                found: u32_at(flipped, 28),
            },
        };
        let site = CorruptionSite::new(LABEL, segment, 0);
        return (
            Finding {
                kind,
                site,
                repair: RepairClass::Never,
                context: FindingContext::SegmentHeader,
            },
            None,
        );
    }
    let records = &shard.layout[segment as usize];
    let k = records
        .iter()
        .position(|r| r.position <= byte && byte < r.end())
        .unwrap();
    let r = records[k];
    let (location, intact_record_at, repair) = if segment != NEWEST {
        (DamageLocation::Sealed, None, RepairClass::Never)
    } else if k + 1 == records.len() {
        (DamageLocation::NewestConfined, None, RepairClass::OptIn)
    } else {
        (
            DamageLocation::NewestFollowedByIntact,
            Some(records[k + 1].position),
            RepairClass::Never,
        )
    };
    let finding = Finding {
        kind: expected_record_kind(flipped, &r, byte),
        site: CorruptionSite::new(LABEL, segment, r.position),
        repair,
        context: FindingContext::Record {
            location,
            intact_record_at,
            tail_all_zero: false,
            tail_bytes: file_len - r.position,
            unwritten: None,
        },
    };
    (finding, Some(r))
}

/// Asserts every record reads back with its own payload, except those
/// `fails` names, which must fail naming `damage` — never returning data.
/// Returns how many failed reads blamed their index entry (`StaleIndex`)
/// rather than the data.
fn assert_reads(
    dir: &std::path::Path,
    shard: &RecoveredShard,
    damage: Option<(&CorruptionSite, CorruptionKind)>,
    fails: impl Fn(u64) -> bool,
    what: &str,
) -> usize {
    let mut blamed_index = 0;
    let reads = try_read_back(dir, shard);
    assert_eq!(
        reads.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
        (0..reads.len() as u64).collect::<Vec<_>>()
    );
    for (offset, read) in reads {
        match read {
            Ok(payload) => {
                assert!(
                    !fails(offset),
                    "{what}: offset {offset} read back although its record is damaged"
                );
                assert_eq!(
                    payload,
                    common::payload(offset),
                    "{what}: offset {offset} read back wrong data"
                );
            }
            Err(err) => {
                assert!(
                    fails(offset),
                    "{what}: offset {offset} failed to read: {err}"
                );
                assert_eq!(read_damage(&err), damage, "{what}: offset {offset}: {err}");
                blamed_index += usize::from(matches!(err, SegmentError::StaleIndex { .. }));
            }
        }
    }
    blamed_index
}

#[test]
fn open_shard_segment_bit_flip_is_reported_at_its_site_and_refused() {
    let shard = Shard::build();
    let (mut flips, mut header, mut confined, mut followed, mut sealed) = (0, 0, 0, 0, 0);
    let (mut unseen_by_default, mut blamed_index) = (0, 0);
    for segment in 0..SEGMENTS.len() as u64 {
        let original = &shard.files[&seg_name(segment)];
        let last_entry = shard.entries(segment).last().unwrap().position;
        for byte in 0..original.len() as u64 {
            for bit in 0..8 {
                flips += 1;
                let what = format!("segment {segment} byte {byte} bit {bit}");
                let mut flipped = original.clone();
                flipped[byte as usize] ^= 1 << bit;
                let (expected, record) = expected_segment_finding(&shard, segment, byte, &flipped);
                let dir = shard.with(&seg_name(segment), &flipped);

                let inspection = inspect_unchanged(dir.path(), &full());
                assert_eq!(
                    inspection.findings,
                    std::slice::from_ref(&expected),
                    "{what}"
                );
                for note in &inspection.notes {
                    assert!(
                        matches!(note, Note::IndexUnusable { segment: s, .. } if *s == segment),
                        "{what}: {note}"
                    );
                }
                match expected.context {
                    FindingContext::SegmentHeader => header += 1,
                    FindingContext::Record {
                        location: DamageLocation::NewestConfined,
                        ..
                    } => confined += 1,
                    FindingContext::Record {
                        location: DamageLocation::NewestFollowedByIntact,
                        ..
                    } => followed += 1,
                    _ => sealed += 1,
                }

                // No single-bit flip is ever repaired by default: a flip can
                // never pass the header CRC, so it never looks like Truncated.
                assert_eq!(
                    open_refused(
                        dir.path(),
                        &OpenOptions {
                            inspect: full(),
                            repair_policy: felix_recovery::RepairPolicy::Default,
                            use_clean_shutdown: false,
                            keep_clean_shutdown: false,
                        }
                    ),
                    std::slice::from_ref(&expected),
                    "{what}"
                );

                // Default options check sealed segments only from their last
                // index entry, headers only: rot before that (or in a
                // payload) is left for reads to catch.
                let header_crc_damage =
                    matches!(expected.kind, CorruptionKind::RecordHeaderChecksum { .. });
                let seen_by_default = record.is_none_or(|r| {
                    segment == NEWEST || (header_crc_damage && r.position >= last_entry)
                });
                if seen_by_default {
                    assert_eq!(
                        open_refused(dir.path(), &OpenOptions::default()),
                        std::slice::from_ref(&expected),
                        "{what}"
                    );
                } else {
                    unseen_by_default += 1;
                    let r = record.unwrap();
                    let before = snapshot(dir.path());
                    let opened = open_shard(
                        &felix_io::FileSystem::os(),
                        dir.path(),
                        LABEL,
                        &OpenOptions {
                            inspect: quick(),
                            repair_policy: felix_recovery::RepairPolicy::Default,
                            use_clean_shutdown: false,
                            keep_clean_shutdown: false,
                        },
                        &common::lock(dir.path()),
                    )
                    .unwrap();
                    assert_eq!(
                        (opened.inspection.findings.len(), opened.actions.len()),
                        (0, 0),
                        "{what}"
                    );
                    assert_eq!(snapshot(dir.path()), before, "{what}");
                    // A read fails if it passes the damaged header on its way
                    // from its index entry, or is for the damaged record.
                    let entries = shard.entries(segment);
                    let fails = |offset: u64| {
                        let in_segment = shard.layout[segment as usize]
                            .iter()
                            .any(|x| x.offset == offset);
                        let passes = || {
                            entries
                                .iter()
                                .rev()
                                .find(|e| e.offset <= offset)
                                .is_some_and(|e| e.position <= r.position)
                        };
                        in_segment
                            && (offset == r.offset
                                || (header_crc_damage && offset > r.offset && passes()))
                    };
                    blamed_index += assert_reads(
                        dir.path(),
                        &opened,
                        Some((&expected.site, expected.kind)),
                        fails,
                        &what,
                    );
                }

                // Opting in repairs exactly the damage confined to the newest
                // segment's last record, and loses only that record.
                let opt_in = OpenOptions {
                    inspect: full(),
                    repair_policy: felix_recovery::RepairPolicy::ChecksumTail,
                    use_clean_shutdown: false,
                    keep_clean_shutdown: false,
                };
                if expected.repair == RepairClass::OptIn {
                    let r = record.unwrap();
                    let opened = open_shard(
                        &felix_io::FileSystem::os(),
                        dir.path(),
                        LABEL,
                        &opt_in,
                        &common::lock(dir.path()),
                    )
                    .unwrap();
                    let newest = opened.newest.as_ref().unwrap();
                    assert_eq!(
                        (newest.file.id(), newest.next_offset, newest.len),
                        (NEWEST, RECORDS - 1, r.position),
                        "{what}"
                    );
                    assert_eq!(
                        opened.actions[0],
                        Action::Truncate {
                            segment: NEWEST,
                            path: seg_path(dir.path(), NEWEST),
                            from_len: original.len() as u64,
                            to_len: r.position
                        }
                    );
                    let after = snapshot(dir.path());
                    assert_eq!(after[&seg_name(NEWEST)], original[..r.position as usize]);
                    // Every other file is as it was, except the newest
                    // index, which loses its entry for the dropped record.
                    let kept: Vec<IndexEntry> = shard
                        .entries(NEWEST)
                        .into_iter()
                        .filter(|e| e.position < r.position)
                        .collect();
                    let index_len = INDEX_HEADER_LEN + INDEX_ENTRY_LEN * kept.len();
                    assert_eq!(
                        after[&index_name(NEWEST)],
                        shard.files[&index_name(NEWEST)][..index_len]
                    );
                    for id in 0..NEWEST {
                        assert_eq!(after[&seg_name(id)], shard.files[&seg_name(id)]);
                        assert_eq!(after[&index_name(id)], shard.files[&index_name(id)]);
                    }
                    assert_eq!(assert_reads(dir.path(), &opened, None, |_| false, &what), 0);
                } else {
                    assert_eq!(open_refused(dir.path(), &opt_in), [expected], "{what}");
                }
            }
        }
    }
    println!(
        "{flips} segment bit flips: {header} in segment headers, {confined} confined to the newest tail, \
         {followed} followed by an intact record, {sealed} in sealed segments; {unseen_by_default} left to reads by \
         default options ({blamed_index} reads of them blamed a correct index entry)"
    );
    assert_eq!(
        flips,
        8 * shard
            .layout
            .iter()
            .map(|r| common::segment_len(r))
            .sum::<u64>()
    );
    assert_eq!(header, 8 * 32 * 3);
}

/// What loading index `segment` (now `flipped`, with a flip at `byte`) must
/// report, or `None` when the flip is in the ignored reserved field.
fn expected_index_problem(
    shard: &Shard,
    segment: u64,
    byte: u64,
    flipped: &[u8],
) -> Option<IndexProblem> {
    let records = &shard.layout[segment as usize];
    let base = records[0].offset;
    let kind = match byte {
        0..4 => CorruptionKind::IndexMagic {
            found: u32_at(flipped, 0),
        },
        4..6 => CorruptionKind::IndexVersion {
            found: u16_at(flipped, 4),
        },
        6..8 => CorruptionKind::IndexFlags {
            found: u16_at(flipped, 6),
        },
        8..16 => CorruptionKind::IndexBaseOffset {
            expected: base,
            found: u64_at(flipped, 8),
        },
        16..24 => return None,
        _ => {
            // The spec's rules for entries: strictly ascending, at or after
            // the segment's first record, inside the segment. A flipped entry
            // that still obeys them names a place that is not its record.
            let segment_len = common::segment_len(records);
            let mut previous: Option<IndexEntry> = None;
            for (i, raw) in flipped[INDEX_HEADER_LEN..]
                .chunks_exact(INDEX_ENTRY_LEN)
                .enumerate()
            {
                let entry = IndexEntry {
                    offset: u64_at(raw, 0),
                    position: u64_at(raw, 8),
                };
                let ascending =
                    previous.is_none_or(|p| entry.offset > p.offset && entry.position > p.position);
                let inside = entry.offset >= base
                    && entry.position >= SEGMENT_HEADER_LEN as u64
                    && entry.position < segment_len;
                if !(ascending && inside) {
                    return Some(IndexProblem::Invalid(
                        CorruptionKind::IndexEntryOutOfOrder {
                            entry: i as u64,
                            offset: entry.offset,
                            position: entry.position,
                        },
                    ));
                }
                previous = Some(entry);
            }
            // The one flipped entry is the first the records do not vouch
            // for: every earlier one is the writer's.
            let number = (byte - INDEX_HEADER_LEN as u64) / INDEX_ENTRY_LEN as u64;
            let at = INDEX_HEADER_LEN + number as usize * INDEX_ENTRY_LEN;
            return Some(IndexProblem::StaleEntry {
                number,
                offset: u64_at(&flipped[at..], 0),
                position: u64_at(&flipped[at..], 8),
            });
        }
    };
    Some(IndexProblem::Invalid(kind))
}

#[test]
fn open_shard_index_bit_flip_is_rebuilt_and_invisible_to_readers() {
    let shard = Shard::build();
    let (mut flips, mut invalid, mut stale, mut ignored) = (0, 0, 0, 0);
    for segment in 0..SEGMENTS.len() as u64 {
        let original = &shard.files[&index_name(segment)];
        for byte in 0..original.len() as u64 {
            for bit in 0..8 {
                flips += 1;
                let what = format!("index {segment} byte {byte} bit {bit}");
                let mut flipped = original.clone();
                flipped[byte as usize] ^= 1 << bit;
                let problem = expected_index_problem(&shard, segment, byte, &flipped);
                let dir = shard.with(&index_name(segment), &flipped);

                let opened = open_shard(
                    &felix_io::FileSystem::os(),
                    dir.path(),
                    LABEL,
                    &OpenOptions {
                        inspect: full(),
                        repair_policy: felix_recovery::RepairPolicy::Default,
                        use_clean_shutdown: false,
                        keep_clean_shutdown: false,
                    },
                    &common::lock(dir.path()),
                )
                .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(
                    opened.inspection.findings,
                    [],
                    "{what}: an index is never damage"
                );
                let after = snapshot(dir.path());
                match problem {
                    Some(reason) => {
                        if matches!(reason, IndexProblem::StaleEntry { .. }) {
                            stale += 1
                        } else {
                            invalid += 1
                        }
                        assert_eq!(
                            opened.inspection.notes,
                            [Note::IndexUnusable { segment, reason }],
                            "{what}"
                        );
                        let entries = shard.entries(segment).len();
                        assert_eq!(
                            opened.actions,
                            [Action::RebuildIndex {
                                segment,
                                path: index_path(dir.path(), segment),
                                entries
                            }],
                            "{what}"
                        );
                        // Rebuilt with the writer's spacing, the index is the
                        // writer's own again, byte for byte; nothing else moved.
                        assert_eq!(after, shard.files, "{what}");
                    }
                    None => {
                        ignored += 1;
                        assert_eq!(
                            (opened.inspection.notes.len(), opened.actions.len()),
                            (0, 0),
                            "{what}"
                        );
                        assert_eq!(after[&index_name(segment)], flipped);
                    }
                }
                assert_eq!(assert_reads(dir.path(), &opened, None, |_| false, &what), 0);
            }
        }
    }
    println!(
        "{flips} index bit flips: {invalid} invalid, {stale} stale, {ignored} in the ignored reserved field"
    );
    assert_eq!(
        flips,
        8 * shard
            .files
            .iter()
            .filter(|(n, _)| n.ends_with(".index"))
            .map(|(_, b)| b.len())
            .sum::<usize>()
    );
}

/// With default options a sealed segment's index is checked only through its
/// last entry, so a flip elsewhere in it can survive recovery. Reads through
/// such an entry fail; none returns a wrong record.
#[test]
fn open_shard_default_options_index_bit_flip_never_reads_wrong_data() {
    let shard = Shard::build();
    let (mut flips, mut surviving, mut failed_reads, mut blamed_data) = (0, 0, 0, 0);
    for segment in 0..SEGMENTS.len() as u64 {
        let original = &shard.files[&index_name(segment)];
        let last_entry_byte = (original.len() - INDEX_ENTRY_LEN) as u64;
        for byte in 0..original.len() as u64 {
            for bit in 0..8 {
                flips += 1;
                let what = format!("index {segment} byte {byte} bit {bit}");
                let mut flipped = original.clone();
                flipped[byte as usize] ^= 1 << bit;
                let problem = expected_index_problem(&shard, segment, byte, &flipped);
                let dir = shard.with(&index_name(segment), &flipped);
                let opened = open_shard(
                    &felix_io::FileSystem::os(),
                    dir.path(),
                    LABEL,
                    &OpenOptions {
                        inspect: quick(),
                        repair_policy: felix_recovery::RepairPolicy::Default,
                        use_clean_shutdown: false,
                        keep_clean_shutdown: false,
                    },
                    &common::lock(dir.path()),
                )
                .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(opened.inspection.findings, [], "{what}");
                let stale_entry = matches!(problem, Some(IndexProblem::StaleEntry { .. }));
                let undetected = segment != NEWEST && stale_entry && byte < last_entry_byte;
                // A sealed segment's last entry is checked by scanning the
                // tail from it, which finds the index stale as a whole; the
                // newest segment's entries are each checked against its scan.
                let problem = if segment != NEWEST && stale_entry {
                    Some(IndexProblem::Stale)
                } else {
                    problem
                };
                if undetected {
                    surviving += 1;
                    assert_eq!(
                        (opened.inspection.notes.len(), opened.actions.len()),
                        (0, 0),
                        "{what}"
                    );
                } else if let Some(reason) = problem {
                    assert_eq!(
                        opened.inspection.notes,
                        [Note::IndexUnusable { segment, reason }],
                        "{what}"
                    );
                    assert_eq!(snapshot(dir.path()), shard.files, "{what}");
                }
                for (offset, read) in try_read_back(dir.path(), &opened) {
                    match read {
                        Ok(payload) => {
                            assert_eq!(payload, common::payload(offset), "{what}: offset {offset}")
                        }
                        Err(err) => {
                            assert!(undetected, "{what}: offset {offset}: {err}");
                            failed_reads += 1;
                            match err {
                                SegmentError::StaleIndex { .. } => {}
                                // felix-segment blames the data, not the entry,
                                // when a stale entry points at the first record.
                                SegmentError::Corrupt {
                                    site,
                                    kind: CorruptionKind::OffsetOutOfOrder { .. },
                                } if site.position == SEGMENT_HEADER_LEN as u64 => {
                                    blamed_data += 1;
                                }
                                other => panic!("{what}: offset {offset}: {other}"),
                            }
                        }
                    }
                }
            }
        }
    }
    println!(
        "{flips} index bit flips with default options: {surviving} left a stale sealed entry, \
         {failed_reads} reads refused through one ({blamed_data} reported as data corruption)"
    );
}
