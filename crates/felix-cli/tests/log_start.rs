//! `felix-store stat`, `verify` and `dump` show where the log begins when a
//! log-start file records it, and read without modifying anything.

mod common;

use common::{files, fixture_copy, s, transcript};

#[test]
fn stat_verify_and_dump_show_the_log_start() {
    let (root, dir) = fixture_copy("log-start");
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
    insta::assert_snapshot!(text.join("\n"));
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
