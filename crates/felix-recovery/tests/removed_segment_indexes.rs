//! The indexes a removal of the oldest segments leaves when a crash cuts
//! it short (the segment's `.log` gone, its `.index` or `.timeindex` not
//! yet): an inspection notes them and writes nothing; an open for writing
//! removes them. An index with no segment that lies above the first
//! segment is no such leftover: it is noted and left alone.

mod common;

use common::{LABEL, assert_reads_back, build_shard, index_path, inspect_unchanged, seg_path};
use felix_format::{FileKind, file_name};
use felix_recovery::{InspectOptions, Note, OpenOptions, open_shard};

const SPACING: u64 = 64;

fn options() -> InspectOptions {
    InspectOptions {
        index_spacing_bytes: SPACING,
        ..InspectOptions::default()
    }
}

#[test]
fn open_index_files_below_every_segment_are_removed_and_others_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    // Segments 0, 1 (sealed) and 2 (newest), offsets 0..9.
    build_shard(dir.path(), 0, &[3, 3, 3], SPACING);
    let index0 = std::fs::read(index_path(dir.path(), 0)).unwrap();
    // Segment 0's removal cut short: its `.log` gone, its indexes left.
    std::fs::remove_file(seg_path(dir.path(), 0)).unwrap();
    let time_index0 = dir.path().join(file_name(0, FileKind::TimeIndex).as_str());
    std::fs::write(&time_index0, b"a time index of segment 0").unwrap();
    // An index with no segment above the first one: not a removal's.
    std::fs::write(index_path(dir.path(), 7), &index0).unwrap();

    let index_name = file_name(0, FileKind::Index).as_str().to_owned();
    let time_index_name = file_name(0, FileKind::TimeIndex).as_str().to_owned();
    let expected_notes = [
        Note::OrphanIndex { segment: 7 },
        Note::IndexOfRemovedSegment {
            name: index_name.clone(),
        },
        Note::IndexOfRemovedSegment {
            name: time_index_name.clone(),
        },
    ];
    let inspection = inspect_unchanged(dir.path(), &options());
    assert_eq!(inspection.findings, []);
    assert_eq!(inspection.notes, expected_notes);
    assert_eq!(inspection.plan, []);
    assert_eq!(
        inspection.notes[1].to_string(),
        format!(
            "{index_name} is left from the removal of its segment, below every segment held; removed on open"
        )
    );

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
    assert!(!index_path(dir.path(), 0).exists());
    assert!(!time_index0.exists());
    assert_eq!(std::fs::read(index_path(dir.path(), 7)).unwrap(), index0);
    assert_reads_back(dir.path(), &opened, 3, 9);
    drop(opened);

    // What the open left is noted no more.
    let again = inspect_unchanged(dir.path(), &options());
    assert_eq!(again.notes, [Note::OrphanIndex { segment: 7 }]);
}
