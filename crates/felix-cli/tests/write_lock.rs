//! The scenario: a writer runs in the background, its shard's
//! `lock` file is deleted, and a second `felix-store write` on the same
//! directory is refused — the first writer's acknowledged records stay
//! exactly as acknowledged.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use common::{bin, run, s, unhex};
use serde_json::Value;

const PAYLOAD_BYTES: usize = 100;

fn ack(line: &str) -> Option<(u64, u64)> {
    let v: Value = serde_json::from_str(line).ok()?;
    (v["event"] == "ack").then(|| {
        (
            v["first_offset"].as_u64().unwrap(),
            v["last_offset"].as_u64().unwrap(),
        )
    })
}

#[test]
fn write_after_the_lock_file_is_removed_is_refused_and_acked_records_survive() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("c");
    let mut first = bin()
        .args(["write", "--dir", s(&dir), "--report-acks"])
        .args([
            "--records",
            "100000000",
            "--payload-bytes",
            &PAYLOAD_BYTES.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(first.stdout.take().unwrap()).lines();
    let opened: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(opened["event"], "opened");
    let mut acks = Vec::new();
    while acks.len() < 50 {
        acks.extend(ack(&lines.next().unwrap().unwrap()));
    }

    std::fs::remove_file(dir.join("lock")).unwrap();
    let second = run([
        "write",
        "--dir",
        s(&dir),
        "--records",
        "300",
        "--payload-bytes",
        "50",
    ]);
    assert_eq!(second.code, 2, "{}{}", second.stdout, second.stderr);
    assert_eq!(
        second.stderr,
        format!(
            "felix-store: shard directory {} is locked by another writer\n",
            dir.display()
        )
    );
    assert_eq!(second.stdout, "", "the second writer never opened");

    // The first writer kept going; take a few more acks, then kill it.
    while acks.len() < 100 {
        acks.extend(ack(&lines.next().unwrap().unwrap()));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    acks.extend(lines.map_while(Result::ok).filter_map(|l| ack(&l)));
    let highest_acked = acks.iter().map(|&(_, last)| last).max().unwrap();

    let verify = run(["verify", "--json", "--full", s(&dir)]);
    let line = &verify.json_lines()[0];
    assert_eq!(verify.code, 0, "{line}");
    assert!(
        line["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["repair"] == "default"),
        "at most a torn tail: {line}"
    );
    let next = line["next_offset"].as_u64().unwrap();
    assert!(
        next > highest_acked,
        "next {next}, highest ack {highest_acked}"
    );
    let dump = run(["dump", "--json", "--payload", "hex", s(&dir)]);
    let mut offset = 0;
    for record in dump.json_lines().iter().filter(|l| l["type"] == "record") {
        assert_eq!(record["offset"].as_u64().unwrap(), offset);
        assert_eq!(
            unhex(record["payload_hex"].as_str().unwrap()),
            common::reference_payload(offset, PAYLOAD_BYTES),
            "offset {offset} is the first writer's"
        );
        offset += 1;
    }
    assert!(offset > highest_acked, "every acknowledged record dumped");
}
