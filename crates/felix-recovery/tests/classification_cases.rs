//! Every row of the spec's repair table as a real shard on disk.
//!
//! Each record-damage kind is placed in the newest segment's last record
//! (confined), in the newest segment before an intact record, and in a
//! sealed segment; then the finding (kind, site, class, context) and the
//! open outcome under both policies are checked exactly; and zero tails.
//! Every inspection is checked to modify nothing, and so is every refused
//! open. (The rows about whole segments are in `classification_segments.rs`.)

mod common;

use std::path::Path;
use std::sync::Arc;

use common::two_segments::{NEWEST, SEALED, SPACING, inspect_options, sealed_info, shard};
use common::{
    LABEL, RecordAt, assert_reads_back, build_shard, copy_of, crc32, flip_bit, inspect_unchanged,
    open_refused, read_at, readable, seg_name, seg_path, set_len, snapshot, u32_at, write_at,
};
use felix_format::{
    CorruptionKind, CorruptionSite, MAX_PAYLOAD_BYTES, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN,
    decode_record, encode_record_header,
};
use felix_recovery::{
    Action, DamageLocation, Finding, FindingContext, OpenOptions, RepairClass, RepairPolicy,
    open_shard,
};
use felix_segment::{Record, SegmentConfig, SegmentError, SegmentFile, SegmentWriter, SparseIndex};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Damage {
    Truncated,
    RecordHeaderChecksum,
    RecordChecksum,
    OffsetOutOfOrder,
    RecordTooLarge,
}

/// Damages record `r` on disk the way the kind's name says, and returns
/// what a reader must report for it.
fn apply(damage: Damage, dir: &Path, r: &RecordAt) -> CorruptionKind {
    let path = seg_path(dir, r.segment);
    let p = r.position as usize;
    match damage {
        // An append cut off 5 bytes into the payload.
        Damage::Truncated => {
            set_len(&path, r.position + RECORD_HEADER_LEN as u64 + 5);
            CorruptionKind::Truncated {
                needed: r.len,
                available: RECORD_HEADER_LEN as u64 + 5,
            }
        }
        // Rot in payload_len, which header_crc covers.
        Damage::RecordHeaderChecksum => {
            flip_bit(&path, r.position + 3, 0);
            let bytes = std::fs::read(&path).unwrap();
            CorruptionKind::RecordHeaderChecksum {
                expected: u32_at(&bytes, p + 20),
                found: crc32(&[&bytes[p..p + 20]]),
            }
        }
        // Rot in the first payload byte.
        Damage::RecordChecksum => {
            flip_bit(&path, r.position + RECORD_HEADER_LEN as u64, 0);
            let bytes = std::fs::read(&path).unwrap();
            let end = r.end() as usize;
            CorruptionKind::RecordChecksum {
                expected: u32_at(&bytes, p + 24),
                found: crc32(&[&bytes[p..p + 24], &bytes[p + 28..end]]),
            }
        }
        // A whole header re-encoded with the next offset: both CRCs verify.
        Damage::OffsetOutOfOrder => {
            write_at(
                &path,
                r.position,
                &encode_record_header(r.offset + 1, r.offset, &common::payload(r.offset)).unwrap(),
            );
            CorruptionKind::OffsetOutOfOrder {
                expected: r.offset,
                found: r.offset + 1,
            }
        }
        // An impossible length under a re-sealed header CRC.
        Damage::RecordTooLarge => {
            let mut header = std::fs::read(&path).unwrap()[p..p + 20].to_vec();
            header[..4].copy_from_slice(&(MAX_PAYLOAD_BYTES + 1).to_be_bytes());
            write_at(&path, r.position, &header[..4]);
            write_at(&path, r.position + 20, &crc32(&[&header]).to_be_bytes());
            CorruptionKind::RecordTooLarge {
                payload_len: MAX_PAYLOAD_BYTES + 1,
                max: MAX_PAYLOAD_BYTES,
            }
        }
    }
}

