//! The table `cargo xtask bench` prints and writes into
//! `docs/performance.md`: every scenario's medians, each run's ratio to the
//! scenario's limit, the targets' verdicts, the machine, and what the peers
//! do not do.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;

use super::scenarios::Scenario;
use super::{BEGIN_MARKER, END_MARKER, MIB, Medians, Verdict, get};

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

pub(super) fn machine_line(root: &Path, data: &Path) -> String {
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

pub(super) fn render(
    cells: &[Scenario],
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
            let vs = match cell.limit {
                Some(limit) if limit != r.label && !r.no_ratio => {
                    let own = g(cell.versus);
                    let lim = get(m, limit, cell.versus);
                    if own.is_nan() || lim.is_nan() {
                        "—".into()
                    } else {
                        format!("{:.2}×", own / lim)
                    }
                }
                _ => "—".into(),
            };
            let elapsed_or_rate = if cell.shows_time {
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
pub(super) fn update_doc(root: &Path, table: &str) -> Result<(), String> {
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
