//! The time index and log-start fixtures under `fixtures/v2/` read as
//! `fixtures/v2/README.md` says: the golden time index is exactly what a
//! walk of small-shard's records builds, each damaged one is refused with
//! the problem it is named after (and rebuilt), the golden log-start files
//! move the log's start (one says a deletion moved it, one an offload),
//! and each damaged one leaves the log beginning at its first segment.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use felix_format::log_start::{LogStart, MovedBy};
use felix_format::time_index::decode_time_index;
use felix_format::{FileKind, LOG_START_FILE_NAME, SegmentExtent, file_name};
use felix_io::{FileSystem, OpenMode};
use felix_recovery::{
    InspectOptions, Note, OpenOptions, ScanDepth, ScanStart, ShardLock, StoredLogStart, open_shard,
    read_log_start, scan_segment, scan_segment_checking,
};
use felix_segment::{SegmentFile, TimeIndex, TimeIndexLoadError};

/// small-shard's index spacing, so a rebuilt index equals its files.
const SPACING: u64 = 128;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v2")
}

/// Copies `rel`'s binaries (not the `.hex.txt` dumps) into `dir`.
fn copy_into(rel: &str, dir: &Path) {
    for entry in std::fs::read_dir(fixtures().join(rel)).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".hex.txt") && entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), dir.join(&name)).unwrap();
        }
    }
}

