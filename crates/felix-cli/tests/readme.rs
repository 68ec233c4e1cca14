//! The README's `felix-store` transcripts are what the tool prints: every
//! ```text block whose commands name `torn-tail` (a copy of the interop
//! corpus's case) or `RecordChecksum` (a copy of the golden fixture) is
//! replayed command by command in a fresh directory, and its output and
//! exit statuses compared line for line.

mod common;

use std::path::Path;

use common::{copy_shard, fixtures, interop};

/// The shards the README's transcripts run on, and where each comes from.
const SHARDS: [&str; 2] = ["torn-tail", "RecordChecksum"];

/// One command of a transcript, with what it printed and, when the README
/// shows `echo $?` after it, its exit status.
#[derive(Debug)]
struct Step {
    args: Vec<String>,
    output: String,
    status: Option<i32>,
}

/// The transcripts of the README's ```text blocks that run only on
/// [`SHARDS`].
fn transcripts(readme: &str) -> Vec<Vec<Step>> {
    let mut blocks = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        if line != "```text" {
            continue;
        }
        let mut steps: Vec<Step> = Vec::new();
        while let Some(line) = lines.next() {
            if line == "```" {
                break;
            }
            if let Some(command) = line.strip_prefix("$ felix-store ") {
                steps.push(Step {
                    args: command.split_whitespace().map(str::to_owned).collect(),
                    output: String::new(),
                    status: None,
                });
            } else if line == "$ echo $?" {
                let status = lines.next().expect("a status after `echo $?`");
                if let Some(step) = steps.last_mut() {
                    step.status = Some(status.parse().expect("a number"));
                }
            } else if let Some(step) = steps.last_mut() {
                step.output.push_str(line);
                step.output.push('\n');
            }
        }
        let ours = !steps.is_empty()
            && steps
                .iter()
                .all(|s| s.args.last().is_some_and(|a| SHARDS.contains(&a.as_str())));
        if ours {
            blocks.push(steps);
        }
    }
    blocks
}

/// A fresh directory holding a copy of each of [`SHARDS`].
fn shards() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_shard(&interop().join("torn-tail"), &dir.path().join("torn-tail"));
    copy_shard(
        &fixtures().join("damaged/RecordChecksum"),
        &dir.path().join("RecordChecksum"),
    );
    dir
}

fn replay(steps: &[Step], dir: &Path) {
    for step in steps {
        let out = common::bin()
            .args(&step.args)
            .current_dir(dir)
            .output()
            .unwrap();
        let printed = format!(
            "{}{}",
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap()
        );
        assert_eq!(
            printed,
            step.output,
            "README's `felix-store {}` prints otherwise",
            step.args.join(" ")
        );
        if let Some(status) = step.status {
            assert_eq!(
                out.status.code(),
                Some(status),
                "README's `felix-store {}` exits otherwise",
                step.args.join(" ")
            );
        }
    }
}

#[test]
fn readme_transcripts_on_torn_tail_and_record_checksum_are_what_the_tool_prints() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let blocks = transcripts(&readme);
    let commands: usize = blocks.iter().map(Vec::len).sum();
    // torn-tail: verify, recover, verify --json; RecordChecksum: verify,
    // recover, dump.
    assert_eq!((blocks.len(), commands), (2, 6), "{blocks:#?}");
    for steps in &blocks {
        let dir = shards();
        replay(steps, dir.path());
    }
}
