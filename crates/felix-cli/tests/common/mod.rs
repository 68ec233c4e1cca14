//! Helpers shared by the felix-store tests: run the built binary, copy
//! fixtures into temporary directories, normalise output for snapshots, and
//! take byte snapshots of directories.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What one run of the binary produced.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    /// The stdout lines parsed as JSON.
    pub(crate) fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }
}

/// The binary under test.
pub(crate) fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_felix-store"))
}

/// Runs the binary with `args` to completion.
pub(crate) fn run<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let output = bin().args(args).output().expect("run felix-store");
    Run {
        code: output.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(output.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(output.stderr).expect("utf-8 stderr"),
    }
}

/// Runs the binary and renders the run for a snapshot: the command line,
/// the exit status, stdout and stderr, with `root` replaced by `[DIR]`.
pub(crate) fn transcript(args: &[&str], root: &Path) -> String {
    let run = run(args);
    let shown: Vec<String> = args.iter().map(|a| normalise(a, root)).collect();
    format!(
        "$ felix-store {}\nexit: {}\n--- stdout\n{}--- stderr\n{}",
        shown.join(" "),
        run.code,
        normalise(&run.stdout, root),
        normalise(&run.stderr, root)
    )
}

/// Replaces the temporary directory `root` with `[DIR]`.
pub(crate) fn normalise(text: &str, root: &Path) -> String {
    text.replace(&root.display().to_string(), "[DIR]")
}

/// `path` as `&str`, for argument lists.
pub(crate) fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// The golden fixtures directory.
pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v2")
}

/// The interop corpus, `fixtures/interop/` (read-only).
pub(crate) fn interop() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop")
}

/// Copies the fixture shard `fixtures/v2/<case>` into a temporary directory
/// as `<tmp>/<last component of case>`: only segments, indexes and the
/// epochs file, never the hex dumps beside them.
pub(crate) fn fixture_copy(case: &str) -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let name = Path::new(case).file_name().unwrap();
    let dir = root.path().join(name);
    copy_shard(&fixtures().join(case), &dir);
    (root, dir)
}

/// Copies one fixture shard's binaries to `to`.
pub(crate) fn copy_shard(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = name.ends_with(".log")
            || name.ends_with(".index")
            || name.ends_with(".timeindex")
            || name == "epochs"
            || name == "log-start"
            || name == "raft-state";
        if ours {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

/// Copies the interop case into a temporary directory as `<tmp>/<case>`,
/// recursively, with write permission (the corpus is read-only).
pub(crate) fn interop_copy(case: &str) -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join(case);
    copy_tree(&interop().join(case), &dir);
    (root, dir)
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
            let mut perms = std::fs::metadata(&target).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            std::fs::set_permissions(&target, perms).unwrap();
        }
    }
}

/// Every file under `dir` (recursively) with its bytes: compared before and
/// after a command that must not modify anything. Directory listings are
/// covered too, since an added or removed file changes the map.
pub(crate) fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                out.insert(entry.path(), std::fs::read(entry.path()).unwrap());
            }
        }
    }
    out
}

/// The interop corpus's payload for `offset`, `len` bytes long.
pub(crate) fn reference_payload(offset: u64, len: usize) -> Vec<u8> {
    let mut p = format!("felix-record-{offset:020}-").into_bytes();
    p.truncate(len);
    let start = p.len();
    p.extend((start..len).map(|i| ((offset % 251) as usize + i) as u8));
    p
}

/// Decodes a hex string.
pub(crate) fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}
