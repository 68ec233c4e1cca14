//! `verify` and `stat` on a root where one shard cannot be read: that shard
//! gets an error line (a JSON line with `"verdict":"error"`), every later
//! shard is still reported, damaged ones included, and the exit status is
//! the worst of them (2).
//!
//! Tests run as root, whom no file mode stops, so the unreadable shard is
//! made unreadable for everyone: its path is longer than the system's
//! `PATH_MAX`, so every call on it fails (`ENAMETOOLONG`) while its parent,
//! and so the root's listing, is fine.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{copy_shard, fixtures, run, s};
use serde_json::json;

/// Linux's `PATH_MAX`, terminating zero included.
const PATH_MAX: usize = 4096;

/// A root `<tmp>/<deep>/` holding `a-ok` (a clean shard), `b-<long>` (a
/// shard whose path is too long for any system call) and `c-refused` (a
/// shard a default open refuses). Returns the root and b's name.
fn build() -> (tempfile::TempDir, PathBuf, String) {
    let tmp = tempfile::tempdir().unwrap();
    // Deep enough that a 200-byte name under it passes PATH_MAX, shallow
    // enough that the other shards' files stay well within it.
    let mut root = tmp.path().to_path_buf();
    while root.as_os_str().len() < PATH_MAX - 180 {
        root.push("d".repeat(120));
    }
    std::fs::create_dir_all(&root).unwrap();
    copy_shard(&fixtures().join("small-shard"), &root.join("a-ok"));
    copy_shard(
        &fixtures().join("damaged/RecordChecksum"),
        &root.join("c-refused"),
    );
    let long = format!("b-{}", "x".repeat(200));
    assert!(root.as_os_str().len() + 1 + long.len() >= PATH_MAX);
    // Created relative to the root (each system call sees a short path).
    let status = Command::new("sh")
        .arg("-c")
        .arg(r#"cd "$1" && mkdir "$2" && : > "$2/00000000000000000000.log""#)
        .args(["sh", s(&root), &long])
        .status()
        .unwrap();
    assert!(status.success());
    (tmp, root, long)
}

fn shorten(text: &str, root: &Path, long: &str) -> String {
    text.replace(&root.display().to_string(), "[ROOT]")
        .replace(long, "b-[LONG]")
}

#[test]
fn verify_root_reports_an_unreadable_shard_and_every_shard_after_it() {
    let (_tmp, root, long) = build();
    let json = run(["verify", "--json", s(&root)]);
    assert_eq!(json.code, 2, "{}", json.stderr);
    let lines = json.json_lines();
    let summary: Vec<_> = lines
        .iter()
        .map(|l| {
            (
                l["shard"].as_str().unwrap().to_owned(),
                l["verdict"].clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("a-ok".to_owned(), json!("ok")),
            (long.clone(), json!("error")),
            ("c-refused".to_owned(), json!("refused_by_default")),
        ]
    );
    let error = lines[1]["error"].as_str().unwrap();
    assert!(error.contains("File name too long"), "{error}");
    assert!(
        json.stderr.contains("File name too long"),
        "{}",
        json.stderr
    );

    let human = run(["verify", s(&root)]);
    assert_eq!(human.code, 2);
    let text = format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        human.code,
        shorten(&human.stdout, &root, &long),
        shorten(&human.stderr, &root, &long)
    );
    insta::assert_snapshot!(text);
}

#[test]
fn stat_root_reports_an_unreadable_shard_and_every_shard_after_it() {
    let (_tmp, root, long) = build();
    let json = run(["stat", "--json", s(&root)]);
    assert_eq!(json.code, 2, "{}", json.stderr);
    let verdicts: Vec<_> = json
        .json_lines()
        .iter()
        .map(|l| l["verdict"].clone())
        .collect();
    assert_eq!(
        verdicts,
        [json!("ok"), json!("error"), json!("refused_by_default")]
    );
    let human = run(["stat", s(&root)]);
    assert_eq!(human.code, 2);
    let stdout = shorten(&human.stdout, &root, &long);
    assert!(stdout.contains("shard b-[LONG]: ERROR: "), "{stdout}");
    assert!(
        stdout.contains("shard c-refused ([ROOT]/c-refused)"),
        "{stdout}"
    );
}

#[test]
fn verify_root_with_a_shard_that_fails_and_one_refused_exits_with_the_worst() {
    // Without the unreadable shard the worst is the refused one.
    let (_tmp, root, long) = build();
    let status = Command::new("sh")
        .arg("-c")
        .arg(r#"cd "$1" && rm -r "$2""#)
        .args(["sh", s(&root), &long])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(run(["verify", s(&root)]).code, 1);
}
