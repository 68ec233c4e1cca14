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
