//! An inspection reads the raft-state and raft-snapshot files a Raft log
//! keeps in the shard (felix-raft) only to say whether they are usable:
//! every damaged fixture is a note named after its damage, the golden one
//! is none, and no record is touched either way.

use felix_format::side_file::SideFileKind;
use std::path::{Path, PathBuf};

use felix_format::raft_state::{RaftLogId, RaftState, RaftVote};
use felix_format::{RAFT_SNAPSHOT_FILE_NAME, RAFT_STATE_FILE_NAME};
use felix_io::{FileSystem, FileType};
use felix_recovery::{
    InspectOptions, Note, SideFileProblem, StoredRaftSnapshot, StoredRaftState, inspect,
    read_raft_snapshot, read_raft_state,
};

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

fn raft_notes(dir: &Path) -> Vec<Note> {
    let inspection = inspect(
        &FileSystem::os(),
        dir,
        "fixture",
        &InspectOptions::default(),
    )
    .unwrap();
    assert!(inspection.findings.is_empty(), "{:?}", inspection.findings);
    assert!(inspection.plan.is_empty(), "{:?}", inspection.plan);
    inspection
        .notes
        .into_iter()
        .filter(|n| match n {
            Note::RaftStateUnusable { .. }
            | Note::RaftSnapshotUnusable { .. }
            | Note::StrayFile { .. } => true,
            Note::NotAFile { name, .. } => {
                name == RAFT_STATE_FILE_NAME || name == RAFT_SNAPSHOT_FILE_NAME
            }
            _ => false,
        })
        .collect()
}

