//! `cargo xtask bench [--quick]`: builds felix-bench in release mode, runs
//! every scenario's implementations in alternation (A B C A B C …, at least
//! five rounds), takes medians, compares felix with the limit measured in
//! the same run, and writes `target/bench/results.jsonl` (every run),
//! `target/bench/results.md` (the table) and the table into
//! `docs/performance.md` between its markers.
//!
//! Orchestration only: every measurement is one process of `felix-bench`,
//! of its `peers` example, of felix-raft's `raft_bench` example or of
//! felix-cluster's `cluster_bench` example, printing one JSON line.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod cluster;
mod commit;
mod contract;
mod raft;
mod report;
mod scenarios;
mod scrub_row;
mod shards;
mod sizes;
mod tiered;

use scenarios::{
    Against, FULL, PEERS, Program, QUICK, Run, Scenario, Sizes, Target, prepare_steps,
};

/// Where `docs/performance.md` takes the generated text.
pub const BEGIN_MARKER: &str = "<!-- bench:begin -->";
/// End of the generated text.
pub const END_MARKER: &str = "<!-- bench:end -->";

const MIB: u64 = 1 << 20;

/// Medians of one implementation in one scenario.
type Medians = BTreeMap<String, f64>;

/// Every run's figures, by scenario and implementation label.
type Samples = BTreeMap<String, BTreeMap<String, Vec<BTreeMap<String, f64>>>>;

