//! Every row of the spec's repair table as a real shard on disk.
//!
//! Each record-damage kind is placed in the newest segment's last record
//! (confined), in the newest segment before an intact record, and in a
//! sealed segment; then the finding (kind, site, class, context) and the
//! open outcome under both policies are checked exactly. Around them: zero
//! tails, abandoned segment creations, segment-header damage, gaps between
//! segments and stray files. Every inspection is checked to modify nothing,
//! and so is every refused open.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{
    LABEL, RecordAt, assert_reads_back, build_shard, copy_of, crc32, flip_bit, index_name,
    index_path, inspect_unchanged, open_refused, read_at, readable, seg_name, seg_path, set_len,
    shard_layout, snapshot, u32_at, write_at,
};
use felix_format::{
    CorruptionKind, CorruptionSite, IndexEntry, MAX_PAYLOAD_BYTES, RECORD_HEADER_LEN,
    SEGMENT_HEADER_LEN, SegmentExtent, SegmentHeader, decode_record, encode_record_header,
};
use felix_recovery::{
    Action, DamageLocation, Finding, FindingContext, InspectOptions, Note, OpenOptions,
    RepairClass, RepairPolicy, open_shard,
};
use felix_segment::{Record, SegmentConfig, SegmentError, SegmentFile, SegmentWriter, SparseIndex};

/// A sealed segment (offsets 0..3) and the newest (offsets 3..6); one index
/// entry each.
const SEGMENTS: &[u64] = &[3, 3];
const SPACING: u64 = 4096;
const SEALED: u64 = 0;
const NEWEST: u64 = 1;

fn inspect_options(full_verify: bool) -> InspectOptions {
    InspectOptions {
        index_spacing_bytes: SPACING,
        full_verify,
        ..InspectOptions::default()
    }
}

fn shard() -> (tempfile::TempDir, Vec<Vec<RecordAt>>) {
    let dir = tempfile::tempdir().unwrap();
    build_shard(dir.path(), 0, SEGMENTS, SPACING);
    (dir, shard_layout(0, SEGMENTS))
}

fn sealed_info(layout: &[Vec<RecordAt>]) -> SegmentExtent {
    SegmentExtent {
        id: SEALED,
        base_offset: 0,
        next_offset: 3,
        len: common::segment_len(&layout[SEALED as usize]),
    }
}

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