/// Every damaged copy of `file` under `family/damaged/` beside `family`'s
/// golden files: one note (the problem `problem` finds in it) named after
/// the damage, and the file left as it was. Returns the variants seen.
fn damaged_fixtures_are_notes(
    family: &str,
    file: &str,
    problem: fn(&Note) -> Option<&SideFileProblem>,
) -> Vec<String> {
    let mut variants: Vec<String> = std::fs::read_dir(fixtures().join(family).join("damaged"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    variants.sort();
    for variant in &variants {
        let dir = tempfile::tempdir().unwrap();
        copy_into(family, dir.path());
        copy_into(&format!("{family}/damaged/{variant}"), dir.path());
        let notes = raft_notes(dir.path());
        assert!(
            matches!(
                notes.as_slice(),
                [note] if matches!(problem(note), Some(p @ SideFileProblem::Invalid(_)) if p.name() == variant)
            ),
            "{variant}: {notes:?}"
        );
        // Reported, never removed nor rewritten.
        let kept = std::fs::read(dir.path().join(file)).unwrap();
        let original =
            std::fs::read(fixtures().join(format!("{family}/damaged/{variant}/{file}"))).unwrap();
        assert_eq!(kept, original, "{variant}");
    }
    variants
}

#[test]
fn golden_raft_state_fixture_reads_and_gives_no_note() {
    let dir = tempfile::tempdir().unwrap();
    copy_into("raft-state", dir.path());
    let stored = read_raft_state(&FileSystem::os(), dir.path());
    let StoredRaftState::State(state) = stored else {
        panic!("{stored:?}");
    };
    assert!(
        state.vote.is_some() && state.last_purged.is_some(),
        "{state:?}"
    );
    assert_eq!(raft_notes(dir.path()), Vec::<Note>::new());
}

#[test]
fn damaged_raft_state_fixtures_are_each_a_note_named_after_the_damage() {
    let variants = damaged_fixtures_are_notes("raft-state", RAFT_STATE_FILE_NAME, |n| match n {
        Note::RaftStateUnusable { problem } => Some(problem),
        _ => None,
    });
    assert_eq!(variants.len(), 6, "{variants:?}");
}

#[test]
fn golden_raft_snapshot_fixture_reads_and_gives_no_note() {
    let dir = tempfile::tempdir().unwrap();
    copy_into("raft-snapshot", dir.path());
    assert_eq!(
        read_raft_snapshot(&FileSystem::os(), dir.path()),
        StoredRaftSnapshot::Snapshot(RaftLogId { term: 1, index: 1 })
    );
    assert_eq!(raft_notes(dir.path()), Vec::<Note>::new());
}

#[test]
fn damaged_raft_snapshot_fixtures_are_each_a_note_named_after_the_damage() {
    let variants =
        damaged_fixtures_are_notes("raft-snapshot", RAFT_SNAPSHOT_FILE_NAME, |n| match n {
            Note::RaftSnapshotUnusable { problem } => Some(problem),
            _ => None,
        });
    assert_eq!(variants.len(), 8, "{variants:?}");
}

#[test]
fn an_interrupted_raft_snapshot_write_is_a_temporary_removed_on_open() {
    let dir = tempfile::tempdir().unwrap();
    copy_into("raft-snapshot", dir.path());
    std::fs::write(dir.path().join("raft-snapshot.tmp"), b"FLSN half").unwrap();
    let inspection = inspect(
        &FileSystem::os(),
        dir.path(),
        "fixture",
        &InspectOptions::default(),
    )
    .unwrap();
    let texts: Vec<String> = inspection.notes.iter().map(ToString::to_string).collect();
    assert!(
        texts.contains(
            &"\"raft-snapshot.tmp\" is the temporary of an interrupted raft-snapshot write; removed on open"
                .to_owned()
        ),
        "{texts:?}"
    );
}

#[test]
fn raft_state_longer_than_its_layout_is_too_large_without_being_read() {
    let dir = tempfile::tempdir().unwrap();
    copy_into("raft-state", dir.path());
    let mut bytes = std::fs::read(dir.path().join(RAFT_STATE_FILE_NAME)).unwrap();
    bytes.extend_from_slice(&[0; 100]);
    std::fs::write(dir.path().join(RAFT_STATE_FILE_NAME), &bytes).unwrap();
    let notes = raft_notes(dir.path());
    assert!(
        matches!(
            notes.as_slice(),
            [Note::RaftStateUnusable {
                problem: SideFileProblem::TooLarge {
                    file: SideFileKind::RaftState,
                    len: 144
                }
            }]
        ),
        "{notes:?}"
    );
    assert_eq!(
        notes[0].to_string(),
        "raft-state file unusable: it is 144 bytes, longer than a raft-state file; the shard's records are unaffected, but a Raft log kept in the shard will not open until it is restored"
    );
}

#[test]
fn raft_state_that_is_a_directory_is_one_not_a_file_note_and_never_read() {
    let dir = tempfile::tempdir().unwrap();
    copy_into("raft-state", dir.path());
    std::fs::remove_file(dir.path().join(RAFT_STATE_FILE_NAME)).unwrap();
    std::fs::create_dir(dir.path().join(RAFT_STATE_FILE_NAME)).unwrap();
    let notes = raft_notes(dir.path());
    assert!(
        matches!(
            notes.as_slice(),
            [Note::NotAFile {
                file_type: FileType::Directory,
                ..
            }]
        ),
        "{notes:?}"
    );
}

#[test]
fn written_raft_state_reads_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let state = RaftState {
        vote: Some(RaftVote {
            term: 7,
            voted_for: Some(2),
            committed: true,
        }),
        last_purged: Some(RaftLogId { term: 6, index: 99 }),
        ..RaftState::default()
    };
    let fs = FileSystem::os();
    felix_io::replace_file(
        &fs,
        dir.path(),
        RAFT_STATE_FILE_NAME,
        felix_format::RAFT_STATE_TEMP_FILE_NAME,
        &felix_format::raft_state::encode_raft_state(&state),
    )
    .unwrap();
    assert_eq!(
        read_raft_state(&fs, dir.path()),
        StoredRaftState::State(state)
    );
}
