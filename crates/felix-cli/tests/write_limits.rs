//! `write` and `bench` bound what they hold in memory: a batch (or, for
//! `bench`, a batch per thread) over 256 MiB of payload is refused with a
//! message and exit 2 before anything is allocated or created, rather than
//! aborting when an allocation fails. Run under an address-space limit
//! (`ulimit -v`), as the failure was found.

mod common;

use std::process::Command;

use common::normalise;

/// 1 GiB of address space: room for the biggest batch the bound allows
/// (256 MiB of payload, and its encoded copy), not for 4 GiB.
const ADDRESS_SPACE_KIB: u64 = 1024 * 1024;

/// Runs felix-store with `args` under `ulimit -v`; returns the exit code
/// (`None` when a signal ended it) and stderr.
fn run_limited(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new("sh")
        .arg("-c")
        .arg(format!(
            r#"ulimit -v {ADDRESS_SPACE_KIB} && exec "$0" "$@""#
        ))
        .arg(env!("CARGO_BIN_EXE_felix-store"))
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn write_batch_over_the_memory_bound_is_refused_before_allocating() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("shard");
    let d = dir.to_str().unwrap();
    let mut text = String::new();
    for args in [
        vec![
            "write",
            "--dir",
            d,
            "--records",
            "64",
            "--batch",
            "64",
            "--payload-bytes",
            "67108864",
        ],
        vec![
            "bench",
            "--dir",
            d,
            "--records",
            "8",
            "--concurrency",
            "8",
            "--payload-bytes",
            "67108864",
        ],
    ] {
        let (code, stderr) = run_limited(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        text.push_str(&normalise(
            &format!("$ felix-store {}\n{stderr}", args.join(" ")),
            root.path(),
        ));
        assert!(
            !dir.exists(),
            "{args:?}: refused before the shard is created"
        );
    }
    insta::assert_snapshot!(text);
}

#[test]
fn write_batch_within_the_memory_bound_runs_under_the_limit() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("shard");
    // Two 64 MiB records in one batch: 128 MiB of payload held at once.
    let (code, stderr) = run_limited(&[
        "write",
        "--dir",
        dir.to_str().unwrap(),
        "--records",
        "2",
        "--batch",
        "2",
        "--payload-bytes",
        "67108864",
        "--fsync",
        "none",
        "--no-preallocate",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let len = std::fs::metadata(dir.join("00000000000000000000.log"))
        .unwrap()
        .len();
    assert_eq!(len, 32 + 2 * (28 + 67_108_864));
}
