//! `verify`, `recover` and `write` on a shard directory holding things we
//! did not put there: a FIFO or a device link named like a segment is
//! reported as what it is and never opened (no command blocks), and
//! `verify`'s notes say exactly what an open does with temporaries and with
//! names of ours that are not regular files.

mod common;

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Run, bin, fixture_copy, s, transcript};
use rustix::fs::{CWD, FileType as NodeType, Mode, mknodat};

fn mkfifo(path: &Path) {
    mknodat(CWD, path, NodeType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
}

/// Runs `cmd` to completion, killing it and failing the test if it takes
/// longer than ten seconds (a command blocked on a FIFO).
fn run_in_time(mut cmd: Command) -> Run {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(10) {
            child.kill().unwrap();
            panic!("{cmd:?} blocked");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output().unwrap();
    Run {
        code: output.status.code().unwrap(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

fn felix_store(args: &[&str]) -> Command {
    let mut cmd = bin();
    cmd.args(args);
    cmd
}

#[test]
fn verify_recover_write_with_a_fifo_named_like_a_segment_exit_2_without_blocking() {
    let (_root, dir) = fixture_copy("small-shard");
    let fifo = dir.join("00000000000000000007.log");
    mkfifo(&fifo);
    let reason = format!(
        "{} is named like a segment but is a FIFO, not a regular file; it was not opened, and the shard cannot be opened until it is moved away or the segment restored\n",
        fifo.display()
    );
    // `verify` reports each shard of what it was given on a line of its own,
    // naming the shard; the commands that act on one shard do not.
    for (args, prefix) in [
        (vec!["verify", s(&dir)], "shard small-shard: "),
        (vec!["recover", s(&dir)], ""),
        (vec!["write", "--dir", s(&dir), "--records", "1"], ""),
    ] {
        let expected = format!("felix-store: {prefix}{reason}");
        let run = run_in_time(felix_store(&args));
        assert_eq!(
            (run.code, run.stderr.as_str()),
            (2, expected.as_str()),
            "{args:?}"
        );
    }
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

#[test]
fn verify_a_device_link_named_like_a_segment_names_it_as_a_device() {
    let (_root, dir) = fixture_copy("small-shard");
    let link = dir.join("00000000000000000005.log");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    let direct = run_in_time(felix_store(&["verify", s(&link)]));
    assert_eq!(direct.code, 2);
    assert_eq!(
        direct.stderr,
        format!(
            "felix-store: {} is a character device behind a symbolic link, not a regular file: neither a segment file nor a shard directory; it was not opened\n",
            link.display()
        )
    );
    let shard = run_in_time(felix_store(&["verify", s(&dir)]));
    assert_eq!(shard.code, 2);
    assert!(
        shard
            .stderr
            .contains("is named like a segment but is a character device behind a symbolic link"),
        "{}",
        shard.stderr
    );
}

#[test]
fn verify_notes_what_an_open_does_with_temporaries_and_names_that_are_not_files() {
    let (root, dir) = fixture_copy("small-shard");
    std::fs::create_dir(dir.join("clean-shutdown")).unwrap();
    mkfifo(&dir.join("lock"));
    for name in [
        "operator-backup.log.tmp",
        "00000000000000000003.log.tmp",
        "clean-shutdown.tmp",
    ] {
        std::fs::write(dir.join(name), b"x").unwrap();
    }
    insta::assert_snapshot!(transcript(&["verify", s(&dir)], root.path()));

    let write = run_in_time(felix_store(&["write", "--dir", s(&dir), "--records", "1"]));
    assert_eq!(write.code, 0, "{}", write.stderr);
    // What verify said the open would do is what it did.
    assert!(
        dir.join("operator-backup.log.tmp").exists(),
        "a stray stays"
    );
    assert!(!dir.join("00000000000000000003.log.tmp").exists());
    assert!(!dir.join("clean-shutdown.tmp").exists());
    assert!(dir.join("clean-shutdown").is_dir());
    insta::assert_snapshot!(transcript(&["verify", s(&dir)], root.path()));
}

#[test]
fn dump_index_with_a_fifo_named_like_an_index_reports_it_without_blocking() {
    let (_root, dir) = fixture_copy("small-shard");
    let index = dir.join("00000000000000000000.index");
    std::fs::remove_file(&index).unwrap();
    mkfifo(&index);
    let problem = "a FIFO, not a regular file: never opened; an open rebuilds the index in memory from its segment and does not write it there";
    let dump = run_in_time(felix_store(&["dump", "--index", "--json", s(&dir)]));
    assert_eq!((dump.code, dump.stderr.as_str()), (0, ""));
    assert_eq!(
        dump.json_lines(),
        [serde_json::json!({
            "type": "index", "segment": 0, "len": null, "base_offset": null,
            "entries": [], "torn_bytes": 0, "valid": false, "problem": problem,
            "rebuilt_on_open": true,
        })]
    );
    let human = run_in_time(felix_store(&["dump", "--index", s(&dir)]));
    assert_eq!(
        (human.code, human.stdout),
        (0, format!("index 00000000000000000000.index: {problem}\n"))
    );
    // Named directly, it is refused as what it is, as every command does.
    let direct = run_in_time(felix_store(&["dump", "--index", s(&index)]));
    assert_eq!(
        (direct.code, direct.stderr),
        (
            2,
            format!(
                "felix-store: {} is a FIFO, not a regular file: neither a segment file nor a shard directory; it was not opened\n",
                index.display()
            )
        )
    );
    assert!(
        std::fs::symlink_metadata(&index)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}
