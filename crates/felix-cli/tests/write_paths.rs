//! `felix-store write --dir` with the paths operators type: a relative
//! directory of one component that does not exist yet, and nested missing
//! directories.

mod common;

use common::bin;

fn write_in(cwd: &std::path::Path, dir: &str) -> std::process::Output {
    bin()
        .current_dir(cwd)
        .args([
            "write",
            "--dir",
            dir,
            "--records",
            "5",
            "--payload-bytes",
            "10",
        ])
        .output()
        .unwrap()
}

#[test]
fn write_relative_single_component_dir_creates_and_writes_it() {
    let cwd = tempfile::tempdir().unwrap();
    let out = write_in(cwd.path(), "shard");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verify = bin()
        .current_dir(cwd.path())
        .args(["verify", "--json", "shard"])
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(0));
    let line: serde_json::Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(
        (&line["records"], &line["verdict"]),
        (&5.into(), &"ok".into())
    );
}

#[test]
fn write_nested_missing_relative_dirs_creates_every_one() {
    let cwd = tempfile::tempdir().unwrap();
    let out = write_in(cwd.path(), "a/b/shard");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        cwd.path()
            .join("a/b/shard/00000000000000000000.log")
            .is_file()
    );
}