fn damaged_variants(rel: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures().join(rel).join("damaged"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn small_segment(dir: &Path) -> (SegmentFile, SegmentExtent) {
    let fs = FileSystem::os();
    let (segment, len) =
        SegmentFile::open(&fs, dir, 0, Arc::from("fixture"), OpenMode::Read).unwrap();
    let extent = SegmentExtent {
        id: 0,
        base_offset: 0,
        next_offset: 5,
        len,
    };
    (segment, extent)
}

#[test]
fn time_index_golden_fixture_is_what_a_walk_of_the_records_builds() {
    let dir = tempfile::tempdir().unwrap();
    copy_into("time-index", dir.path());
    let (segment, extent) = small_segment(dir.path());
    let scan = scan_segment(
        &segment,
        extent.len,
        ScanStart::first_record(&segment),
        ScanDepth::Headers,
        SPACING,
    )
    .unwrap();
    let bytes = std::fs::read(dir.path().join(file_name(0, FileKind::TimeIndex).as_str())).unwrap();
    let view = decode_time_index(&bytes).unwrap();
    assert_eq!(
        view.iter().collect::<Vec<_>>(),
        scan.time_index.sealed().entries()
    );
    let loaded = TimeIndex::load(
        &FileSystem::os(),
        &dir.path().join(file_name(0, FileKind::TimeIndex).as_str()),
        &extent,
    )
    .unwrap();
    assert_eq!(loaded.max_timestamp_micros(), Some(1_700_000_000_005_000));
}

#[test]
fn time_index_damaged_fixtures_are_each_refused_as_named() {
    let variants = damaged_variants("time-index");
    assert_eq!(variants.len(), 11, "{variants:?}");
    for variant in variants {
        let dir = tempfile::tempdir().unwrap();
        copy_into("time-index", dir.path());
        copy_into(&format!("time-index/damaged/{variant}"), dir.path());
        let (segment, extent) = small_segment(dir.path());
        let path = dir.path().join(file_name(0, FileKind::TimeIndex).as_str());
        let found = match TimeIndex::load(&FileSystem::os(), &path, &extent) {
            Err(TimeIndexLoadError::Invalid { error, .. }) => error.name().to_owned(),
            Err(TimeIndexLoadError::Stale { found, .. }) => {
                assert_eq!(found.next_offset, 4, "{variant}");
                "TimeIndexStale".to_owned()
            }
            Ok(index) => {
                // Sound bytes: only the records can say it is wrong.
                let checked = scan_segment_checking(
                    &segment,
                    extent.len,
                    ScanStart::first_record(&segment),
                    ScanDepth::Headers,
                    SPACING,
                    &[],
                    index.entries(),
                )
                .unwrap();
                assert_eq!(checked.wrong_time_entry, Some(0), "{variant}");
                "TimeIndexWrong".to_owned()
            }
            Err(other) => panic!("{variant}: {other:?}"),
        };
        assert_eq!(found, variant);
    }
}

fn open_options() -> OpenOptions {
    OpenOptions {
        inspect: InspectOptions {
            index_spacing_bytes: SPACING,
            ..InspectOptions::default()
        },
        use_clean_shutdown: false,
        ..OpenOptions::default()
    }
}

#[test]
fn log_start_golden_fixture_moves_the_start_inside_segment_zero() {
    let dir = tempfile::tempdir().unwrap();
    copy_into("log-start", dir.path());
    let fs = FileSystem::os();
    let stored = read_log_start(&fs, dir.path());
    let start = stored.start().unwrap();
    assert_eq!(
        start,
        LogStart {
            start_offset: 3,
            first_segment_id: 0,
            moved_by: MovedBy::Deletion
        }
    );
    let lock = ShardLock::acquire(&fs, dir.path()).unwrap();
    let recovered = open_shard(&fs, dir.path(), "fixture", &open_options(), &lock).unwrap();
    assert_eq!(recovered.start_offset, Some(3));
    assert!(recovered.actions.is_empty(), "{:?}", recovered.actions);
    assert_eq!(recovered.newest.unwrap().next_offset, 5);
}

#[test]
fn log_start_offloaded_fixture_reads_as_moved_by_an_offload_and_opens_alike() {
    let dir = tempfile::tempdir().unwrap();
    copy_into("log-start-offloaded", dir.path());
    let fs = FileSystem::os();
    let start = read_log_start(&fs, dir.path()).start().unwrap();
    assert_eq!(
        start,
        LogStart {
            start_offset: 3,
            first_segment_id: 0,
            moved_by: MovedBy::Offload
        }
    );
    let lock = ShardLock::acquire(&fs, dir.path()).unwrap();
    let recovered = open_shard(&fs, dir.path(), "fixture", &open_options(), &lock).unwrap();
    assert_eq!(recovered.start_offset, Some(3));
    assert!(recovered.actions.is_empty(), "{:?}", recovered.actions);
    assert!(
        recovered.inspection.notes.is_empty(),
        "{:?}",
        recovered.inspection.notes
    );
}

#[test]
fn log_start_damaged_fixtures_leave_the_log_at_its_first_segment() {
    let variants = damaged_variants("log-start");
    assert_eq!(variants.len(), 5, "{variants:?}");
    for variant in variants {
        let dir = tempfile::tempdir().unwrap();
        copy_into("log-start", dir.path());
        copy_into(&format!("log-start/damaged/{variant}"), dir.path());
        let fs = FileSystem::os();
        match read_log_start(&fs, dir.path()) {
            StoredLogStart::Unusable(problem) => assert_eq!(problem.name(), variant),
            other => panic!("{variant}: {other:?}"),
        }
        let lock = ShardLock::acquire(&fs, dir.path()).unwrap();
        let recovered = open_shard(&fs, dir.path(), "fixture", &open_options(), &lock).unwrap();
        assert_eq!(recovered.start_offset, Some(0), "{variant}");
        assert!(
            recovered.inspection.notes.iter().any(
                |n| matches!(n, Note::LogStartUnusable { problem } if problem.name() == variant)
            ),
            "{variant}: {:?}",
            recovered.inspection.notes
        );
        // No record is lost: all five are still there, from offset 0.
        let newest = recovered.newest.unwrap();
        assert_eq!((newest.file.base_offset(), newest.next_offset), (0, 5));
        assert!(dir.path().join(LOG_START_FILE_NAME).exists());
    }
}
