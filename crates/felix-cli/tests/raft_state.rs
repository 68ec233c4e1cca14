//! `felix-store verify` knows the raft-state file a Raft log keeps in its
//! shard: a good one is no note and no stray, a damaged one is a note
//! naming the damage (the records still verify), and neither is modified.

mod common;

use common::{files, fixture_copy, s, transcript};

#[test]
fn verify_knows_a_good_raft_state_file_and_reports_no_stray() {
    let (root, dir) = fixture_copy("raft-state");
    let before = files(root.path());
    let text = transcript(&["verify", s(&dir)], root.path());
    assert_eq!(files(root.path()), before, "verify modified a file");
    assert!(text.contains("OK: opens cleanly"), "{text}");
    assert!(!text.contains("stray"), "{text}");
    assert!(!text.contains("note:"), "{text}");
}

#[test]
fn verify_notes_a_damaged_raft_state_file_and_leaves_it() {
    let (root, dir) = fixture_copy("raft-state");
    let damaged = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/v2/raft-state/damaged/RaftStateChecksum/raft-state");
    std::fs::copy(damaged, dir.join("raft-state")).unwrap();
    let before = files(root.path());
    let text = [
        transcript(&["verify", s(&dir)], root.path()),
        transcript(&["verify", "--json", s(&dir)], root.path()),
    ];
    assert_eq!(files(root.path()), before, "verify modified a file");
    insta::assert_snapshot!(text.join("\n"));
}

/// `dump` shows a Raft log's records (log encoding 2, its raft-state file
/// says so) as entries: kind and term, and the entry's body as payload.
#[test]
fn dump_shows_a_raft_log_s_records_as_entries() {
    let (root, dir) = fixture_copy("raft-log");
    let before = files(root.path());
    let text = [
        transcript(&["dump", "--payload", "text", s(&dir)], root.path()),
        transcript(
            &[
                "dump",
                "--json",
                "--payload",
                "hex",
                "--count",
                "3",
                s(&dir),
            ],
            root.path(),
        ),
    ];
    assert_eq!(files(root.path()), before, "dump modified a file");
    insta::assert_snapshot!(text.join("\n"));
}

/// A shard whose raft-state file is version 1 (log encoding 1) is not
/// shown as entries: its records are not in the encoding `dump` reads.
#[test]
fn dump_shows_a_version_1_raft_shard_as_records_only() {
    let (root, dir) = fixture_copy("raft-state");
    let text = transcript(&["dump", "--count", "1", s(&dir)], root.path());
    assert!(!text.contains("entry:"), "{text}");
    assert!(!text.contains("Raft log"), "{text}");
}

#[test]
fn verify_knows_a_version_2_raft_state_file_and_reports_no_stray() {
    let (root, dir) = fixture_copy("raft-log");
    let before = files(root.path());
    let text = transcript(&["verify", s(&dir)], root.path());
    assert_eq!(files(root.path()), before, "verify modified a file");
    assert!(text.contains("OK: opens cleanly"), "{text}");
    assert!(!text.contains("stray"), "{text}");
    assert!(!text.contains("note:"), "{text}");
}

#[test]
fn verify_knows_a_raft_snapshot_file_and_reports_no_stray() {
    let (root, dir) = fixture_copy("raft-snapshot");
    let before = files(root.path());
    let text = transcript(&["verify", s(&dir)], root.path());
    assert_eq!(files(root.path()), before, "verify modified a file");
    assert!(text.contains("OK: opens cleanly"), "{text}");
    assert!(!text.contains("stray"), "{text}");
    assert!(!text.contains("note:"), "{text}");
}

#[test]
fn verify_notes_a_damaged_raft_snapshot_file_and_leaves_it() {
    let (root, dir) = fixture_copy("raft-snapshot");
    let damaged = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/v2/raft-snapshot/damaged/RaftSnapshotChecksum/raft-snapshot");
    std::fs::copy(damaged, dir.join("raft-snapshot")).unwrap();
    let before = files(root.path());
    let text = transcript(&["verify", s(&dir)], root.path());
    assert_eq!(files(root.path()), before, "verify modified a file");
    assert!(
        text.contains(
            "note: raft-snapshot file unusable: it does not decode (RaftSnapshotChecksum: "
        ),
        "{text}"
    );
}
