//! `cargo xtask bench [--quick]`: builds felix-bench in release mode, runs
//! every scenario's implementations in alternation (A B C A B C …, at least
//! five rounds), takes medians, compares felix with the limit measured in
//! the same run, and writes `target/bench/results.jsonl` (every run),
//! `target/bench/results.md` (the table) and the table into
//! `docs/performance.md` between its markers.
//!
//! Orchestration only: every measurement is one process of `felix-bench` or
//! of its `peers` example printing one JSON line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Where `docs/performance.md` takes the generated text.
pub const BEGIN_MARKER: &str = "<!-- bench:begin -->";
/// End of the generated text.
pub const END_MARKER: &str = "<!-- bench:end -->";

const MIB: u64 = 1 << 20;

/// Which program runs an implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Program {
    /// `target/release/felix-bench`.
    Bench,
    /// `target/release/examples/peers`.
    Peers,
}

/// One implementation of a cell: a program and its arguments.
#[derive(Debug, Clone)]
struct Run {
    label: String,
    program: Program,
    args: Vec<String>,
}

/// One row group of the table: a scenario with fixed parameters, run by
/// several implementations in alternation.
#[derive(Debug, Clone)]
struct Cell {
    key: String,
    title: String,
    runs: Vec<Run>,
    /// The limit's label in `runs`, if the cell has one.
    limit: Option<String>,
}

/// Medians of one implementation in one cell.
type Medians = BTreeMap<String, f64>;

/// Every run's figures, by cell and implementation label.
type Samples = BTreeMap<String, BTreeMap<String, Vec<BTreeMap<String, f64>>>>;

/// Sizes of a full or a quick run.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    rounds: usize,
    append_b1: u64,
    append_b16: u64,
    append_b256: u64,
    commit_1: u64,
    commit_8: u64,
    commit_64: u64,
    segment_bytes: u64,
    read_records: u64,
    random_reads: u64,
    sealed_segments: u64,
    crash_segment_bytes: u64,
    crash_newest: [u64; 3],
    crash_sealed: [u64; 3],
    memory_bytes: [u64; 2],
}

const FULL: Sizes = Sizes {
    rounds: 5,
    append_b1: 2_000_000,
    append_b16: 8_000_000,
    append_b256: 16_000_000,
    commit_1: 3_000,
    commit_8: 24_000,
    commit_64: 64_000,
    segment_bytes: 1 << 30,
    read_records: 10_000_000,
    random_reads: 200_000,
    sealed_segments: 10_000,
    crash_segment_bytes: 256 * MIB,
    crash_newest: [64 * MIB, 256 * MIB, 1024 * MIB],
    crash_sealed: [0, 4, 16],
    memory_bytes: [512 * MIB, 2048 * MIB],
};

const QUICK: Sizes = Sizes {
    rounds: 5,
    append_b1: 300_000,
    append_b16: 1_000_000,
    append_b256: 2_000_000,
    commit_1: 800,
    commit_8: 4_000,
    commit_64: 12_800,
    segment_bytes: 128 * MIB,
    read_records: 1_000_000,
    random_reads: 50_000,
    sealed_segments: 10_000,
    crash_segment_bytes: 64 * MIB,
    crash_newest: [16 * MIB, 64 * MIB, 256 * MIB],
    crash_sealed: [0, 4, 16],
    memory_bytes: [128 * MIB, 512 * MIB],
};

const PEERS: [&str; 3] = ["commitlog", "raft-engine", "wal-db"];

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn run(label: &str, program: Program, list: &[&str]) -> Run {
    Run {
        label: label.to_string(),
        program,
        args: args(list),
    }
}

/// `peers <scenario> <peer> <rest>` for every peer, labelled by peer.
fn peer_runs(scenario: &str, rest: &[&str]) -> Vec<Run> {
    PEERS
        .iter()
        .map(|peer| run(peer, Program::Peers, &[&[scenario, peer], rest].concat()))
        .collect()
}