/// Whether a policy may repair a finding of this class.
fn allowed(class: RepairClass, policy: RepairPolicy) -> bool {
    match class {
        RepairClass::Default => true,
        RepairClass::OptIn => policy == RepairPolicy::ChecksumTail,
        RepairClass::Never => false,
    }
}

/// Opens a copy of `dir` under `options`, expecting the newest segment to be
/// cut back to `r` and nothing else to change.
fn assert_opens_truncating(
    dir: &Path,
    options: &OpenOptions,
    r: &RecordAt,
    layout: &[Vec<RecordAt>],
    what: &str,
) {
    let copy = copy_of(dir);
    let before = snapshot(copy.path());
    let opened = open_shard(
        &felix_io::FileSystem::os(),
        copy.path(),
        LABEL,
        options,
        &common::lock(copy.path()),
    )
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    let from_len = before[&seg_name(NEWEST)].len() as u64;
    assert_eq!(
        opened.actions,
        [Action::Truncate {
            segment: NEWEST,
            path: seg_path(copy.path(), NEWEST),
            from_len,
            to_len: r.position
        }],
        "{what}"
    );
    let newest = opened.newest.as_ref().unwrap();
    assert_eq!(
        (newest.file.id(), newest.next_offset, newest.len),
        (NEWEST, r.offset, r.position),
        "{what}"
    );
    assert_eq!(opened.sealed, [sealed_info(layout)], "{what}");
    let mut expected = before.clone();
    expected
        .get_mut(&seg_name(NEWEST))
        .unwrap()
        .truncate(r.position as usize);
    assert_eq!(
        snapshot(copy.path()),
        expected,
        "{what}: only the damaged tail is cut"
    );
    assert_reads_back(copy.path(), &opened, 0, r.offset);
}

/// Checks one damaged shard against its expected finding under both
/// inspection depths and both policies.
fn check_record_case(
    dir: &Path,
    expected: &Finding,
    r: &RecordAt,
    layout: &[Vec<RecordAt>],
    what: &str,
) {
    // Only a sealed record checksum needs full_verify to be seen: sealed
    // segments are otherwise checked header by header.
    let seen_by_default = !(matches!(
        expected.context,
        FindingContext::Record {
            location: DamageLocation::Sealed,
            ..
        }
    ) && matches!(expected.kind, CorruptionKind::RecordChecksum { .. }));
    for full_verify in [false, true] {
        let what = format!("{what}, full_verify {full_verify}");
        let options = inspect_options(full_verify);
        let inspection = inspect_unchanged(dir, &options);
        if !full_verify && !seen_by_default {
            assert_eq!(inspection.findings, [], "{what}");
            // It opens, changes nothing, and the rot is caught on read.
            let copy = copy_of(dir);
            let opened = open_shard(
                &felix_io::FileSystem::os(),
                copy.path(),
                LABEL,
                &OpenOptions {
                    inspect: options,
                    repair_policy: felix_recovery::RepairPolicy::Default,
                    use_clean_shutdown: false,
                    keep_clean_shutdown: false,
                },
                &common::lock(copy.path()),
            )
            .unwrap();
            assert_eq!(opened.actions, [], "{what}");
            assert_eq!(snapshot(copy.path()), snapshot(dir), "{what}");
            let sealed = readable(copy.path(), &opened)
                .into_iter()
                .find(|s| s.id == r.segment)
                .unwrap();
            let err = read_at(copy.path(), &sealed, r.offset).unwrap_err();
            assert!(
                matches!(&err, SegmentError::Corrupt { site, kind } if *site == expected.site && *kind == expected.kind),
                "{what}: {err}"
            );
            continue;
        }
        assert_eq!(
            inspection.findings,
            std::slice::from_ref(expected),
            "{what}"
        );
        for policy in [RepairPolicy::Default, RepairPolicy::ChecksumTail] {
            let what = format!("{what}, {policy:?}");
            let open = OpenOptions {
                inspect: options,
                repair_policy: policy,
                use_clean_shutdown: false,
                keep_clean_shutdown: false,
            };
            if allowed(expected.repair, policy) {
                assert_opens_truncating(dir, &open, r, layout, &what);
            } else {
                assert_eq!(
                    open_refused(dir, &open),
                    std::slice::from_ref(expected),
                    "{what}"
                );
            }
        }
    }
}

