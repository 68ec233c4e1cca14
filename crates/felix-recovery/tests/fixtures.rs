//! The golden shards under `fixtures/v2/` read exactly as
//! `fixtures/v2/README.md` says: each `damaged/<Variant>/` shard produces the
//! `CorruptionKind` it is named after, with the fields and at the byte the
//! README states, and opens (or is refused) as its "recovery" column says.

mod common;

use std::path::{Path, PathBuf};

use common::{LABEL, inspect_unchanged, interop_payload, open_refused, snapshot, try_read_back};
use felix_format::{CorruptionKind, CorruptionSite, MAX_PAYLOAD_BYTES};
use felix_recovery::{
    Action, DamageLocation, Finding, FindingContext, IndexProblem, InspectOptions, Note,
    OpenOptions, RecoveredShard, RepairClass, RepairPolicy, open_shard,
};

const LOG: &str = "00000000000000000000.log";
const INDEX: &str = "00000000000000000000.index";
/// small-shard's index spacing, so a rebuilt index equals its index.
const SPACING: u64 = 128;
/// Where small-shard's newest record (offset 4) begins, and its length.
const LAST_RECORD: u64 = 316;
const LAST_RECORD_LEN: u64 = 86;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v2")
}

/// Copies a fixture shard's binaries — not the `.hex.txt` dumps, which
/// would rightly be reported as strays — into a fresh directory.
fn copy_fixture(rel: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixtures().join(rel)).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".log") || name.ends_with(".index") || name == "epochs" {
            std::fs::copy(entry.path(), dir.path().join(&name)).unwrap();
        }
    }
    dir
}

fn small_shard(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join("small-shard").join(name)).unwrap()
}

fn options(full_verify: bool, repair_checksum_tail: bool) -> OpenOptions {
    OpenOptions {
        inspect: InspectOptions {
            index_spacing_bytes: SPACING,
            full_verify,
            ..InspectOptions::default()
        },
        repair_policy: if repair_checksum_tail {
            RepairPolicy::ChecksumTail
        } else {
            RepairPolicy::Default
        },
        use_clean_shutdown: false,
        keep_clean_shutdown: false,
    }
}

/// Reads every record back and checks it against the README's payload rule
/// (`34 + 6 × offset` bytes of the interop pattern).
fn assert_fixture_reads_back(dir: &Path, shard: &RecoveredShard, next: u64) {
    let got: Vec<(u64, Vec<u8>)> = try_read_back(dir, shard)
        .into_iter()
        .map(|(o, r)| (o, r.unwrap()))
        .collect();
    let want: Vec<(u64, Vec<u8>)> = (0..next)
        .map(|o| (o, interop_payload(o, 34 + 6 * o as usize)))
        .collect();
    assert_eq!(got, want);
}

/// The README's table of damaged segments: kind with its fields, byte
/// position, and who may repair it.
fn segment_cases() -> Vec<(&'static str, CorruptionKind, u64, RepairClass)> {
    use CorruptionKind as K;
    #[rustfmt::skip]
    let cases = vec![
        ("SegmentMagic",          K::SegmentMagic { found: 0x464c_5346 },                                0,           RepairClass::Never),
        ("SegmentVersion",        K::SegmentVersion { found: 1 },                                        0,           RepairClass::Never),
        ("SegmentFlags",          K::SegmentFlags { found: 1 },                                          0,           RepairClass::Never),
        ("SegmentHeaderChecksum", K::SegmentHeaderChecksum { expected: 0x061a_b149, found: 0x1161_a50a }, 0,           RepairClass::Never),
        ("SegmentReserved",       K::SegmentReserved { found: 1 },                                       0,           RepairClass::Never),
        ("Truncated",             K::Truncated { needed: LAST_RECORD_LEN, available: 48 },               LAST_RECORD, RepairClass::Default),
        ("RecordHeaderChecksum",  K::RecordHeaderChecksum { expected: 0x5e0d_d548, found: 0xb15f_63a9 }, LAST_RECORD, RepairClass::OptIn),
        ("RecordChecksum",        K::RecordChecksum { expected: 0x9f60_205e, found: 0xd5a7_2fcd },       LAST_RECORD, RepairClass::OptIn),
        ("RecordTooLarge",        K::RecordTooLarge { payload_len: MAX_PAYLOAD_BYTES + 1, max: MAX_PAYLOAD_BYTES }, LAST_RECORD, RepairClass::OptIn),
        ("OffsetOutOfOrder",      K::OffsetOutOfOrder { expected: 4, found: 5 },                         LAST_RECORD, RepairClass::OptIn),
    ];
    cases
}