/// The cells, in table order.
fn cells(s: &Sizes, data: &Path) -> Vec<Cell> {
    let d = |sub: &str| data.join(sub).to_string_lossy().into_owned();
    let mut cells = Vec::new();
    // Appends with durability none.
    for (batch, records, limit) in [
        (1, s.append_b1, "limit-write"),
        (16, s.append_b16, "limit-bufwriter"),
        (256, s.append_b256, "limit-bufwriter"),
    ] {
        let (b, n, dir) = (batch.to_string(), records.to_string(), d("append"));
        let common = [
            "--dir",
            &dir,
            "--durability",
            "none",
            "--batch",
            &b,
            "--records",
            &n,
            "--timed",
            "false",
        ];
        let mut runs = vec![
            run(
                "felix",
                Program::Bench,
                &[&["append", "felix"], &common[..]].concat(),
            ),
            run(
                limit,
                Program::Bench,
                &[&["append", limit], &common[..]].concat(),
            ),
        ];
        runs.extend(peer_runs("append", &common));
        cells.push(Cell {
            key: format!("append-none-b{batch}"),
            title: format!("append, durability none, 128 B, batch {batch}, 1 thread"),
            runs,
            limit: Some(limit.to_string()),
        });
    }
    // Preallocation on and off, on-commit appends from 1, 8, 64 threads.
    for (threads, records) in [(1, s.commit_1), (8, s.commit_8), (64, s.commit_64)] {
        let (t, n, dir) = (threads.to_string(), records.to_string(), d("commit"));
        let common = [
            "--dir",
            &dir,
            "--durability",
            "on_commit",
            "--batch",
            "1",
            "--records",
            &n,
            "--threads",
            &t,
        ];
        let mut runs = vec![run(
            "felix",
            Program::Bench,
            &[&["append", "felix"], &common[..]].concat(),
        )];
        let limit = (threads == 1).then(|| {
            runs.push(run(
                "limit-fdatasync",
                Program::Bench,
                &[&["append", "limit-fdatasync"], &common[..]].concat(),
            ));
            runs.push(run(
                "limit-fsync",
                Program::Bench,
                &[&["append", "limit-fsync"], &common[..]].concat(),
            ));
            runs.push(run(
                "felix-no-prealloc",
                Program::Bench,
                &[&["append", "felix", "--preallocate", "false"], &common[..]].concat(),
            ));
            "limit-fdatasync".to_string()
        });
        runs.extend(peer_runs("append", &common));
        cells.push(Cell {
            key: format!("append-commit-t{threads}"),
            title: format!("append, OnCommit, 128 B, batch 1, {threads} thread(s)"),
            runs,
            limit,
        });
    }
    // Recovery scan and index rebuild of one newest segment.
    let seg = d("segment");
    cells.push(Cell {
        key: "scan".into(),
        title: format!(
            "recovery: full scan of a {} MiB newest segment, 128 B records",
            s.segment_bytes / MIB
        ),
        runs: [
            vec![
                run("felix", Program::Bench, &["scan", "felix", "--dir", &seg]),
                run("limit", Program::Bench, &["scan", "limit", "--dir", &seg]),
            ],
            // commitlog's open reads no record: its row is labelled so, and
            // no ratio is drawn from it.
            PEERS
                .iter()
                .map(|p| {
                    let label = if *p == "commitlog" {
                        "commitlog (reads nothing on open)"
                    } else {
                        p
                    };
                    run(label, Program::Peers, &["scan", p, "--dir", &seg])
                })
                .collect(),
        ]
        .concat(),
        limit: Some("limit".into()),
    });
    cells.push(Cell {
        key: "index-rebuild".into(),
        title: "index rebuild (headers only) of the same segment".into(),
        runs: vec![run(
            "felix",
            Program::Bench,
            &["index-rebuild", "felix", "--dir", &seg],
        )],
        limit: None,
    });
    // Reads of a shard of `read_records` records.
    let shard = d("shard");
    let reads = s.random_reads.to_string();
    for (key, title) in [
        (
            "seq-read",
            "sequential read from offset 0 (consumer catch-up)",
        ),
        ("random-read", "random read of one record by offset"),
    ] {
        let extra: Vec<&str> = if key == "random-read" {
            vec!["--reads", &reads]
        } else {
            vec![]
        };
        let mut runs = vec![
            run(
                "felix",
                Program::Bench,
                &[&[key, "felix", "--dir", &shard], &extra[..]].concat(),
            ),
            run(
                "limit",
                Program::Bench,
                &[&[key, "limit", "--dir", &shard], &extra[..]].concat(),
            ),
        ];
        runs.extend(peer_runs(key, &[&["--dir", &shard], &extra[..]].concat()));
        cells.push(Cell {
            key: key.into(),
            title: format!("{title}, {} M-record shard", s.read_records as f64 / 1e6),
            runs,
            limit: Some("limit".into()),
        });
    }
    let sealed = d("sealed");
    cells.push(Cell {
        key: "open".into(),
        title: format!(
            "open a shard of {} sealed segments after a clean close",
            s.sealed_segments
        ),
        runs: vec![
            run(
                "felix",
                Program::Bench,
                &["open", "felix", "--dir", &sealed],
            ),
            run(
                "limit",
                Program::Bench,
                &["open", "limit", "--dir", &sealed],
            ),
        ],
        limit: Some("limit".into()),
    });
    // Open after a crash: two curves.
    let mut crash_runs = Vec::new();
    for newest in s.crash_newest {
        let dir = d(&format!("crash-newest-{}", newest / MIB));
        crash_runs.push(run(
            &format!("newest {} MiB, 4 sealed", newest / MIB),
            Program::Bench,
            &["crash-open", "felix", "--dir", &dir],
        ));
    }
    for sealed in s.crash_sealed {
        let dir = d(&format!("crash-sealed-{sealed}"));
        crash_runs.push(run(
            &format!("{sealed} sealed, newest {} MiB", s.crash_newest[0] / MIB),
            Program::Bench,
            &["crash-open", "felix", "--dir", &dir],
        ));
    }
    cells.push(Cell {
        key: "crash-open".into(),
        title: format!(
            "open after a crash (torn tail), sealed segments of {} MiB",
            s.crash_segment_bytes / MIB
        ),
        runs: crash_runs,
        limit: None,
    });
    // Memory of a long append run.
    let mut memory_runs = Vec::new();
    for bytes in s.memory_bytes {
        let n = (bytes / 156).to_string();
        memory_runs.push(run(
            &format!("felix {} MiB", bytes / MIB),
            Program::Bench,
            &[
                "append",
                "felix",
                "--dir",
                &d("memory"),
                "--durability",
                "none",
                "--batch",
                "256",
                "--records",
                &n,
                "--timed",
                "false",
            ],
        ));
    }
    cells.push(Cell {
        key: "memory".into(),
        title: "peak RSS of an append run (durability none, batch 256)".into(),
        runs: memory_runs,
        limit: None,
    });
    cells
}

