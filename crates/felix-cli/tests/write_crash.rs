//! `felix-store write` as crash tests drive it: killed with SIGKILL while
//! appending with `--fsync on_commit --report-acks`, then `recover` and
//! `verify`: every acknowledged offset is there and every payload follows
//! the reference pattern.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use common::{bin, run, s, unhex};
use serde_json::Value;

const PAYLOAD_BYTES: usize = 200;

/// Starts a writer on `dir`, reads its `opened` line and `acks` ack lines,
/// kills it with SIGKILL, and returns its start offset and every ack it
/// printed (including any still in the pipe when it died).
fn write_then_kill(dir: &std::path::Path, acks: usize) -> (u64, Vec<(u64, u64)>) {
    let mut child = bin()
        .args([
            "write",
            "--dir",
            s(dir),
            "--fsync",
            "on_commit",
            "--report-acks",
        ])
        .args([
            "--records",
            "100000000",
            "--batch",
            "3",
            "--payload-bytes",
            &PAYLOAD_BYTES.to_string(),
        ])
        .args(["--segment-bytes", "65536", "--index-spacing-bytes", "1024"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let opened: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(
        (&opened["event"], &opened["fsync"]),
        (&"opened".into(), &"on_commit".into())
    );
    let start = opened["start_offset"].as_u64().unwrap();
    let mut seen = Vec::new();
    let parse = |line: String| -> (u64, u64) {
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["event"], "ack", "{line}");
        (
            v["first_offset"].as_u64().unwrap(),
            v["last_offset"].as_u64().unwrap(),
        )
    };
    for _ in 0..acks {
        seen.push(parse(lines.next().unwrap().unwrap()));
    }
    child.kill().unwrap(); // SIGKILL: no destructor, no final sync.
    child.wait().unwrap();
    // Lines already in the pipe were printed after their batch was durable.
    for line in lines {
        let Ok(line) = line else { break };
        if line.is_empty() {
            continue;
        }
        // A kill can land between the bytes of a line; only whole lines count.
        if let Ok(v) = serde_json::from_str::<Value>(&line) {
            seen.push((
                v["first_offset"].as_u64().unwrap(),
                v["last_offset"].as_u64().unwrap(),
            ));
        }
    }
    (start, seen)
}

#[test]
fn write_killed_with_sigkill_keeps_every_acknowledged_record() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("crash");
    let mut highest_acked: Option<u64> = None;
    for acks in [7, 90, 400] {
        let (start, seen) = write_then_kill(&dir, acks);
        // Reopening (recovery) kept everything acknowledged before.
        if let Some(h) = highest_acked {
            assert!(start > h, "restarted at {start}, but {h} was acknowledged");
        }
        let mut expected = start;
        for (first, last) in seen {
            assert_eq!(
                (first, last),
                (expected, expected + 2),
                "acks are contiguous batches of 3"
            );
            expected = last + 1;
            highest_acked = Some(last);
        }
    }
    let highest_acked = highest_acked.unwrap();

    let recover = run(["recover", "--json", s(&dir)]);
    assert_eq!(recover.code, 0, "{}{}", recover.stdout, recover.stderr);
    let verify = run(["verify", "--json", "--full", s(&dir)]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    let line = &verify.json_lines()[0];
    assert_eq!(line["findings"], serde_json::json!([]), "{line}");
    let next = line["next_offset"].as_u64().unwrap();
    assert!(
        next > highest_acked,
        "next offset {next}, highest ack {highest_acked}"
    );

    let dump = run(["dump", "--json", "--payload", "hex", s(&dir)]);
    assert_eq!(dump.code, 0);
    let mut offset = 0;
    for record in dump
        .json_lines()
        .into_iter()
        .filter(|l| l["type"] == "record")
    {
        assert_eq!(record["offset"].as_u64().unwrap(), offset);
        assert_eq!(
            unhex(record["payload_hex"].as_str().unwrap()),
            common::reference_payload(offset, PAYLOAD_BYTES),
            "offset {offset}"
        );
        offset += 1;
    }
    assert_eq!(offset, next);
}

/// Replaces measured figures and the temporary path so a run's lines can be
/// snapshotted.
fn normalise(line: &Value, root: &std::path::Path) -> String {
    let mut line = line.clone();
    if let Value::Object(map) = &mut line {
        for key in [
            "elapsed_seconds",
            "records_per_second",
            "mb_per_second",
            "appends_per_sync",
        ] {
            if map.contains_key(key) {
                map.insert(key.into(), "[measured]".into());
            }
        }
        if let Some(latency) = map.get_mut("latency_us").and_then(Value::as_object_mut) {
            for value in latency.values_mut() {
                *value = "[measured]".into();
            }
        }
    }
    common::normalise(&line.to_string(), root)
}

#[test]
fn write_clean_shutdown_prints_opened_acks_finished_closed() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("shard");
    let first = run([
        "write",
        "--dir",
        s(&dir),
        "--records",
        "7",
        "--batch",
        "3",
        "--payload-bytes",
        "40",
        "--report-acks",
        "--clean-shutdown",
    ]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    // fsync none: nothing is durable until the clean shutdown's sync, so the
    // acks come after the last append.
    let second = run([
        "write",
        "--dir",
        s(&dir),
        "--records",
        "4",
        "--batch",
        "2",
        "--payload-bytes",
        "40",
        "--fsync",
        "none",
        "--report-acks",
        "--clean-shutdown",
    ]);
    // Without --clean-shutdown and with fsync none nothing is ever acked.
    let third = run([
        "write",
        "--dir",
        s(&dir),
        "--records",
        "2",
        "--fsync",
        "none",
        "--report-acks",
    ]);
    let text: Vec<String> = [first, second, third]
        .iter()
        .flat_map(|r| {
            r.json_lines()
                .iter()
                .map(|l| normalise(l, root.path()))
                .collect::<Vec<_>>()
        })
        .collect();
    insta::assert_snapshot!(text.join("\n"));
    let verify = run(["verify", "--json", s(&dir)]);
    assert_eq!(verify.json_lines()[0]["next_offset"], 13);
}

#[test]
fn bench_prints_the_reference_fields() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("bench");
    let result = run([
        "bench",
        "--dir",
        s(&dir),
        "--records",
        "300",
        "--concurrency",
        "3",
        "--batch",
        "2",
        "--payload-bytes",
        "64",
        "--warmup-records",
        "30",
        "--label",
        "ci",
        "--segment-bytes",
        "8192",
    ]);
    assert_eq!(result.code, 0, "{}", result.stderr);
    let lines = result.json_lines();
    assert_eq!(lines.len(), 1);
    let line = &lines[0];
    let latency: Vec<f64> = ["p50", "p90", "p99", "p999", "max"]
        .iter()
        .map(|k| line["latency_us"][k].as_f64().unwrap())
        .collect();
    assert!(latency.windows(2).all(|w| w[0] <= w[1]), "{latency:?}");
    // The rate is the measured records over the measured time (both as
    // printed, so within the rounding of the time to a microsecond).
    let (records, seconds) = (
        line["records"].as_f64().unwrap(),
        line["elapsed_seconds"].as_f64().unwrap(),
    );
    assert_eq!(records, 300.0);
    let rate = line["records_per_second"].as_f64().unwrap();
    assert!(
        (rate * seconds - records).abs() <= records * 1e-6 / seconds + 0.1,
        "{rate} records/s over {seconds} s is not {records} records"
    );
    assert!(
        line["appends_per_sync"].as_f64().unwrap() >= 1.0,
        "on_commit syncs cover at least one append"
    );
    insta::assert_snapshot!(normalise(line, root.path()));
    let verify = run(["verify", "--json", s(&dir)]);
    assert_eq!(
        verify.json_lines()[0]["records"],
        330,
        "warm-up records are written too"
    );
}

