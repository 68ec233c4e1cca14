//! The Raft row: committed entries per second and commit latency through
//! openraft, a three-node cluster in one process, each node's log on
//! felix-raft or on the `raft-log` crate (0.4.6, with its flush thread's
//! batch wait at 0 and at its default 1 ms). felix-bench cannot depend on
//! felix-raft, so each run is a process of felix-raft's `raft_bench`
//! example.

use super::scenarios::{Against, Bound, P50, Program, RPS, Run, Scenario, Sizes, Target, ratio};

/// raft-log with no batch wait: the reference of the "vs limit" column.
const RAFT_LOG_0: &str = "raft-log-wait-0";
/// raft-log with its default 1 ms batch wait.
const RAFT_LOG_1MS: &str = "raft-log-wait-1ms";

fn run(label: &str, log: &str, dir: &str, tail: &str) -> Run {
    let mut args = vec![log.to_string(), "--dir".to_string(), dir.to_string()];
    args.extend(tail.split_whitespace().map(String::from));
    Run {
        label: label.to_string(),
        program: Program::Raft,
        args,
        no_ratio: false,
    }
}

/// felix-raft's entries/s at least raft-log's with `against`'s setting.
fn at_least_level(against: &'static str) -> Target {
    ratio(RPS, Against::Run(against), Bound::AtLeast(1.0), |c| {
        format!(
            "{:.2}× {}'s committed entries/s ({:.0} vs {:.0}) (target ≥ 1×)",
            c.ratio, c.reference_label, c.own, c.reference
        )
    })
}

/// Commit p50 at most raft-log's with `against`'s setting.
fn p50_at_most(against: &'static str) -> Target {
    ratio(P50, Against::Run(against), Bound::AtMost(1.0), |c| {
        format!(
            "commit p50 {:.0} µs = {:.2}× {}'s {:.0} µs (target ≤ 1×)",
            c.own, c.ratio, c.reference_label, c.reference
        )
    })
}

pub(super) fn scenarios(s: &Sizes, dir: &str) -> Vec<Scenario> {
    [(64, s.raft_entries), (1, s.raft_entries / 10)]
        .into_iter()
        .map(|(writers, entries)| {
            let tail = format!("--entries {entries} --writers {writers}");
            Scenario {
                key: format!("raft-commit-w{writers}"),
                title: format!(
                    "openraft, 3 nodes in one process, 128 B, {writers} client write(s) in flight"
                ),
                runs: vec![
                    run("felix", "felix", dir, &tail),
                    run(
                        RAFT_LOG_0,
                        "raft-log",
                        dir,
                        &format!("{tail} --flush-batch-wait-us 0"),
                    ),
                    run(
                        RAFT_LOG_1MS,
                        "raft-log",
                        dir,
                        &format!("{tail} --flush-batch-wait-us 1000"),
                    ),
                ],
                limit: Some(RAFT_LOG_0),
                versus: RPS,
                shows_time: false,
                targets: vec![
                    at_least_level(RAFT_LOG_0),
                    at_least_level(RAFT_LOG_1MS),
                    p50_at_most(RAFT_LOG_0),
                ],
            }
        })
        .collect()
}
