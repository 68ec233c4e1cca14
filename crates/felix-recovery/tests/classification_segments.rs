//! The repair table's rows about whole segments, as real shards on disk:
//! abandoned segment creations, segment-header damage, gaps between
//! segments, holes before an intact record and stray files. Every
//! inspection is checked to modify nothing, and so is every refused open.
//! (The record-damage rows are in `classification_cases.rs`.)

mod common;

use std::path::Path;

use common::two_segments::{NEWEST, SEALED, SPACING, inspect_options, sealed_info, shard};
use common::{
    LABEL, assert_reads_back, build_shard, crc32, flip_bit, index_name, index_path,
    inspect_unchanged, open_refused, seg_name, seg_path, set_len, shard_layout, snapshot, u32_at,
    write_at,
};
use felix_format::{
    CorruptionKind, CorruptionSite, IndexEntry, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN,
    SegmentHeader, encode_record_header,
};
use felix_recovery::{
    Action, DamageLocation, Finding, FindingContext, InspectOptions, Note, OpenOptions,
    RepairClass, RepairPolicy, open_shard,
};
use felix_segment::{Record, SegmentConfig, SegmentWriter, SparseIndex};

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