/// Data the read scenarios need, made once before the rounds.
fn prepare_steps(s: &Sizes, data: &Path) -> Vec<Run> {
    let d = |sub: &str| data.join(sub).to_string_lossy().into_owned();
    let seg_records = ((s.segment_bytes - 32) / 156).to_string();
    let seg_bytes = s.segment_bytes.to_string();
    let seg_size = (s.segment_bytes + 64 * MIB).to_string();
    let read_records = s.read_records.to_string();
    let mut steps = vec![
        run(
            "segment",
            Program::Bench,
            &[
                "prepare",
                "felix",
                "--dir",
                &d("segment"),
                "--bytes",
                &seg_bytes,
                "--segment-bytes",
                &seg_size,
            ],
        ),
        run(
            "shard",
            Program::Bench,
            &[
                "prepare",
                "felix",
                "--dir",
                &d("shard"),
                "--records",
                &read_records,
            ],
        ),
        run(
            "sealed",
            Program::Bench,
            &[
                "prepare-sealed",
                "felix",
                "--dir",
                &d("sealed"),
                "--segments",
                &s.sealed_segments.to_string(),
            ],
        ),
    ];
    for peer in PEERS {
        steps.push(run(
            peer,
            Program::Peers,
            &[
                "prepare",
                peer,
                "--dir",
                &d("segment"),
                "--records",
                &seg_records,
            ],
        ));
        steps.push(run(
            peer,
            Program::Peers,
            &[
                "prepare",
                peer,
                "--dir",
                &d("shard"),
                "--records",
                &read_records,
            ],
        ));
    }
    let seg = s.crash_segment_bytes.to_string();
    for newest in s.crash_newest {
        steps.push(run(
            "crash",
            Program::Bench,
            &[
                "prepare-crash",
                "felix",
                "--dir",
                &d(&format!("crash-newest-{}", newest / MIB)),
                "--sealed",
                "4",
                "--segment-bytes",
                &seg,
                "--newest-bytes",
                &newest.to_string(),
            ],
        ));
    }
    for sealed in s.crash_sealed {
        steps.push(run(
            "crash",
            Program::Bench,
            &[
                "prepare-crash",
                "felix",
                "--dir",
                &d(&format!("crash-sealed-{sealed}")),
                "--sealed",
                &sealed.to_string(),
                "--segment-bytes",
                &seg,
                "--newest-bytes",
                &s.crash_newest[0].to_string(),
            ],
        ));
    }
    steps
}