/// Builds the shard, damages record `r` (chosen by `location`), and checks
/// it. `Truncated` followed by an intact record is not a shape a file can
/// have; see the test of a torn record embedding a record below.
fn run_case(damage: Damage, location: DamageLocation) {
    let (dir, layout) = shard();
    let (r, intact_record_at) = match location {
        DamageLocation::NewestConfined => (layout[NEWEST as usize][2], None),
        DamageLocation::NewestFollowedByIntact => (
            layout[NEWEST as usize][1],
            Some(layout[NEWEST as usize][2].position),
        ),
        DamageLocation::Sealed => (layout[SEALED as usize][2], None),
        other => unreachable!("{other:?} has its own tests: zeros are not a damage kind"),
    };
    let kind = apply(damage, dir.path(), &r);
    let file_len = std::fs::metadata(seg_path(dir.path(), r.segment))
        .unwrap()
        .len();
    let repair = match (location, damage) {
        (DamageLocation::NewestConfined, Damage::Truncated) => RepairClass::Default,
        (DamageLocation::NewestConfined, _) => RepairClass::OptIn,
        _ => RepairClass::Never,
    };
    let expected = Finding {
        kind,
        site: CorruptionSite::new(LABEL, r.segment, r.position),
        repair,
        context: FindingContext::Record {
            location,
            intact_record_at,
            tail_all_zero: false,
            tail_bytes: file_len - r.position,
            unwritten: None,
        },
    };
    check_record_case(
        dir.path(),
        &expected,
        &r,
        &layout,
        &format!("{damage:?} {location:?}"),
    );
}

#[test]
fn open_record_damage_confined_to_newest_tail_is_default_or_opt_in() {
    for damage in [
        Damage::Truncated,
        Damage::RecordHeaderChecksum,
        Damage::RecordChecksum,
        Damage::OffsetOutOfOrder,
        Damage::RecordTooLarge,
    ] {
        run_case(damage, DamageLocation::NewestConfined);
    }
}

#[test]
fn open_record_damage_followed_by_intact_record_is_never_repaired() {
    for damage in [
        Damage::RecordHeaderChecksum,
        Damage::RecordChecksum,
        Damage::OffsetOutOfOrder,
        Damage::RecordTooLarge,
    ] {
        run_case(damage, DamageLocation::NewestFollowedByIntact);
    }
}

#[test]
fn open_record_damage_in_sealed_segment_is_never_repaired() {
    for damage in [
        Damage::Truncated,
        Damage::RecordHeaderChecksum,
        Damage::RecordChecksum,
        Damage::OffsetOutOfOrder,
        Damage::RecordTooLarge,
    ] {
        run_case(damage, DamageLocation::Sealed);
    }
}

