//! `felix-store verify` on the golden fixtures: the exact report for every
//! damaged and tolerated shard (snapshots), the exit status, and not a byte
//! modified.

mod common;

use common::{files, fixture_copy, fixtures, run, s, transcript};

/// Every fixture shard: `small-shard`, `damaged/*`, `tolerated/*`.
fn fixture_cases() -> Vec<String> {
    let mut cases = vec!["small-shard".to_owned()];
    for group in ["damaged", "tolerated"] {
        let mut names: Vec<String> = std::fs::read_dir(fixtures().join(group))
            .unwrap()
            .map(|e| format!("{group}/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        names.sort();
        cases.extend(names);
    }
    cases
}

#[test]
fn verify_fixtures_human_and_json_match_snapshots() {
    for case in fixture_cases() {
        let (root, dir) = fixture_copy(&case);
        let before = files(root.path());
        let text = [
            transcript(&["verify", s(&dir)], root.path()),
            transcript(&["verify", "--json", s(&dir)], root.path()),
            transcript(&["verify", "--quick", s(&dir)], root.path()),
        ]
        .join("\n");
        assert_eq!(files(root.path()), before, "{case}: verify modified a file");
        insta::assert_snapshot!(format!("verify_{}", case.replace('/', "_")), text);
    }
}

#[test]
fn verify_fixtures_exit_status_is_1_exactly_when_a_default_open_fails() {
    for case in fixture_cases() {
        let (_root, dir) = fixture_copy(&case);
        let result = run(["verify", "--json", s(&dir)]);
        let line = &result.json_lines()[0];
        let refused = line["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["repair"] != "default");
        assert_eq!(result.code, i32::from(refused), "{case}: {}", result.stdout);
        // The directory is named after the variant a reader must report.
        if let Some(kind) = case.strip_prefix("damaged/")
            && !kind.starts_with("Index")
        {
            assert_eq!(line["findings"][0]["kind"], kind, "{case}");
        } else {
            assert_eq!(line["findings"], serde_json::json!([]), "{case}");
        }
    }
}

#[test]
fn verify_segment_file_path_verifies_its_whole_shard() {
    let (root, dir) = fixture_copy("damaged/Truncated");
    let segment = dir.join("00000000000000000000.log");
    insta::assert_snapshot!(transcript(&["verify", s(&segment)], root.path()));
}

#[test]
fn verify_root_prints_one_json_line_per_shard_sorted_by_name() {
    let root = tempfile::tempdir().unwrap();
    for case in ["small-shard", "damaged/RecordChecksum", "damaged/Truncated"] {
        let name = case.rsplit('/').next().unwrap();
        common::copy_shard(&fixtures().join(case), &root.path().join(name));
    }
    let before = files(root.path());
    let result = run(["verify", "--json", s(root.path())]);
    assert_eq!(files(root.path()), before);
    assert_eq!(result.code, 1, "one shard is refused, so the root is");
    let shards: Vec<_> = result
        .json_lines()
        .iter()
        .map(|l| l["shard"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(shards, ["RecordChecksum", "Truncated", "small-shard"]);
    insta::assert_snapshot!(transcript(&["verify", s(root.path())], root.path()));
}

#[test]
fn verify_missing_path_exits_2_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let missing = root.path().join("no-such-shard");
    let result = run(["verify", s(&missing)]);
    assert_eq!(result.code, 2);
    assert_eq!(result.stdout, "");
    assert!(result.stderr.contains(s(&missing)), "{}", result.stderr);
}

#[test]
fn verify_directory_without_segments_exits_2() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("notes.txt"), "hello").unwrap();
    let result = run(["verify", s(root.path())]);
    assert_eq!(result.code, 2);
    assert!(
        result.stderr.contains("holds no segment files"),
        "{}",
        result.stderr
    );
}

#[test]
fn verify_unknown_flag_is_a_usage_error_exit_2() {
    let result = run(["verify", "--no-such-flag", "x"]);
    assert_eq!(result.code, 2);
    assert!(
        result.stderr.contains("--no-such-flag"),
        "{}",
        result.stderr
    );
}

/// The commands a report suggests are quoted for a shell, so copying one
/// runs it on the shard whatever its path holds (a space, a quote).
#[test]
fn verify_stat_and_recover_suggest_shell_quoted_commands() {
    let mut text = Vec::new();
    for (case, name) in [
        ("damaged/Truncated", "my shard"),
        ("damaged/RecordChecksum", "it's mine"),
    ] {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(name);
        common::copy_shard(&fixtures().join(case), &dir);
        text.push(transcript(&["verify", s(&dir)], root.path()));
        text.push(transcript(&["stat", s(&dir)], root.path()));
        text.push(transcript(&["recover", "--dry-run", s(&dir)], root.path()));
        // What the suggestion says, run by a shell, names this very shard.
        let verify = run(["verify", s(&dir)]);
        let line = verify.stdout.lines().last().unwrap();
        let command = line.split('`').nth(1).unwrap();
        let dry_run = command.replace("felix-store recover", "felix-store recover --dry-run");
        let bin = env!("CARGO_BIN_EXE_felix-store");
        let shell = std::process::Command::new("sh")
            .arg("-c")
            .arg(dry_run.replacen("felix-store", bin, 1))
            .output()
            .unwrap();
        let out = String::from_utf8(shell.stdout).unwrap();
        assert!(
            out.starts_with(&format!("shard {name}:")),
            "{command}: {out}"
        );
    }
    let text = text.join("\n");
    insta::assert_snapshot!(text);
}
