//! The on-commit append scenarios: 1, 8 and 64 threads each calling the
//! blocking `append`, and one thread keeping 8 or 64 appends in flight
//! through futures. Each compares with the limit measured in the same run:
//! one thread, one `write` then one `fdatasync` per record.

use super::scenarios::{
    Against, Bound, P50, RPS, Run, Scenario, Sizes, Target, argv, bench, peers, ratio,
};

/// The limit's runs: the write+fdatasync loop (and its `fsync` twin) on
/// `records` records, as many as felix appends in the same row.
fn limits(dir: &str, records: u64, with_fsync: bool) -> Vec<Run> {
    let tail = format!("--durability on_commit --batch 1 --records {records} --threads 1");
    let labels: &[&str] = if with_fsync {
        &["limit-fdatasync", "limit-fsync"]
    } else {
        &["limit-fdatasync"]
    };
    labels
        .iter()
        .map(|label| bench(label, argv(&format!("append {label}"), dir, &tail)))
        .collect()
}

/// records/s at least `times` the limit's.
fn times_the_limit(times: f64, text: fn(&super::scenarios::Compared<'_>) -> String) -> Target {
    ratio(
        RPS,
        Against::Run("limit-fdatasync"),
        Bound::AtLeast(times),
        text,
    )
}

fn scenario(
    key: String,
    title: String,
    runs: Vec<Run>,
    versus: &'static str,
    targets: Vec<Target>,
) -> Scenario {
    Scenario {
        key,
        title,
        runs,
        limit: Some("limit-fdatasync"),
        versus,
        shows_time: false,
        targets,
    }
}

pub(super) fn scenarios(s: &Sizes, dir: &str) -> Vec<Scenario> {
    let mut out = Vec::new();
    // Threads each calling the blocking append; preallocation on and off.
    for (threads, records) in [(1, s.commit_1), (8, s.commit_8), (64, s.commit_64)] {
        let tail =
            format!("--durability on_commit --batch 1 --records {records} --threads {threads}");
        let mut runs = vec![bench("felix", argv("append felix", dir, &tail))];
        runs.extend(limits(dir, records, threads == 1));
        let mut targets = Vec::new();
        if threads == 1 {
            // `--preallocate off|whole` right after the implementation:
            // no preallocation, and the whole segment up front (the bench
            // variant the default's stepped preallocation is held to).
            for (label, how) in [("felix-no-prealloc", "off"), ("felix-whole", "whole")] {
                let args = argv("append felix", dir, &tail);
                let args = [
                    &args[..2],
                    &["--preallocate".to_string(), how.to_string()],
                    &args[2..],
                ]
                .concat();
                runs.push(bench(label, args));
            }
            targets.push(ratio(
                P50,
                Against::Run("felix-whole"),
                Bound::AtMost(1.05),
                |c| {
                    format!(
                        "stepped preallocation: p50 {:.0} µs = {:.2}× whole-segment preallocation's {:.0} µs (target ≤ 1.05×)",
                        c.own, c.ratio, c.reference
                    )
                },
            ));
            targets.push(ratio(
                P50,
                Against::Run("limit-fdatasync"),
                Bound::AtMost(1.3),
                |c| {
                    format!(
                        "p50 {:.0} µs = {:.2}× the write+fdatasync loop's {:.0} µs (target ≤ 1.3×)",
                        c.own, c.ratio, c.reference
                    )
                },
            ));
        }
        if threads == 64 {
            targets.push(times_the_limit(20.0, |c| {
                format!(
                    "{:.1}× the write+fdatasync loop's records/s, {:.1} appends per sync (target ≥ 20×)",
                    c.ratio, c.appends_per_sync
                )
            }));
        }
        runs.extend(peers("append", dir, &tail));
        out.push(scenario(
            format!("append-commit-t{threads}"),
            format!("append, OnCommit, 128 B, batch 1, {threads} thread(s)"),
            runs,
            P50,
            targets,
        ));
    }
    // One thread, appends in flight through futures.
    for (in_flight, records) in [(8, s.commit_8), (64, s.commit_64)] {
        let tail = format!("--batch 1 --records {records} --in-flight {in_flight}");
        let mut runs = vec![bench("felix", argv("append-async felix", dir, &tail))];
        runs.extend(limits(dir, records, false));
        let targets = if in_flight == 64 {
            vec![
                times_the_limit(25.0, |c| {
                    format!(
                        "{:.1}× the write+fdatasync loop's records/s (target ≥ 25×)",
                        c.ratio
                    )
                }),
                ratio(
                    "appends_per_sync",
                    Against::Value(1.0),
                    Bound::AtLeast(40.0),
                    |c| format!("{:.1} appends per sync (target ≥ 40)", c.own),
                ),
            ]
        } else {
            vec![times_the_limit(5.0, |c| {
                format!(
                    "{:.1}× the write+fdatasync loop's records/s, {:.1} appends per sync (target ≥ 5×)",
                    c.ratio, c.appends_per_sync
                )
            })]
        };
        out.push(scenario(
            format!("append-commit-async{in_flight}"),
            format!(
                "append, OnCommit, 128 B, batch 1, {in_flight} in flight from one thread (futures)"
            ),
            runs,
            RPS,
            targets,
        ));
    }
    out
}