/// The `Truncated` × "followed by an intact record" row: a torn record's
/// verified length covers everything after it, so an intact-looking record
/// can only lie inside its own payload — where the spec says it is payload
/// (records may carry anything), not evidence of a later write.
#[test]
fn open_newest_torn_record_embedding_an_intact_record_is_confined_and_repaired_by_default() {
    let dir = tempfile::tempdir().unwrap();
    build_shard(dir.path(), 0, &[3, 0], SPACING);
    let (file, len) = SegmentFile::open(
        &felix_io::FileSystem::os(),
        dir.path(),
        NEWEST,
        LABEL.into(),
        felix_io::OpenMode::ReadWrite,
    )
    .unwrap();
    let config = SegmentConfig {
        index_spacing_bytes: SPACING,
        preallocate_bytes: None,
    };
    let mut writer = SegmentWriter::resume(
        Arc::new(file),
        3,
        len,
        SparseIndex::empty(3),
        // The segment is empty from offset 3: no time index yet.
        felix_segment::TimeIndex::default(),
        config,
    )
    .unwrap();
    let inner_payload = common::payload(5);
    let mut inner = encode_record_header(5, 5, &inner_payload).unwrap().to_vec();
    inner.extend_from_slice(&inner_payload);
    let mut outer = inner.clone();
    outer.extend_from_slice(b"-and-then-the-rest-of-the-payload");
    writer
        .append(&[
            Record::new(3, common::payload(3)),
            Record::new(4, outer.clone()),
        ])
        .unwrap();
    writer.sync().unwrap();
    drop(writer);

    let p4 = (SEGMENT_HEADER_LEN + RECORD_HEADER_LEN + common::payload(3).len()) as u64;
    let cut = p4 + (RECORD_HEADER_LEN + inner.len() + 3) as u64;
    set_len(&seg_path(dir.path(), NEWEST), cut);
    let bytes = std::fs::read(seg_path(dir.path(), NEWEST)).unwrap();
    let inner_at = p4 as usize + RECORD_HEADER_LEN;
    assert!(
        decode_record(&bytes[inner_at..], Some(5)).is_ok(),
        "the torn record's payload holds an intact record"
    );

    let expected = Finding {
        kind: CorruptionKind::Truncated {
            needed: (RECORD_HEADER_LEN + outer.len()) as u64,
            available: cut - p4,
        },
        site: CorruptionSite::new(LABEL, NEWEST, p4),
        repair: RepairClass::Default,
        context: FindingContext::Record {
            location: DamageLocation::NewestConfined,
            intact_record_at: None,
            tail_all_zero: false,
            tail_bytes: cut - p4,
            unwritten: None,
        },
    };
    let inspection = inspect_unchanged(dir.path(), &inspect_options(true));
    assert_eq!(inspection.findings, [expected]);
    let opened = open_shard(
        &felix_io::FileSystem::os(),
        dir.path(),
        LABEL,
        &OpenOptions::default(),
        &common::lock(dir.path()),
    )
    .unwrap();
    assert_eq!(
        opened.actions,
        [Action::Truncate {
            segment: NEWEST,
            path: seg_path(dir.path(), NEWEST),
            from_len: cut,
            to_len: p4
        }]
    );
    let newest = opened.newest.as_ref().unwrap();
    assert_eq!((newest.next_offset, newest.len), (4, p4));
    assert_reads_back(dir.path(), &opened, 0, 4);
}

/// Zeros at the end of the newest segment are space whose size reached the
/// disk before its data: never synced, so never acknowledged, and repaired
/// by default. The report still says the tail is all zeros.
#[test]
fn inspect_newest_zero_filled_tail_is_unwritten_space_repaired_by_default() {
    let (dir, layout) = shard();
    let end = common::segment_len(&layout[NEWEST as usize]);
    set_len(&seg_path(dir.path(), NEWEST), end + 100);
    let expected = Finding {
        kind: CorruptionKind::RecordHeaderChecksum {
            expected: 0,
            found: crc32(&[&[0u8; 20]]),
        },
        site: CorruptionSite::new(LABEL, NEWEST, end),
        repair: RepairClass::Default,
        context: FindingContext::Record {
            location: DamageLocation::NewestUnwritten,
            intact_record_at: None,
            tail_all_zero: true,
            tail_bytes: 100,
            unwritten: None,
        },
    };
    // The "record" that failed is the zeros after offset 5, so a repair
    // keeps every record: offsets 0..6 survive.
    let end_of_records = RecordAt {
        segment: NEWEST,
        offset: 6,
        position: end,
        len: 100,
    };
    check_record_case(dir.path(), &expected, &end_of_records, &layout, "zero tail");
}
