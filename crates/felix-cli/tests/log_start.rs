//! `felix-store stat`, `verify` and `dump` show where the log begins when a
//! log-start file records it, and what moved it (a deletion, or an
//! offload), and read without modifying anything.

mod common;

use common::{files, fixture_copy, s, transcript};

/// The transcript of `stat`, `verify` and `dump` on a copy of `fixture`,
/// checking that none of them modified a file.
fn shown(fixture: &str) -> String {
    let (root, dir) = fixture_copy(fixture);
    let before = files(root.path());
    let mut text = Vec::new();
    for args in [
        &["stat", s(&dir)][..],
        &["stat", "--json", s(&dir)],
        &["verify", s(&dir)],
        &["dump", "--count", "1", s(&dir)],
        &["dump", "--json", "--count", "1", s(&dir)],
    ] {
        text.push(transcript(args, root.path()));
    }
    assert_eq!(files(root.path()), before, "a command modified a file");
    text.join("\n")
}

#[test]
fn stat_verify_and_dump_show_the_log_start() {
    insta::assert_snapshot!(shown("log-start"));
}

#[test]
fn stat_verify_and_dump_show_that_an_offload_moved_the_log_start() {
    insta::assert_snapshot!(shown("log-start-offloaded"));
}

#[test]
fn verify_knows_the_time_index_file_and_reports_no_stray() {
    let (root, dir) = fixture_copy("time-index");
    assert!(dir.join("00000000000000000000.timeindex").exists());
    let text = transcript(&["verify", s(&dir)], root.path());
    assert!(text.contains("OK: opens cleanly"), "{text}");
    assert!(!text.contains("stray"), "{text}");
    assert!(!text.contains("note:"), "{text}");
}