/// Both ways of running the appenders acknowledge every measured record
/// once, at the offsets after the warm-up's, and say how they ran: `async`
/// (the default) from one thread, `threads` from one thread per appender.
#[test]
fn bench_acks_every_measured_record_once_whichever_way_the_appenders_run() {
    for (appenders, threads) in [(None, 1), (Some("threads"), 3), (Some("async"), 1)] {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("bench");
        let mut argv = vec![
            "bench",
            "--dir",
            s(&dir),
            "--records",
            "300",
            "--concurrency",
            "3",
            "--batch",
            "2",
            "--warmup-records",
            "30",
            "--report-acks",
        ];
        if let Some(how) = appenders {
            argv.extend(["--appenders", how]);
        }
        let result = run(argv);
        assert_eq!(result.code, 0, "{appenders:?}: {}", result.stderr);
        let lines = result.json_lines();
        let bench = lines.iter().find(|l| l["event"] == "bench").unwrap();
        assert_eq!(
            bench["appenders"],
            appenders.unwrap_or("async"),
            "{appenders:?}"
        );
        assert_eq!(bench["appender_threads"], threads, "{appenders:?}");
        let mut acked: Vec<(u64, u64)> = lines
            .iter()
            .filter(|l| l["event"] == "ack")
            .map(|l| {
                (
                    l["first_offset"].as_u64().unwrap(),
                    l["last_offset"].as_u64().unwrap(),
                )
            })
            .collect();
        acked.sort_unstable();
        let mut next = 30;
        for (first, last) in acked {
            assert_eq!(first, next, "{appenders:?}: a gap or an overlap");
            next = last + 1;
        }
        assert_eq!(next, 330, "{appenders:?}");
    }
}

#[test]
fn write_rejects_zero_batch_as_usage() {
    let root = tempfile::tempdir().unwrap();
    let result = run(["write", "--dir", s(&root.path().join("x")), "--batch", "0"]);
    assert_eq!(result.code, 2);
    assert!(result.stderr.contains("--batch"), "{}", result.stderr);
}