/// A newest segment no longer than its header, created after a sealed one,
/// is an interrupted creation: removed by default, and the sealed segment
/// becomes the newest and takes writes again.
#[test]
fn open_abandoned_newest_segment_with_older_segment_is_removed_by_default() {
    let mut cases = 0;
    for len in (0..SEGMENT_HEADER_LEN as u64).map(Some).chain([None]) {
        let dir = tempfile::tempdir().unwrap();
        build_shard(dir.path(), 0, &[3, 3, 0], SPACING);
        let layout = shard_layout(0, &[3, 3]);
        let abandoned = seg_path(dir.path(), 2);
        // `None`: a header-sized file of zeros (extended, never written).
        let (file_len, kind) = match len {
            Some(len) => {
                set_len(&abandoned, len);
                (
                    len,
                    CorruptionKind::Truncated {
                        needed: SEGMENT_HEADER_LEN as u64,
                        available: len,
                    },
                )
            }
            None => {
                std::fs::write(&abandoned, [0u8; SEGMENT_HEADER_LEN]).unwrap();
                (
                    SEGMENT_HEADER_LEN as u64,
                    CorruptionKind::SegmentMagic { found: 0 },
                )
            }
        };
        cases += 1;
        let what = format!("abandoned segment of {file_len} bytes ({})", kind.name());
        let expected = Finding {
            kind,
            site: CorruptionSite::new(LABEL, 2, 0),
            repair: RepairClass::Default,
            context: FindingContext::AbandonedSegment {
                older_segment_exists: true,
            },
        };
        let inspection = inspect_unchanged(dir.path(), &inspect_options(false));
        assert_eq!(inspection.findings, [expected], "{what}");
        let remove = Action::RemoveSegment {
            segment: 2,
            path: abandoned.clone(),
            len: file_len,
        };
        assert_eq!(inspection.plan, std::slice::from_ref(&remove), "{what}");
        assert_eq!(inspection.next_offset(), Some(6), "{what}");

        let before = snapshot(dir.path());
        let opened = open_shard(
            &felix_io::FileSystem::os(),
            dir.path(),
            LABEL,
            &OpenOptions::default(),
            &common::lock(dir.path()),
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(opened.actions, [remove], "{what}");
        let mut expected_files = before;
        expected_files.remove(&seg_name(2));
        expected_files.remove(&index_name(2));
        assert_eq!(
            snapshot(dir.path()),
            expected_files,
            "{what}: the segment and its index are gone, nothing else changed"
        );

        assert_eq!(opened.sealed, [sealed_info(&layout)], "{what}");
        let newest = opened.newest.unwrap();
        let seg1_len = common::segment_len(&layout[1]);
        assert_eq!(
            (
                newest.file.id(),
                newest.file.base_offset(),
                newest.next_offset,
                newest.len
            ),
            (1, 3, 6, seg1_len),
            "{what}"
        );
        assert_eq!(
            newest.index,
            SparseIndex::from_entries(
                3,
                vec![IndexEntry {
                    offset: 3,
                    position: 32
                }]
            ),
            "{what}"
        );

        // Writable: a writer resumes it and the next record lands after
        // offset 5.
        let config = SegmentConfig {
            index_spacing_bytes: SPACING,
            preallocate_bytes: None,
        };
        let mut writer = SegmentWriter::resume(
            newest.file,
            newest.next_offset,
            newest.len,
            newest.index,
            newest.time_index,
            config,
        )
        .unwrap();
        let appended = writer
            .append(&[Record::new(6, common::payload(6))])
            .unwrap();
        let record_len = (RECORD_HEADER_LEN + common::payload(6).len()) as u64;
        assert_eq!(
            (
                appended.first_offset,
                appended.last_offset,
                appended.end_position
            ),
            (6, 6, seg1_len + record_len)
        );
        writer.sync().unwrap();
        let read = writer.read(3, 1 << 20).unwrap();
        assert_eq!(
            read.iter()
                .map(|r| (r.offset, r.payload.to_vec()))
                .collect::<Vec<_>>(),
            (3..7).map(|o| (o, common::payload(o))).collect::<Vec<_>>()
        );
    }
    println!("{cases} abandoned-segment cases");
}

#[test]
fn open_abandoned_only_segment_is_refused() {
    for len in 0..SEGMENT_HEADER_LEN as u64 {
        let dir = tempfile::tempdir().unwrap();
        drop(
            SegmentWriter::create(
                &felix_io::FileSystem::os(),
                dir.path(),
                0,
                0,
                SegmentConfig::default(),
                LABEL.into(),
            )
            .unwrap(),
        );
        set_len(&seg_path(dir.path(), 0), len);
        let expected = Finding {
            kind: CorruptionKind::Truncated {
                needed: SEGMENT_HEADER_LEN as u64,
                available: len,
            },
            site: CorruptionSite::new(LABEL, 0, 0),
            repair: RepairClass::Never,
            context: FindingContext::AbandonedSegment {
                older_segment_exists: false,
            },
        };
        let inspection = inspect_unchanged(dir.path(), &inspect_options(false));
        assert_eq!(
            inspection.findings,
            std::slice::from_ref(&expected),
            "{len} bytes"
        );
        assert_eq!(inspection.plan, [], "{len} bytes");
        for policy in [RepairPolicy::Default, RepairPolicy::ChecksumTail] {
            let options = OpenOptions {
                inspect: inspect_options(false),
                repair_policy: policy,
                use_clean_shutdown: false,
                keep_clean_shutdown: false,
            };
            assert_eq!(
                open_refused(dir.path(), &options),
                std::slice::from_ref(&expected),
                "{len} bytes"
            );
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum HeaderField {
    Magic,
    VersionOne,
    Flags,
    Checksum,
    Reserved,
}

/// Damages segment `id`'s header field and returns what a reader must report.
fn damage_header(dir: &Path, id: u64, field: HeaderField) -> CorruptionKind {
    let path = seg_path(dir, id);
    let mut header: [u8; SEGMENT_HEADER_LEN] = std::fs::read(&path).unwrap()[..SEGMENT_HEADER_LEN]
        .try_into()
        .unwrap();
    let reseal = |h: &mut [u8; SEGMENT_HEADER_LEN]| {
        let crc = crc32(&[&h[..24]]);
        h[24..28].copy_from_slice(&crc.to_be_bytes());
    };
    let kind = match field {
        HeaderField::Magic => {
            header[3] ^= 1;
            CorruptionKind::SegmentMagic {
                found: u32::from_be_bytes(*b"FLSF"),
            }
        }
        // As an unreleased v1 writer sealed it.
        HeaderField::VersionOne => {
            header[4..6].copy_from_slice(&1u16.to_be_bytes());
            reseal(&mut header);
            CorruptionKind::SegmentVersion { found: 1 }
        }
        // As a writer that knows a flag this build does not would seal it.
        HeaderField::Flags => {
            header[6..8].copy_from_slice(&1u16.to_be_bytes());
            reseal(&mut header);
            CorruptionKind::SegmentFlags { found: 1 }
        }
        // Rot in base_offset, which the CRC covers.
        HeaderField::Checksum => {
            header[15] ^= 1;
            CorruptionKind::SegmentHeaderChecksum {
                expected: u32_at(&header, 24),
                found: crc32(&[&header[..24]]),
            }
        }
        HeaderField::Reserved => {
            header[31] = 1;
            CorruptionKind::SegmentReserved { found: 1 }
        }
    };
    write_at(&path, 0, &header);
    kind
}

#[test]
fn open_segment_header_damage_is_never_repaired() {
    let mut cases = 0;
    for field in [
        HeaderField::Magic,
        HeaderField::VersionOne,
        HeaderField::Flags,
        HeaderField::Checksum,
        HeaderField::Reserved,
    ] {
        for id in [SEALED, NEWEST] {
            cases += 1;
            let (dir, _) = shard();
            let kind = damage_header(dir.path(), id, field);
            let what = format!("{field:?} in segment {id}");
            let expected = Finding {
                kind,
                site: CorruptionSite::new(LABEL, id, 0),
                repair: RepairClass::Never,
                context: FindingContext::SegmentHeader,
            };
            for full_verify in [false, true] {
                let inspection = inspect_unchanged(dir.path(), &inspect_options(full_verify));
                assert_eq!(
                    inspection.findings,
                    std::slice::from_ref(&expected),
                    "{what}"
                );
                for policy in [RepairPolicy::Default, RepairPolicy::ChecksumTail] {
                    let options = OpenOptions {
                        inspect: inspect_options(full_verify),
                        repair_policy: policy,
                        use_clean_shutdown: false,
                        keep_clean_shutdown: false,
                    };
                    assert_eq!(
                        open_refused(dir.path(), &options),
                        std::slice::from_ref(&expected),
                        "{what}"
                    );
                }
            }
        }
    }
    println!("{cases} segment-header cases");
}

#[test]
fn open_gap_between_segments_is_offset_out_of_order_never() {
    let dir = tempfile::tempdir().unwrap();
    build_shard(dir.path(), 0, &[3, 3, 3], SPACING);
    std::fs::remove_file(seg_path(dir.path(), 1)).unwrap();
    std::fs::remove_file(index_path(dir.path(), 1)).unwrap();
    // Its time index too, so only the gap is left to find.
    std::fs::remove_file(dir.path().join(format!("{:020}.timeindex", 1))).unwrap();
    let expected = Finding {
        kind: CorruptionKind::OffsetOutOfOrder {
            expected: 3,
            found: 6,
        },
        site: CorruptionSite::new(LABEL, 2, 0),
        repair: RepairClass::Never,
        context: FindingContext::OffsetGap {
            previous_segment: 0,
        },
    };
    for full_verify in [false, true] {
        let inspection = inspect_unchanged(dir.path(), &inspect_options(full_verify));
        assert_eq!(inspection.findings, std::slice::from_ref(&expected));
        assert_eq!(inspection.notes, []);
        for policy in [RepairPolicy::Default, RepairPolicy::ChecksumTail] {
            let options = OpenOptions {
                inspect: inspect_options(full_verify),
                repair_policy: policy,
                use_clean_shutdown: false,
                keep_clean_shutdown: false,
            };
            assert_eq!(
                open_refused(dir.path(), &options),
                std::slice::from_ref(&expected)
            );
        }
    }
}

#[test]
fn open_stray_files_and_orphan_indexes_are_noted_and_left_alone() {
    let (dir, _) = shard();
    let index0 = std::fs::read(index_path(dir.path(), 0)).unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"operator was here").unwrap();
    std::fs::write(dir.path().join("00000000000000000001.log.bak"), b"a backup").unwrap();
    std::fs::write(index_path(dir.path(), 7), &index0).unwrap();
    // Files of other layers are not strays.
    std::fs::write(dir.path().join("epochs"), b"not parsed by recovery").unwrap();
    std::fs::write(dir.path().join("lock"), b"").unwrap();

    let expected_notes = [
        Note::StrayFile {
            name: "00000000000000000001.log.bak".to_owned(),
        },
        Note::StrayFile {
            name: "notes.txt".to_owned(),
        },
        Note::OrphanIndex { segment: 7 },
    ];
    let inspection = inspect_unchanged(dir.path(), &inspect_options(true));
    assert_eq!(inspection.findings, []);
    assert_eq!(inspection.notes, expected_notes);
    assert_eq!(inspection.plan, []);

    let before = snapshot(dir.path());
    let opened = open_shard(
        &felix_io::FileSystem::os(),
        dir.path(),
        LABEL,
        &OpenOptions::default(),
        &common::lock(dir.path()),
    )
    .unwrap();
    assert_eq!(opened.inspection.notes, expected_notes);
    assert_eq!(opened.actions, []);
    assert_eq!(
        snapshot(dir.path()),
        before,
        "strays and orphans are left alone"
    );
    assert_reads_back(dir.path(), &opened, 0, 6);
}

#[test]
fn crc32_oracle_matches_spec_golden_vectors() {
    let header = SegmentHeader::new(1, 2).encode();
    assert_eq!(crc32(&[&header[..24]]), 0x7A09_E5B1);
    let record = encode_record_header(7, 9, b"hi").unwrap();
    assert_eq!(crc32(&[&record[..20]]), 0xC654_DE27);
    assert_eq!(crc32(&[&record[..24], b"hi"]), 0x2402_152C);
}

/// A newest segment holding exactly a complete header with one bad field
/// was created and written in full: that is header damage, never an
/// interrupted creation, so it is not removed.
#[test]
fn open_newest_header_only_segment_with_damaged_complete_header_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    build_shard(dir.path(), 0, &[3, 3, 0], SPACING);
    let newest = seg_path(dir.path(), 2);
    assert_eq!(
        std::fs::metadata(&newest).unwrap().len(),
        SEGMENT_HEADER_LEN as u64
    );
    flip_bit(&newest, 9, 0);
    let inspection = inspect_unchanged(dir.path(), &InspectOptions::default());
    assert_eq!(inspection.findings.len(), 1);
    let finding = &inspection.findings[0];
    assert!(
        matches!(finding.kind, CorruptionKind::SegmentHeaderChecksum { .. }),
        "{finding:?}"
    );
    assert_eq!(finding.site, CorruptionSite::new(LABEL, 2, 0));
    assert_eq!(finding.repair, RepairClass::Never);
    assert_eq!(finding.context, FindingContext::SegmentHeader);
    assert_eq!(open_refused(dir.path(), &OpenOptions::default()).len(), 1);
    assert!(newest.exists());
}

/// When the last segment is an abandoned creation, the segment before it is
/// the one a writer continues: it is scanned in full, so rot in its last
/// record is found (and classed as the newest segment's), never reopened
/// as writable data unchecked.
#[test]
fn inspect_segment_before_abandoned_one_is_scanned_in_full_as_newest() {
    let dir = tempfile::tempdir().unwrap();
    build_shard(dir.path(), 0, &[3, 3, 0], SPACING);
    set_len(&seg_path(dir.path(), 2), 10);
    let layout = shard_layout(0, &[3, 3]);
    let last = layout[1].last().unwrap();
    let seg1_len = common::segment_len(&layout[1]);
    flip_bit(&seg_path(dir.path(), 1), seg1_len - 1, 0);

    let inspection = inspect_unchanged(dir.path(), &InspectOptions::default());
    let kinds: Vec<_> = inspection
        .findings
        .iter()
        .map(|f| (f.kind.name(), f.site.segment, f.site.position, f.repair))
        .collect();
    assert_eq!(
        kinds,
        [
            ("RecordChecksum", 1, last.position, RepairClass::OptIn),
            ("Truncated", 2, 0, RepairClass::Default)
        ]
    );
    assert!(matches!(
        inspection.findings[0].context,
        FindingContext::Record {
            location: felix_recovery::DamageLocation::NewestConfined,
            ..
        }
    ));
    assert_eq!(open_refused(dir.path(), &OpenOptions::default()).len(), 1);

    let options = OpenOptions {
        repair_policy: felix_recovery::RepairPolicy::ChecksumTail,
        ..OpenOptions::default()
    };
    let shard = open_shard(
        &felix_io::FileSystem::os(),
        dir.path(),
        LABEL,
        &options,
        &common::lock(dir.path()),
    )
    .unwrap();
    let newest = shard.newest.unwrap();
    assert_eq!(
        (newest.file.id(), newest.next_offset, newest.len),
        (1, last.offset, last.position)
    );
    assert!(!seg_path(dir.path(), 2).exists());
}

/// A zero-filled hole in the newest segment followed by an intact record is
/// writes that reached the disk out of order before a power loss: the hole
/// was never synced, so neither was anything after it (a sync covers every
/// earlier write). It is repaired by default, truncating at the hole.
#[test]
fn open_newest_zero_hole_before_an_intact_record_truncates_at_the_hole() {
    let (dir, layout) = shard();
    let hole = layout[NEWEST as usize][1];
    let after = layout[NEWEST as usize][2];
    write_at(
        &seg_path(dir.path(), NEWEST),
        hole.position,
        &vec![0u8; hole.len as usize],
    );
    let inspection = inspect_unchanged(dir.path(), &InspectOptions::default());
    assert_eq!(inspection.findings.len(), 1);
    let finding = &inspection.findings[0];
    assert_eq!(
        finding.kind,
        CorruptionKind::RecordHeaderChecksum {
            expected: 0,
            found: crc32(&[&[0u8; 20]])
        }
    );
    assert_eq!(
        finding.site,
        CorruptionSite::new(LABEL, NEWEST, hole.position)
    );
    assert_eq!(finding.repair, RepairClass::Default);
    assert_eq!(
        finding.context,
        FindingContext::Record {
            location: DamageLocation::NewestUnwritten,
            intact_record_at: Some(after.position),
            tail_all_zero: false,
            tail_bytes: after.end() - hole.position,
            unwritten: None,
        }
    );
    let opened = open_shard(
        &felix_io::FileSystem::os(),
        dir.path(),
        LABEL,
        &OpenOptions::default(),
        &common::lock(dir.path()),
    )
    .unwrap();
    let newest = opened.newest.as_ref().unwrap();
    assert_eq!(
        (newest.next_offset, newest.len),
        (hole.offset, hole.position)
    );
}

/// A hole that is not all zeros before an intact record is damage, not
/// unwritten space: never repaired.
#[test]
fn inspect_newest_nonzero_hole_before_an_intact_record_is_never_repaired() {
    let (dir, layout) = shard();
    let hole = layout[NEWEST as usize][1];
    let mut bytes = vec![0u8; hole.len as usize];
    bytes[hole.len as usize - 1] = 1;
    write_at(&seg_path(dir.path(), NEWEST), hole.position, &bytes);
    let inspection = inspect_unchanged(dir.path(), &InspectOptions::default());
    assert_eq!(inspection.findings.len(), 1);
    assert_eq!(inspection.findings[0].repair, RepairClass::Never);
    assert!(matches!(
        inspection.findings[0].context,
        FindingContext::Record {
            location: DamageLocation::NewestFollowedByIntact,
            ..
        }
    ));
}