fn program_path(root: &Path, program: Program) -> PathBuf {
    match program {
        Program::Bench => root.join("target/release/felix-bench"),
        Program::Peers => root.join("target/release/examples/peers"),
    }
}

/// Runs one process and parses its JSON line.
fn execute(root: &Path, r: &Run) -> Result<Value, String> {
    let output = Command::new(program_path(root, r.program))
        .args(&r.args)
        .output()
        .map_err(|e| format!("run {:?}: {e}", r.args))?;
    if !output.status.success() {
        return Err(format!(
            "{} {} failed ({}): {}",
            r.label,
            r.args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).map_err(|e| format!("{}: bad JSON line {line:?}: {e}", r.label))
}

/// The figures compared, from one JSON line.
fn figures(line: &Value) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let num = |v: &Value| v.as_f64();
    for key in [
        "records_per_second",
        "bytes_per_second",
        "elapsed_seconds",
        "appends_per_sync",
        "peak_rss_bytes",
    ] {
        if let Some(v) = line.get(key).and_then(num) {
            out.insert(key.to_string(), v);
        }
    }
    if let Some(lat) = line.get("latency_us") {
        for q in ["p50", "p99", "max"] {
            if let Some(v) = lat.get(q).and_then(num) {
                out.insert(format!("latency_{q}_us"), v);
            }
        }
    }
    if let Some(v) = line.pointer("/notes/rss_after_open_bytes").and_then(num) {
        out.insert("rss_after_open_bytes".into(), v);
    }
    out
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// A target's verdict.
struct Verdict {
    cell: String,
    text: String,
    met: bool,
}

fn get(m: &BTreeMap<String, Medians>, label: &str, key: &str) -> f64 {
    m.get(label)
        .and_then(|x| x.get(key))
        .copied()
        .unwrap_or(f64::NAN)
}

/// Checks each target against the medians of the same run.
fn verdicts(all: &BTreeMap<String, BTreeMap<String, Medians>>, s: &Sizes) -> Vec<Verdict> {
    let mut out = Vec::new();
    let mut push = |cell: &str, met: bool, text: String| {
        out.push(Verdict {
            cell: cell.to_string(),
            text,
            met,
        })
    };
    let rps = "records_per_second";
    if let Some(c) = all.get("append-none-b1") {
        let (f, l) = (get(c, "felix", rps), get(c, "limit-write", rps));
        push(
            "append-none-b1",
            f >= 0.8 * l,
            format!("{:.2}× the write loop's records/s (target ≥ 0.8×)", f / l),
        );
        let best_peer = PEERS
            .iter()
            .map(|p| (get(c, p, rps), *p))
            .fold((0.0, ""), |a, b| if b.0 > a.0 { b } else { a });
        push(
            "append-none-b1",
            f > best_peer.0,
            format!(
                "{:.2}× the best peer at batch 1 ({}) (target: ahead of every peer)",
                f / best_peer.0,
                best_peer.1
            ),
        );
    }
    for b in [16, 256] {
        let key = format!("append-none-b{b}");
        if let Some(c) = all.get(&key) {
            let (f, l) = (get(c, "felix", rps), get(c, "limit-bufwriter", rps));
            push(
                &key,
                f >= 0.6 * l,
                format!("{:.2}× the BufWriter's records/s (target ≥ 0.6×)", f / l),
            );
            if b == 16
                && let Some(c1) = all.get("append-none-b1")
            {
                let f1 = get(c1, "felix", rps);
                push(
                    &key,
                    f >= 4.0 * f1,
                    format!("{:.1}× our batch-1 records/s (target ≥ 4×)", f / f1),
                );
            }
        }
    }
    if let Some(c) = all.get("append-commit-t1") {
        let (f, l) = (
            get(c, "felix", "latency_p50_us"),
            get(c, "limit-fdatasync", "latency_p50_us"),
        );
        push(
            "append-commit-t1",
            f <= 1.3 * l,
            format!(
                "p50 {f:.0} µs = {:.2}× the write+fdatasync loop's {l:.0} µs (target ≤ 1.3×)",
                f / l
            ),
        );
    }
    if let (Some(c1), Some(c64)) = (all.get("append-commit-t1"), all.get("append-commit-t64")) {
        let (f1, f64_) = (get(c1, "felix", rps), get(c64, "felix", rps));
        let aps = get(c64, "felix", "appends_per_sync");
        push(
            "append-commit-t64",
            f64_ >= 30.0 * f1,
            format!(
                "{:.1}× the 1-thread records/s, {aps:.1} appends per sync (target ≥ 30×)",
                f64_ / f1
            ),
        );
    }
    let bps = "bytes_per_second";
    for (key, want) in [("scan", 0.6), ("seq-read", 0.5)] {
        if let Some(c) = all.get(key) {
            let (f, l) = (get(c, "felix", bps), get(c, "limit", bps));
            push(
                key,
                f >= want * l,
                format!("{:.2}× the limit's bytes/s (target ≥ {want}×)", f / l),
            );
        }
    }
    if let Some(c) = all.get("index-rebuild") {
        let f = get(c, "felix", rps);
        push(
            "index-rebuild",
            f >= 20e6,
            format!("{:.1} M records/s (target ≥ 20 M)", f / 1e6),
        );
    }
    if let Some(c) = all.get("random-read") {
        let (f, l) = (
            get(c, "felix", "latency_p50_us"),
            get(c, "limit", "latency_p50_us"),
        );
        push(
            "random-read",
            f <= 2.0 * l,
            format!(
                "p50 {f:.2} µs = {:.2}× one pread's {l:.2} µs (target ≤ 2×)",
                f / l
            ),
        );
    }
    if let Some(c) = all.get("open") {
        let (f, l) = (
            get(c, "felix", "elapsed_seconds"),
            get(c, "limit", "elapsed_seconds"),
        );
        push(
            "open",
            f <= 5.0 * l,
            format!(
                "{:.1} ms = {:.1}× listing the directory ({:.1} ms) (target ≤ 5×)",
                f * 1e3,
                f / l,
                l * 1e3
            ),
        );
        let rss = get(c, "felix", "rss_after_open_bytes");
        push(
            "open",
            rss <= 32.0 * MIB as f64,
            format!(
                "{:.1} MiB resident after open (target ≤ 32 MiB)",
                rss / MIB as f64
            ),
        );
    }
    if let Some(c) = all.get("crash-open") {
        let t = |label: String| get(c, &label, "elapsed_seconds");
        let newest: Vec<f64> = s
            .crash_newest
            .iter()
            .map(|n| t(format!("newest {} MiB, 4 sealed", n / MIB)))
            .collect();
        let sealed: Vec<f64> = s
            .crash_sealed
            .iter()
            .map(|k| {
                t(format!(
                    "{k} sealed, newest {} MiB",
                    s.crash_newest[0] / MIB
                ))
            })
            .collect();
        let grows = newest[2] / newest[0];
        let flat = sealed[2] / sealed[0];
        let size_ratio = s.crash_newest[2] as f64 / s.crash_newest[0] as f64;
        push(
            "crash-open",
            grows >= size_ratio / 4.0 && flat <= 2.0,
            format!(
                "newest ×{size_ratio:.0} → time ×{grows:.1}; shard {}→{} sealed segments (×{:.0} bytes) → time ×{flat:.2} (target: grows with the newest segment only)",
                s.crash_sealed[0],
                s.crash_sealed[2],
                (s.crash_sealed[2] * s.crash_segment_bytes + s.crash_newest[0]) as f64
                    / s.crash_newest[0] as f64,
            ),
        );
    }
    if let Some(c) = all.get("memory") {
        let small = get(
            c,
            &format!("felix {} MiB", s.memory_bytes[0] / MIB),
            "peak_rss_bytes",
        );
        let big = get(
            c,
            &format!("felix {} MiB", s.memory_bytes[1] / MIB),
            "peak_rss_bytes",
        );
        push(
            "memory",
            big < 64.0 * MIB as f64 && big <= small * 1.5 + 4.0 * MIB as f64,
            format!(
                "peak RSS {:.1} MiB after {} MiB appended, {:.1} MiB after {} MiB (target < 64 MiB, not growing with data)",
                big / MIB as f64,
                s.memory_bytes[1] / MIB,
                small / MIB as f64,
                s.memory_bytes[0] / MIB
            ),
        );
    }
    out
}

fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        "—".into()
    } else if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} k", v / 1e3)
    } else {
        format!("{v:.2}")
    }
}