/// The README's table of damaged indexes: what loading each must report.
fn index_cases() -> Vec<(&'static str, CorruptionKind)> {
    use CorruptionKind as K;
    vec![
        ("IndexMagic", K::IndexMagic { found: 0x464c_5348 }),
        ("IndexVersion", K::IndexVersion { found: 1 }),
        ("IndexFlags", K::IndexFlags { found: 1 }),
        (
            "IndexBaseOffset",
            K::IndexBaseOffset {
                expected: 0,
                found: 1,
            },
        ),
        (
            "IndexEntryOutOfOrder",
            K::IndexEntryOutOfOrder {
                entry: 2,
                offset: 2,
                position: 162,
            },
        ),
    ]
}

#[test]
fn inspect_damaged_fixtures_every_directory_has_a_case() {
    let mut dirs: Vec<String> = std::fs::read_dir(fixtures().join("damaged"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    let mut cased: Vec<String> = segment_cases()
        .iter()
        .map(|c| c.0)
        .chain(index_cases().iter().map(|c| c.0))
        .chain(["OffsetOverflow"])
        .map(str::to_owned)
        .collect();
    cased.sort();
    assert_eq!(dirs, cased);
}

#[test]
fn inspect_damaged_segment_fixtures_report_their_named_kind_at_the_stated_byte() {
    for (variant, kind, position, repair) in segment_cases() {
        assert_eq!(kind.name(), variant);
        let dir = copy_fixture(&format!("damaged/{variant}"));
        let context = if position == 0 {
            FindingContext::SegmentHeader
        } else {
            let file_len = std::fs::metadata(dir.path().join(LOG)).unwrap().len();
            FindingContext::Record {
                location: DamageLocation::NewestConfined,
                intact_record_at: None,
                tail_all_zero: false,
                tail_bytes: file_len - position,
                unwritten: None,
            }
        };
        let expected = Finding {
            kind,
            site: CorruptionSite::new(LABEL, 0, position),
            repair,
            context,
        };
        for full_verify in [false, true] {
            let inspection = inspect_unchanged(dir.path(), &options(full_verify, false).inspect);
            assert_eq!(
                inspection.findings,
                std::slice::from_ref(&expected),
                "{variant}"
            );
            if position == LAST_RECORD {
                // The index's entry for the damaged record is not kept.
                let reason = IndexProblem::Invalid(CorruptionKind::IndexEntryOutOfOrder {
                    entry: 2,
                    offset: 4,
                    position: LAST_RECORD,
                });
                assert_eq!(
                    inspection.notes,
                    [Note::IndexUnusable { segment: 0, reason }],
                    "{variant}"
                );
            } else {
                assert_eq!(inspection.notes, [], "{variant}");
            }
        }
    }
}

#[test]
fn open_damaged_segment_fixtures_repair_only_as_the_readme_says() {
    for (variant, kind, position, repair) in segment_cases() {
        for repair_checksum_tail in [false, true] {
            let what = format!("{variant}, repair_checksum_tail {repair_checksum_tail}");
            let dir = copy_fixture(&format!("damaged/{variant}"));
            let options = options(false, repair_checksum_tail);
            let allowed = match repair {
                RepairClass::Default => true,
                RepairClass::OptIn => repair_checksum_tail,
                RepairClass::Never => false,
            };
            if !allowed {
                let blocking = open_refused(dir.path(), &options);
                assert_eq!(
                    blocking
                        .iter()
                        .map(|f| (f.kind, f.site.position))
                        .collect::<Vec<_>>(),
                    [(kind, position)],
                    "{what}"
                );
                continue;
            }
            // Truncated to byte 316: offsets 0..=3 survive, next offset 4,
            // and the index loses its entry (4, 316).
            let from_len = std::fs::metadata(dir.path().join(LOG)).unwrap().len();
            let opened = open_shard(
                &felix_io::FileSystem::os(),
                dir.path(),
                LABEL,
                &options,
                &common::lock(dir.path()),
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                opened.actions,
                [
                    Action::Truncate {
                        segment: 0,
                        path: dir.path().join(LOG),
                        from_len,
                        to_len: LAST_RECORD
                    },
                    Action::RebuildIndex {
                        segment: 0,
                        path: dir.path().join(INDEX),
                        entries: 2
                    },
                ],
                "{what}"
            );
            let newest = opened.newest.as_ref().unwrap();
            assert_eq!((newest.next_offset, newest.len), (4, LAST_RECORD), "{what}");
            let after = snapshot(dir.path());
            assert_eq!(
                after[LOG],
                small_shard(LOG)[..LAST_RECORD as usize],
                "{what}"
            );
            assert_eq!(
                after[INDEX],
                small_shard(INDEX)[..24 + 2 * 16],
                "{what}: entries (0, 32), (2, 162)"
            );
            assert_fixture_reads_back(dir.path(), &opened, 4);
        }
    }
}

#[test]
fn open_damaged_index_fixtures_rebuild_the_index_as_small_shards() {
    for (variant, kind) in index_cases() {
        assert_eq!(kind.name(), variant);
        let dir = copy_fixture(&format!("damaged/{variant}"));
        for full_verify in [false, true] {
            let inspection = inspect_unchanged(dir.path(), &options(full_verify, false).inspect);
            assert_eq!(
                inspection.findings,
                [],
                "{variant}: an index is never damage"
            );
            assert_eq!(
                inspection.notes,
                [Note::IndexUnusable {
                    segment: 0,
                    reason: IndexProblem::Invalid(kind)
                }],
                "{variant}"
            );
        }
        // Rebuilt with small-shard's spacing, the index is small-shard's own.
        let opened = open_shard(
            &felix_io::FileSystem::os(),
            dir.path(),
            LABEL,
            &options(false, false),
            &common::lock(dir.path()),
        )
        .unwrap();
        assert_eq!(
            opened.actions,
            [Action::RebuildIndex {
                segment: 0,
                path: dir.path().join(INDEX),
                entries: 3
            }],
            "{variant}"
        );
        let after = snapshot(dir.path());
        assert_eq!(after[INDEX], small_shard(INDEX), "{variant}");
        assert_eq!(after[LOG], small_shard(LOG), "{variant}");
        assert_fixture_reads_back(dir.path(), &opened, 5);
    }
}

#[test]
fn open_tolerated_fixtures_report_no_damage() {
    let dir = copy_fixture("tolerated/IndexTornEntry");
    let before = snapshot(dir.path());
    let opened = open_shard(
        &felix_io::FileSystem::os(),
        dir.path(),
        LABEL,
        &options(true, false),
        &common::lock(dir.path()),
    )
    .unwrap();
    assert_eq!(
        (
            opened.inspection.findings.len(),
            opened.inspection.notes.len(),
            opened.actions.len()
        ),
        (0, 0, 0)
    );
    assert_eq!(snapshot(dir.path()), before);
    assert_fixture_reads_back(dir.path(), &opened, 5);

    let dir = copy_fixture("tolerated/IndexMissing");
    let opened = open_shard(
        &felix_io::FileSystem::os(),
        dir.path(),
        LABEL,
        &options(true, false),
        &common::lock(dir.path()),
    )
    .unwrap();
    assert_eq!(opened.inspection.findings, []);
    assert_eq!(
        opened.inspection.notes,
        [Note::IndexUnusable {
            segment: 0,
            reason: IndexProblem::Missing
        }]
    );
    assert_eq!(snapshot(dir.path())[INDEX], small_shard(INDEX));
    assert_fixture_reads_back(dir.path(), &opened, 5);

    let dir = copy_fixture("small-shard");
    let before = snapshot(dir.path());
    assert!(before.contains_key("epochs"));
    let opened = open_shard(
        &felix_io::FileSystem::os(),
        dir.path(),
        LABEL,
        &options(true, false),
        &common::lock(dir.path()),
    )
    .unwrap();
    assert_eq!(
        (
            opened.inspection.findings.len(),
            opened.inspection.notes.len(),
            opened.actions.len()
        ),
        (0, 0, 0)
    );
    assert_eq!(snapshot(dir.path()), before);
    assert_fixture_reads_back(dir.path(), &opened, 5);
}

/// `damaged/OffsetOverflow/`'s segment base offset: small-shard moved up so
/// that its newest record takes `u64::MAX` (in order, every CRC valid),
/// since none of small-shard's own records can carry it in order.
const OVERFLOW_BASE: u64 = u64::MAX - 4;

#[test]
fn open_damaged_offset_overflow_fixture_is_opt_in_and_leaves_next_offset_u64_max() {
    let kind = CorruptionKind::OffsetOverflow { found: u64::MAX };
    let log = format!("{OVERFLOW_BASE:020}.log");
    let index = format!("{OVERFLOW_BASE:020}.index");
    let dir = copy_fixture("damaged/OffsetOverflow");
    let file_len = std::fs::metadata(dir.path().join(&log)).unwrap().len();
    let expected = Finding {
        kind,
        site: CorruptionSite::new(LABEL, OVERFLOW_BASE, LAST_RECORD),
        repair: RepairClass::OptIn,
        context: FindingContext::Record {
            location: DamageLocation::NewestConfined,
            intact_record_at: None,
            tail_all_zero: false,
            tail_bytes: file_len - LAST_RECORD,
            unwritten: None,
        },
    };
    for full_verify in [false, true] {
        let inspection = inspect_unchanged(dir.path(), &options(full_verify, false).inspect);
        assert_eq!(inspection.findings, std::slice::from_ref(&expected));
    }
    let blocking = open_refused(dir.path(), &options(false, false));
    assert_eq!(blocking, [expected]);

    let opened = open_shard(
        &felix_io::FileSystem::os(),
        dir.path(),
        LABEL,
        &options(false, true),
        &common::lock(dir.path()),
    )
    .unwrap();
    assert_eq!(
        opened.actions,
        [
            Action::Truncate {
                segment: OVERFLOW_BASE,
                path: dir.path().join(&log),
                from_len: file_len,
                to_len: LAST_RECORD
            },
            Action::RebuildIndex {
                segment: OVERFLOW_BASE,
                path: dir.path().join(&index),
                entries: 2
            },
        ]
    );
    let newest = opened.newest.as_ref().unwrap();
    assert_eq!((newest.next_offset, newest.len), (u64::MAX, LAST_RECORD));
    // The segment cut before the newest record; the index keeps entries
    // (u64::MAX - 4, 32) and (u64::MAX - 2, 162).
    let before = std::fs::read(fixtures().join("damaged/OffsetOverflow").join(&log)).unwrap();
    let after = snapshot(dir.path());
    assert_eq!(after[log.as_str()], before[..LAST_RECORD as usize]);
    assert_eq!(after[index.as_str()].len(), 24 + 2 * 16);
}
