//! The Raft rows: committed entries per second and commit latency through
//! openraft, a three-node cluster in one process, each node's log on
//! felix-raft or on the `raft-log` crate (0.4.6, with its flush thread's
//! batch wait at 0 and at its default 1 ms), at 1, 64 and 1,024 client
//! writes in flight. felix-bench cannot depend on felix-raft, so each run
//! is a process of felix-raft's `raft_bench` example. Beside them, the
//! limit measured in the same run: one felix shard with as many
//! `append(..).submit()` in flight (`felix-bench append-async`), and, for one
//! write in flight, one `write` + `fdatasync` per record.

use super::scenarios::{
    Against, Bound, P50, Program, RPS, Run, Scenario, Sizes, Target, argv, bench, ratio,
};

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

/// The one-shard limit of `writers` writes in flight: a felix shard with
/// as many `append(..).submit()` in flight from one thread, `entries` records of
/// the same 128 B.
const LIMIT_ASYNC: &str = "limit-async";
/// One `write` + `fdatasync` per record, one thread.
const LIMIT_FDATASYNC: &str = "limit-fdatasync";

/// The leader's entries per `fdatasync` of its log, from `raft_bench`'s
/// notes.
const ENTRIES_PER_LEADER_SYNC: &str = "entries_per_leader_sync";

pub(super) fn scenarios(s: &Sizes, dir: &str) -> Vec<Scenario> {
    [
        (1, s.raft_entries / 10),
        (64, s.raft_entries),
        (1024, s.raft_entries * 2),
    ]
    .into_iter()
    .map(|(writers, entries)| {
        let tail = format!("--entries {entries} --writers {writers}");
        let mut runs = vec![
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
        ];
        let mut targets = vec![at_least_level(RAFT_LOG_0), at_least_level(RAFT_LOG_1MS)];
        let limit = if writers == 1 {
            runs.push(bench(
                LIMIT_FDATASYNC,
                argv(
                    "append limit-fdatasync",
                    dir,
                    &format!("--durability on_commit --batch 1 --records {entries} --threads 1"),
                ),
            ));
            targets.push(ratio(
                P50,
                Against::Run(LIMIT_FDATASYNC),
                Bound::AtMost(3.0),
                |c| {
                    format!(
                        "commit p50 {:.0} µs = {:.2}× one write+fdatasync's {:.0} µs (target ≤ 3×)",
                        c.own, c.ratio, c.reference
                    )
                },
            ));
            targets.push(p50_at_most(RAFT_LOG_0));
            LIMIT_FDATASYNC
        } else {
            runs.push(bench(
                LIMIT_ASYNC,
                argv(
                    "append-async felix",
                    dir,
                    &format!("--batch 1 --records {entries} --in-flight {writers}"),
                ),
            ));
            if writers == 64 {
                targets.push(ratio(
                    RPS,
                    Against::Value(1.0),
                    Bound::AtLeast(20_000.0),
                    |c| format!("{:.0} committed entries/s (target ≥ 20,000)", c.own),
                ));
                targets.push(ratio(
                    RPS,
                    Against::Run(LIMIT_ASYNC),
                    Bound::AtLeast(0.15),
                    |c| {
                        format!(
                            "{:.2}× one shard's entries/s with as many appends in flight ({:.0} vs {:.0}) (target ≥ 0.15×)",
                            c.ratio, c.own, c.reference
                        )
                    },
                ));
                targets.push(ratio(
                    ENTRIES_PER_LEADER_SYNC,
                    Against::Value(1.0),
                    Bound::AtLeast(16.0),
                    |c| format!("{:.1} entries per leader sync (target ≥ 16)", c.own),
                ));
                targets.push(p50_at_most(RAFT_LOG_0));
            } else {
                targets.push(ratio(
                    RPS,
                    Against::Value(1.0),
                    Bound::AtLeast(40_000.0),
                    |c| format!("{:.0} committed entries/s (target ≥ 40,000)", c.own),
                ));
            }
            LIMIT_ASYNC
        };
        Scenario {
            key: format!("raft-commit-w{writers}"),
            title: format!(
                "openraft, 3 nodes in one process, 128 B, {writers} client write(s) in flight"
            ),
            runs,
            limit: Some(limit),
            versus: if writers == 1 { P50 } else { RPS },
            shows_time: false,
            targets,
        }
    })
    .collect()
}