/// What the table says about a peer that a figure alone would hide.
const PEER_NOTES: &str = "\
| peer | what it does not do (so its figures are not like for like) |
|---|---|
| commitlog 0.2.0 | `flush()` does not fsync segment files: on commit the harness calls `flush()` (msyncs the index) and `fdatasync`s the active segment itself. Not thread-safe (`&mut self`): threads share it behind a mutex, no group commit. Opening reads no record: no recovery scan and no checksum check (the scan row times an open that verifies nothing). |
| raft-engine 0.4.2 | Compression off. `Engine::sync()` does nothing in 0.4.2, so commits use `write(batch, true)`. Entries are protobuf `BytesValue`s with the raft index in their first 8 bytes (136 B stored per 128 B payload). Keeps every entry's location in memory (memtables), so open reads every file and memory grows with the log. |
| wal-db 1.1.0 | No batch append (a batch is a loop of `append`, the last `append_and_sync` on commit). No offset index: a record is found by its byte LSN, which the harness computes because every record has the same size. No segments in this configuration (one file). |
";

fn machine_line(root: &Path, data: &Path) -> String {
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines().next().map(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|k| k.parse::<u64>().ok())
                    .unwrap_or(0)
            })
        })
        .unwrap_or(0);
    let fs_type = Command::new("df")
        .args(["-T", &data.to_string_lossy()])
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout).lines().nth(1).map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                format!(
                    "{} on {}",
                    f.get(1).unwrap_or(&"?"),
                    f.first().unwrap_or(&"?")
                )
            })
        })
        .unwrap_or_else(|| "unknown".into());
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let _ = root;
    format!(
        "{date}; {cores} cores ({cpu}), {:.1} GiB memory, Linux {}; bench data on {fs_type} (`{}`)",
        mem as f64 / (1 << 20) as f64,
        kernel.trim(),
        data.strip_prefix(root).unwrap_or(data).display()
    )
}