fn program_path(root: &Path, program: Program) -> PathBuf {
    match program {
        Program::Bench => root.join("target/release/felix-bench"),
        Program::Peers => root.join("target/release/examples/peers"),
        Program::Raft => root.join("target/release/examples/raft_bench"),
        Program::Cluster => root.join("target/release/examples/cluster_bench"),
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

/// The figures of a JSON line's top level that targets compare.
const LINE_FIGURES: [&str; 5] = [
    "records_per_second",
    "bytes_per_second",
    "elapsed_seconds",
    "appends_per_sync",
    "peak_rss_bytes",
];

/// The latency quantiles compared, as `latency_{q}_us`.
const LATENCY_QUANTILES: [&str; 3] = ["p50", "p99", "max"];

/// The figures under a JSON line's `notes` that targets compare.
const NOTE_FIGURES: [&str; 11] = [
    "rss_after_open_bytes",
    "empty_reads",
    "allocated_bytes_per_shard",
    "read_p50_us",
    "lookup_over_read_p50",
    "open_descriptors",
    "threads",
    "rss_bytes",
    "entries_per_leader_sync",
    cluster::CPU_PERCENT,
    cluster::FAILOVER_OVER_ELECTION,
];

/// The figures compared, from one JSON line.
fn figures(line: &Value) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let num = |v: &Value| v.as_f64();
    for key in LINE_FIGURES {
        if let Some(v) = line.get(key).and_then(num) {
            out.insert(key.to_string(), v);
        }
    }
    if let Some(lat) = line.get("latency_us") {
        for q in LATENCY_QUANTILES {
            if let Some(v) = lat.get(q).and_then(num) {
                out.insert(format!("latency_{q}_us"), v);
            }
        }
    }
    for note in NOTE_FIGURES {
        if let Some(v) = line.pointer(&format!("/notes/{note}")).and_then(num) {
            out.insert(note.into(), v);
        }
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

/// Checks each scenario's targets against the medians of the same run.
fn verdicts(
    all: &BTreeMap<String, BTreeMap<String, Medians>>,
    scenarios: &[Scenario],
    s: &Sizes,
) -> Vec<Verdict> {
    let mut out = Vec::new();
    for scenario in scenarios {
        let Some(cell) = all.get(&scenario.key) else {
            continue;
        };
        for target in &scenario.targets {
            let (met, text) = match target {
                Target::Ratio {
                    figure,
                    against,
                    bound,
                    text,
                } => {
                    let (reference, reference_label) = match *against {
                        Against::Run(label) => (get(cell, label, figure), label),
                        Against::Scenario(key) => match all.get(key) {
                            Some(other) => (get(other, "felix", figure), key),
                            // Compared only when both ran.
                            None => continue,
                        },
                        Against::BestPeer => {
                            // Ahead of every peer holds only when every
                            // peer's figure is there to be ahead of: a
                            // peer whose runs failed (or were not run) is
                            // a miss, never a pass.
                            let missing: Vec<&str> = PEERS
                                .iter()
                                .filter(|p| get(cell, p, figure).is_nan())
                                .copied()
                                .collect();
                            if !missing.is_empty() {
                                out.push(Verdict {
                                    cell: scenario.key.clone(),
                                    text: format!("missed: no figure for {}", missing.join(", ")),
                                    met: false,
                                });
                                continue;
                            }
                            PEERS.iter().map(|p| (get(cell, p, figure), *p)).fold(
                                (f64::NEG_INFINITY, ""),
                                |a, b| if b.0 > a.0 { b } else { a },
                            )
                        }
                        Against::Value(value) => (value, ""),
                    };
                    let own = get(cell, "felix", figure);
                    let compared = scenarios::Compared {
                        own,
                        reference,
                        ratio: own / reference,
                        reference_label,
                        appends_per_sync: get(cell, "felix", "appends_per_sync"),
                    };
                    (bound.met(compared.ratio), text(&compared))
                }
                Target::Curve(curve) => curve(&|label, figure| get(cell, label, figure), s),
            };
            out.push(Verdict {
                cell: scenario.key.clone(),
                text,
                met,
            });
        }
    }
    out
}

/// `cargo xtask bench [--quick] [--only KEY,…] [--no-doc] [--report-only]`.
pub fn run_bench(root: &Path, options: &[&str]) -> Result<(), String> {
    if options.contains(&"--tiered") {
        return tiered::run(root, options);
    }
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
    let mut cells = scenarios::scenarios(&sizes, &data);
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
    let verdicts = verdicts(&all, &cells, &sizes);
    let machine = report::machine_line(root, &data);
    let table = report::render(&cells, &all, &verdicts, &machine, quick, sizes.rounds);
    fs::write(out.join("results.jsonl"), &jsonl)
        .map_err(|e| format!("write results.jsonl: {e}"))?;
    fs::write(out.join("results.md"), &table).map_err(|e| format!("write results.md: {e}"))?;
    println!("\n{table}");
    println!("wrote target/bench/results.jsonl and target/bench/results.md");
    if !no_doc && only.is_none() {
        report::update_doc(root, &table)?;
        println!("updated docs/performance.md");
    }
    Ok(())
}

/// `cargo build --release` with `args`.
fn build(root: &Path, args: &[&str]) -> Result<(), String> {
    println!("==> cargo build --release {}", args.join(" "));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root)
        .arg("build")
        .arg("--release")
        .args(args)
        .status()
        .map_err(|e| format!("cargo build: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo build --release {} failed", args.join(" ")))
    }
}

/// Builds the programs the cells run (felix-bench, felix-raft's and
/// felix-cluster's benches),
/// prepares the data the cells need and runs the cells' rounds, collecting
/// every line.
fn run_cells(
    root: &Path,
    sizes: &Sizes,
    data: &Path,
    cells: &[Scenario],
    samples: &mut Samples,
    jsonl: &mut String,
) -> Result<(), String> {
    let uses = |program: Program| {
        cells
            .iter()
            .any(|c| c.runs.iter().any(|r| r.program == program))
    };
    if uses(Program::Bench) || uses(Program::Peers) {
        build(
            root,
            &["-p", "felix-bench", "--bin", "felix-bench", "--examples"],
        )?;
    }
    if uses(Program::Raft) {
        // felix-bench cannot depend on felix-raft: its bench is an example.
        build(root, &["-p", "felix-raft", "--example", "raft_bench"])?;
    }
    if uses(Program::Cluster) {
        // Likewise felix-cluster; its example starts felix-node processes.
        build(
            root,
            &[
                "-p",
                "felix-cluster",
                "--bin",
                "felix-node",
                "--example",
                "cluster_bench",
            ],
        )?;
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
    fn scenarios_alternate_at_least_five_rounds_with_a_limit_where_the_issue_names_one() {
        for sizes in [FULL, QUICK] {
            assert!(sizes.rounds >= 5);
            let scenarios = scenarios::scenarios(&sizes, Path::new("/data"));
            let keys: Vec<&str> = scenarios.iter().map(|s| s.key.as_str()).collect();
            assert_eq!(
                keys,
                [
                    "append-none-b1",
                    "append-none-b16",
                    "append-none-b256",
                    "append-commit-t1",
                    "append-commit-t8",
                    "append-commit-t64",
                    "append-commit-async8",
                    "append-commit-async64",
                    "scrub-append",
                    "scan",
                    "index-rebuild",
                    "seq-read",
                    "random-read",
                    "time-lookup",
                    "seq-read-runs",
                    "shards-open",
                    "shards-append",
                    "shards-commit",
                    "open",
                    "crash-open",
                    "memory",
                    "follow-none",
                    "follow-paced",
                    "follow-commit",
                    "shards-du",
                    "raft-commit-w1",
                    "raft-commit-w64",
                    "raft-commit-w1024",
                    "cluster-produce-s1",
                    "cluster-produce-s100",
                    "cluster-idle",
                    "cluster-catch-up",
                    "cluster-failover",
                ]
            );
            for scenario in &scenarios {
                if let Some(limit) = scenario.limit {
                    assert!(
                        scenario.runs.iter().any(|r| r.label == limit),
                        "{}",
                        scenario.key
                    );
                }
                let mut labels: Vec<_> = scenario.runs.iter().map(|r| &r.label).collect();
                labels.sort();
                labels.dedup();
                assert_eq!(
                    labels.len(),
                    scenario.runs.len(),
                    "labels are unique in {}",
                    scenario.key
                );
                // Every target compares with a run or a scenario that exists,
                // by a figure a run's line is read for.
                for target in &scenario.targets {
                    if let Target::Ratio {
                        against, figure, ..
                    } = target
                    {
                        let read = LINE_FIGURES.contains(figure)
                            || NOTE_FIGURES.contains(figure)
                            || LATENCY_QUANTILES
                                .iter()
                                .any(|q| *figure == format!("latency_{q}_us"));
                        assert!(read, "{}: {figure} is never read", scenario.key);
                        match *against {
                            Against::Run(label) => assert!(
                                scenario.runs.iter().any(|r| r.label == label),
                                "{}: {label}",
                                scenario.key
                            ),
                            Against::Scenario(key) => assert!(keys.contains(&key), "{key}"),
                            Against::BestPeer | Against::Value(_) => {}
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn verdicts_compare_felix_with_each_targets_reference() {
        let sizes = QUICK;
        let scenarios = scenarios::scenarios(&sizes, Path::new("/data"));
        let medians = |pairs: &[(&str, &str, f64)]| -> BTreeMap<String, Medians> {
            let mut by_label: BTreeMap<String, Medians> = BTreeMap::new();
            for (label, figure, value) in pairs {
                by_label
                    .entry(label.to_string())
                    .or_default()
                    .insert(figure.to_string(), *value);
            }
            by_label
        };
        let mut all = BTreeMap::new();
        all.insert(
            "scan".to_string(),
            medians(&[
                ("felix", "bytes_per_second", 1.5e9),
                ("limit", "bytes_per_second", 2.0e9),
            ]),
        );
        all.insert(
            "random-read".to_string(),
            medians(&[
                ("felix", "latency_p50_us", 2.5),
                ("limit", "latency_p50_us", 1.0),
            ]),
        );
        all.insert(
            "append-none-b1".to_string(),
            medians(&[
                ("felix", "records_per_second", 9.0),
                ("limit-write", "records_per_second", 10.0),
                ("commitlog", "records_per_second", 8.0),
                ("raft-engine", "records_per_second", 9.5),
                ("wal-db", "records_per_second", 9.2),
            ]),
        );
        let got: Vec<(String, bool, String)> = verdicts(&all, &scenarios, &sizes)
            .into_iter()
            .map(|v| (v.cell, v.met, v.text))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "append-none-b1".to_string(),
                    true,
                    "0.90× the write loop's records/s (target ≥ 0.8×)".to_string()
                ),
                (
                    "append-none-b1".to_string(),
                    false,
                    "0.95× the best peer at batch 1 (raft-engine) (target: ahead of every peer)"
                        .to_string()
                ),
                (
                    "scan".to_string(),
                    true,
                    "0.75× the limit's bytes/s (target ≥ 0.6×)".to_string()
                ),
                (
                    "random-read".to_string(),
                    false,
                    "p50 2.50 µs = 2.50× one pread's 1.00 µs (target ≤ 2×)".to_string()
                ),
            ]
        );
    }

    #[test]
    fn ahead_of_every_peer_is_missed_when_a_peer_figure_is_missing() {
        let sizes = QUICK;
        let scenarios = scenarios::scenarios(&sizes, Path::new("/data"));
        let cell = |peers: &[(&str, f64)]| -> BTreeMap<String, Medians> {
            let mut by_label: BTreeMap<String, Medians> = BTreeMap::new();
            for (label, value) in [("felix", 9.0), ("limit-write", 10.0)].iter().chain(peers) {
                by_label
                    .entry(label.to_string())
                    .or_default()
                    .insert("records_per_second".to_string(), *value);
            }
            by_label
        };
        let peer_verdict = |all: &BTreeMap<String, BTreeMap<String, Medians>>| {
            verdicts(all, &scenarios, &sizes)
                .into_iter()
                .filter(|v| v.cell == "append-none-b1")
                .map(|v| (v.met, v.text))
                .nth(1)
        };
        // No peer figure at all: felix/0 would read as ahead of everyone.
        let mut all = BTreeMap::new();
        all.insert("append-none-b1".to_string(), cell(&[]));
        assert_eq!(
            peer_verdict(&all),
            Some((
                false,
                "missed: no figure for commitlog, raft-engine, wal-db".to_string()
            ))
        );
        // One peer missing, felix ahead of the two that ran.
        all.insert(
            "append-none-b1".to_string(),
            cell(&[("commitlog", 8.0), ("raft-engine", 8.5)]),
        );
        assert_eq!(
            peer_verdict(&all),
            Some((false, "missed: no figure for wal-db".to_string()))
        );
        // Every peer there and behind: met.
        all.insert(
            "append-none-b1".to_string(),
            cell(&[("commitlog", 8.0), ("raft-engine", 8.5), ("wal-db", 7.0)]),
        );
        assert_eq!(
            peer_verdict(&all),
            Some((
                true,
                "1.06× the best peer at batch 1 (raft-engine) (target: ahead of every peer)"
                    .to_string()
            ))
        );
    }
}
