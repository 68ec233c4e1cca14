//! A sealed segment's time index is checked against its records where an
//! inspection walks them all (`full_verify`, or every index entry checked),
//! named when it cannot be used, and rewritten by the open that repairs.

mod common;

use std::path::{Path, PathBuf};

use common::{LABEL, build_shard, inspect_unchanged, lock};
use felix_format::time_index::{decode_time_index, encode_time_index};
use felix_format::{FileKind, file_name};
use felix_io::FileSystem;
use felix_recovery::{
    Action, IndexCheck, InspectOptions, Note, OpenOptions, SideFileProblem, TimeIndexProblem,
    open_shard,
};

const SPACING: u64 = 64;

fn time_index_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(file_name(id, FileKind::TimeIndex).as_str())
}

fn every_entry() -> InspectOptions {
    InspectOptions {
        index_spacing_bytes: SPACING,
        index_check: IndexCheck::EveryEntry,
        ..InspectOptions::default()
    }
}

/// Damages segment 1's time index as `damage` says; returns the good bytes.
fn damage(dir: &Path, damage: &str) -> Vec<u8> {
    let path = time_index_path(dir, 1);
    let good = std::fs::read(&path).unwrap();
    match damage {
        "garbage" => std::fs::write(&path, b"FLTI and then nothing sound").unwrap(),
        "wrong" => {
            let view = decode_time_index(&good).unwrap();
            let mut entries: Vec<_> = view.iter().collect();
            entries[0].timestamp_micros = entries[0].timestamp_micros.saturating_sub(1);
            if entries.len() > 1 && entries[0].timestamp_micros >= entries[1].timestamp_micros {
                panic!("the fixture needs ascending entries");
            }
            let mut bytes = Vec::new();
            encode_time_index(&view.header, &entries, &mut bytes).unwrap();
            std::fs::write(&path, bytes).unwrap();
        }
        _ => unreachable!(),
    }
    good
}

#[test]
fn inspect_names_a_garbage_or_wrong_sealed_time_index_and_an_open_rewrites_it() {
    for (what, expect_wrong) in [("garbage", false), ("wrong", true)] {
        let dir = tempfile::tempdir().unwrap();
        build_shard(dir.path(), 0, &[6, 6, 6], SPACING);
        let good = damage(dir.path(), what);
        let inspection = inspect_unchanged(dir.path(), &every_entry());
        let reason = inspection.notes.iter().find_map(|n| match n {
            Note::TimeIndexUnusable { segment: 1, reason } => Some(*reason),
            _ => None,
        });
        match reason {
            Some(TimeIndexProblem::Wrong { number: 0 }) => assert!(expect_wrong, "{what}"),
            Some(TimeIndexProblem::Unusable(SideFileProblem::Invalid(_))) => {
                assert!(!expect_wrong, "{what}")
            }
            other => panic!("{what}: {other:?} in {:?}", inspection.notes),
        }
        assert!(
            inspection
                .plan
                .iter()
                .any(|a| matches!(a, Action::RebuildTimeIndex { segment: 1, .. })),
            "{what}: {:?}",
            inspection.plan
        );
        let options = OpenOptions {
            inspect: every_entry(),
            use_clean_shutdown: false,
            ..OpenOptions::default()
        };
        let lock = lock(dir.path());
        open_shard(&FileSystem::os(), dir.path(), LABEL, &options, &lock).unwrap();
        assert_eq!(
            std::fs::read(time_index_path(dir.path(), 1)).unwrap(),
            good,
            "{what}: rewritten as its writer wrote it"
        );
    }
}

#[test]
fn inspect_by_default_leaves_sealed_time_indexes_to_the_first_lookup() {
    let dir = tempfile::tempdir().unwrap();
    build_shard(dir.path(), 0, &[6, 6, 6], SPACING);
    damage(dir.path(), "garbage");
    let inspection = inspect_unchanged(
        dir.path(),
        &InspectOptions {
            index_spacing_bytes: SPACING,
            ..InspectOptions::default()
        },
    );
    // A default open reads no sealed segment's records, so it cannot judge
    // the file: nothing is noted or planned for it.
    assert!(
        !inspection
            .notes
            .iter()
            .any(|n| matches!(n, Note::TimeIndexUnusable { .. })),
        "{:?}",
        inspection.notes
    );
    assert!(
        !inspection
            .plan
            .iter()
            .any(|a| matches!(a, Action::RebuildTimeIndex { .. }))
    );
}