fn render(
    cells: &[Cell],
    all: &BTreeMap<String, BTreeMap<String, Medians>>,
    verdicts: &[Verdict],
    machine: &str,
    quick: bool,
    rounds: usize,
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Run: `cargo xtask bench{}` — {machine}; medians of {rounds} alternating runs per implementation.\n",
        if quick { " --quick" } else { "" }
    );
    let _ = writeln!(
        md,
        "| scenario | impl | records/s | MB/s | p50 µs | p99 µs | appends/sync | peak RSS MiB | vs limit |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for cell in cells {
        let Some(m) = all.get(&cell.key) else {
            continue;
        };
        for r in &cell.runs {
            let Some(x) = m.get(&r.label) else { continue };
            let g = |k: &str| x.get(k).copied().unwrap_or(f64::NAN);
            let vs = match &cell.limit {
                Some(limit) if *limit != r.label && !r.label.contains("reads nothing") => {
                    let key = if cell.key.starts_with("append-commit") || cell.key == "random-read"
                    {
                        "latency_p50_us"
                    } else if cell.key == "open" {
                        "elapsed_seconds"
                    } else {
                        "bytes_per_second"
                    };
                    let own = g(key);
                    let lim = get(m, limit, key);
                    if own.is_nan() || lim.is_nan() {
                        "—".into()
                    } else {
                        format!("{:.2}×", own / lim)
                    }
                }
                _ => "—".into(),
            };
            let elapsed_or_rate = if cell.key == "open" || cell.key == "crash-open" {
                format!("{:.2} ms", g("elapsed_seconds") * 1e3)
            } else {
                fmt_num(g("records_per_second"))
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {:.1} | {} |",
                cell.title,
                r.label,
                elapsed_or_rate,
                if g("bytes_per_second") > 0.0 {
                    format!("{:.0}", g("bytes_per_second") / 1e6)
                } else {
                    "—".into()
                },
                if g("latency_p50_us").is_nan() {
                    "—".into()
                } else {
                    format!("{:.1}", g("latency_p50_us"))
                },
                if g("latency_p99_us").is_nan() {
                    "—".into()
                } else {
                    format!("{:.1}", g("latency_p99_us"))
                },
                if g("appends_per_sync").is_nan() {
                    "—".into()
                } else {
                    format!("{:.1}", g("appends_per_sync"))
                },
                g("peak_rss_bytes") / MIB as f64,
                vs,
            );
        }
    }
    let _ = writeln!(
        md,
        "\n(For `open` and `crash-open` the records/s column is the open time. \"vs limit\" compares bytes/s, p50 latency (on-commit appends, random reads) or time (open) with the cell's limit.)\n"
    );
    let _ = writeln!(md, "| target | result | measured |\n|---|---|---|");
    for v in verdicts {
        let _ = writeln!(
            md,
            "| {} | {} | {} |",
            v.cell,
            if v.met { "met" } else { "**missed**" },
            v.text
        );
    }
    let _ = writeln!(md, "\n{PEER_NOTES}");
    md
}

/// Replaces the text between the markers of `docs/performance.md`.
fn update_doc(root: &Path, table: &str) -> Result<(), String> {
    let path = root.join("docs/performance.md");
    let text = fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
    let (Some(begin), Some(end)) = (text.find(BEGIN_MARKER), text.find(END_MARKER)) else {
        return Err(format!(
            "{} lacks the {BEGIN_MARKER} … {END_MARKER} markers",
            path.display()
        ));
    };
    let updated = format!("{}{BEGIN_MARKER}\n{table}{}", &text[..begin], &text[end..]);
    fs::write(&path, updated).map_err(|e| format!("write {}: {e}", path.display()))
}

/// `cargo xtask bench [--quick] [--only KEY,…] [--no-doc] [--report-only]`.
pub fn run_bench(root: &Path, options: &[&str]) -> Result<(), String> {
    let quick = options.contains(&"--quick");
    let no_doc = options.contains(&"--no-doc");
    let report_only = options.contains(&"--report-only");
    let only: Option<Vec<String>> = options
        .iter()
        .position(|o| *o == "--only")
        .and_then(|i| options.get(i + 1))
        .map(|list| list.split(',').map(String::from).collect());
    let sizes = if quick { QUICK } else { FULL };
    let out = root.join("target/bench");
    // Under target/, on the same file system as the workspace, never tmpfs.
    let data = out.join("tmp");
    fs::create_dir_all(&data).map_err(|e| format!("create {}: {e}", data.display()))?;
    let mut cells = cells(&sizes, &data);
    if let Some(only) = &only {
        cells.retain(|c| only.iter().any(|o| c.key.starts_with(o.as_str())));
    }
    let mut samples = Samples::new();
    let mut jsonl = String::new();
    if report_only {
        // Re-render the last run's lines (after a change to the report or
        // the targets), running nothing.
        let path = out.join("results.jsonl");
        jsonl = fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
        for text in jsonl.lines() {
            let Ok(line) = serde_json::from_str::<Value>(text) else {
                continue;
            };
            let (Some(cell), Some(label)) = (
                line.get("cell").and_then(Value::as_str),
                line.get("label").and_then(Value::as_str),
            ) else {
                continue;
            };
            samples
                .entry(cell.to_string())
                .or_default()
                .entry(label.to_string())
                .or_default()
                .push(figures(&line));
        }
    } else {
        run_cells(root, &sizes, &data, &cells, &mut samples, &mut jsonl)?;
    }
    let mut all: BTreeMap<String, BTreeMap<String, Medians>> = BTreeMap::new();
    for (cell, by_label) in &samples {
        for (label, runs) in by_label {
            let mut keys: Vec<&String> = runs.iter().flat_map(|r| r.keys()).collect();
            keys.sort();
            keys.dedup();
            let medians = keys
                .into_iter()
                .map(|k| {
                    let mut v: Vec<f64> = runs.iter().filter_map(|r| r.get(k).copied()).collect();
                    (k.clone(), median(&mut v))
                })
                .collect();
            all.entry(cell.clone())
                .or_default()
                .insert(label.clone(), medians);
        }
    }
    let verdicts = verdicts(&all, &sizes);
    let machine = machine_line(root, &data);
    let table = render(&cells, &all, &verdicts, &machine, quick, sizes.rounds);
    fs::write(out.join("results.jsonl"), &jsonl)
        .map_err(|e| format!("write results.jsonl: {e}"))?;
    fs::write(out.join("results.md"), &table).map_err(|e| format!("write results.md: {e}"))?;
    println!("\n{table}");
    println!("wrote target/bench/results.jsonl and target/bench/results.md");
    if !no_doc && only.is_none() {
        update_doc(root, &table)?;
        println!("updated docs/performance.md");
    }
    Ok(())
}

/// Builds felix-bench, prepares the data the cells need and runs the cells'
/// rounds, collecting every line.
fn run_cells(
    root: &Path,
    sizes: &Sizes,
    data: &Path,
    cells: &[Cell],
    samples: &mut Samples,
    jsonl: &mut String,
) -> Result<(), String> {
    println!("==> cargo build --release -p felix-bench --bin felix-bench --examples");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root)
        .args([
            "build",
            "--release",
            "-p",
            "felix-bench",
            "--bin",
            "felix-bench",
            "--examples",
        ])
        .status()
        .map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err("cargo build failed".into());
    }
    let needs = |prefix: &str| {
        cells.iter().any(|c| {
            c.runs
                .iter()
                .any(|r| r.args.iter().any(|a| a.contains(prefix)))
        })
    };
    for step in prepare_steps(sizes, data) {
        let dir = step.args.get(3).cloned().unwrap_or_default();
        let sub = Path::new(&dir)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !needs(&format!("/{sub}")) {
            continue;
        }
        println!("==> prepare {} {}", step.label, step.args.join(" "));
        let line = execute(root, &step)?;
        jsonl.push_str(&line.to_string());
        jsonl.push('\n');
    }
    for cell in cells {
        println!(
            "==> {} ({} rounds of {})",
            cell.title,
            sizes.rounds,
            cell.runs
                .iter()
                .map(|r| r.label.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        for round in 0..sizes.rounds {
            for r in &cell.runs {
                let mut line = match execute(root, r) {
                    Ok(line) => line,
                    Err(message) => {
                        eprintln!("    {message}");
                        continue;
                    }
                };
                if let Value::Object(map) = &mut line {
                    map.insert("cell".into(), Value::from(cell.key.clone()));
                    map.insert("label".into(), Value::from(r.label.clone()));
                    map.insert("round".into(), Value::from(round));
                }
                jsonl.push_str(&line.to_string());
                jsonl.push('\n');
                samples
                    .entry(cell.key.clone())
                    .or_default()
                    .entry(r.label.clone())
                    .or_default()
                    .push(figures(&line));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn cells_alternate_at_least_five_rounds_with_a_limit_where_the_issue_names_one() {
        for sizes in [FULL, QUICK] {
            assert!(sizes.rounds >= 5);
            let cells = cells(&sizes, Path::new("/data"));
            for cell in &cells {
                if let Some(limit) = &cell.limit {
                    assert!(cell.runs.iter().any(|r| &r.label == limit), "{}", cell.key);
                }
                let mut labels: Vec<_> = cell.runs.iter().map(|r| &r.label).collect();
                labels.sort();
                labels.dedup();
                assert_eq!(
                    labels.len(),
                    cell.runs.len(),
                    "labels are unique in {}",
                    cell.key
                );
            }
        }
    }
}
