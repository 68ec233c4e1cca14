//! The replicated-shard rows (issue 38): three `felix-node` processes on
//! loopback, driven by felix-cluster's `cluster_bench` example (felix-bench
//! cannot depend on felix-cluster, so, like the Raft rows, each run is a
//! process of the example). Beside them, where the issue names one, the
//! same load on one local felix shard, measured in the same run: 64
//! `append(..).submit()` in flight (`felix-bench append-async`) and the
//! sequential read of a shard of as many records (`felix-bench seq-read`).

use super::scenarios::{
    Against, Bound, Program, RPS, Run, Scenario, Sizes, Target, argv, bench, ratio,
};
use super::shards::{default_sync_threads, descriptors_bounded};

/// One local shard, 64 appends in flight from one thread.
const LIMIT_ASYNC: &str = "limit-async";
/// One local shard read from offset 0 in 1 MiB reads.
const LIMIT_SEQ_READ: &str = "limit-seq-read";
/// Appends in flight in the produce rows.
const IN_FLIGHT: u64 = 64;
/// Shards of the idle row.
const IDLE_SHARDS: u64 = 1_000;
/// The prepared local shard of the catch-up's limit (its own directory:
/// a prepare step runs only when a run's arguments name it).
const CATCH_UP_SHARD: &str = "catch-up-local";

/// The largest CPU share of one node, in % of a core, from the example's
/// notes.
pub(super) const CPU_PERCENT: &str = "cpu_percent_of_core";
/// The failover's p50 over the run's longest election timeout.
pub(super) const FAILOVER_OVER_ELECTION: &str = "failover_p50_over_election_timeout";

/// `cluster_bench <mode> --dir <dir> <tail>`, labelled `felix` (the label
/// targets read).
fn cluster(mode: &str, dir: &str, tail: &str) -> Run {
    Run {
        label: "felix".to_string(),
        program: Program::Cluster,
        args: argv(mode, dir, tail),
        no_ratio: false,
    }
}

fn scenario(
    key: &str,
    title: String,
    runs: Vec<Run>,
    limit: Option<&'static str>,
    targets: Vec<Target>,
) -> Scenario {
    Scenario {
        key: key.to_string(),
        title,
        runs,
        limit,
        versus: RPS,
        shows_time: false,
        targets,
    }
}

/// At least `floor` acknowledged records/s.
fn at_least(floor: f64, text: fn(&super::scenarios::Compared<'_>) -> String) -> Target {
    ratio(RPS, Against::Value(1.0), Bound::AtLeast(floor), text)
}

/// The scenarios; `dir` holds every run's data: the nodes' directories
/// under `nodes`, the local shards under `local` and `catch-up-local`.
pub(super) fn scenarios(s: &Sizes, dir: &str) -> Vec<Scenario> {
    let d = |sub: &str| format!("{dir}/{sub}");
    let (nodes, local) = (d("nodes"), d("local"));
    let records = s.cluster_records;
    let produce = |shards: u64| {
        format!("--shards {shards} --in-flight {IN_FLIGHT} --records {records} --payload-bytes 128")
    };
    let threads_bound = default_sync_threads() + cores() + 4.0;
    vec![
        scenario(
            "cluster-produce-s1",
            format!(
                "3 felix-node processes on loopback, 1 shard, {IN_FLIGHT} appends in flight, 128 B"
            ),
            vec![
                cluster("produce", &nodes, &produce(1)),
                bench(
                    LIMIT_ASYNC,
                    argv(
                        "append-async felix",
                        &local,
                        &format!("--batch 1 --records {records} --in-flight {IN_FLIGHT}"),
                    ),
                ),
            ],
            Some(LIMIT_ASYNC),
            vec![at_least(10_000.0, |c| {
                format!("{:.0} acknowledged records/s (target ≥ 10,000)", c.own)
            })],
        ),
        scenario(
            "cluster-produce-s100",
            format!(
                "3 felix-node processes, 100 shards, {IN_FLIGHT} appends in flight spread over them, 128 B"
            ),
            vec![cluster("produce", &nodes, &produce(100))],
            None,
            vec![at_least(20_000.0, |c| {
                format!("{:.0} acknowledged records/s (target ≥ 20,000)", c.own)
            })],
        ),
        scenario(
            "cluster-idle",
            format!(
                "3 felix-node processes, {IDLE_SHARDS} shards, idle {} s",
                s.cluster_idle_seconds
            ),
            vec![cluster(
                "idle",
                &nodes,
                &format!(
                    "--shards {IDLE_SHARDS} --seconds {}",
                    s.cluster_idle_seconds
                ),
            )],
            None,
            vec![
                ratio(CPU_PERCENT, Against::Value(1.0), Bound::AtMost(5.0), |c| {
                    format!(
                        "{:.1} % of a core on the busiest node (target ≤ 5 %)",
                        c.own
                    )
                }),
                ratio(
                    "threads",
                    Against::Value(threads_bound),
                    Bound::AtMost(1.0),
                    |c| {
                        format!(
                            "{:.0} threads on the busiest node (bound: the default sync pool + runtime workers + 4 = {:.0})",
                            c.own, c.reference
                        )
                    },
                ),
                descriptors_bounded(),
            ],
        ),
        scenario(
            "cluster-catch-up",
            format!(
                "consumer catch-up: read {} k records of 128 B from offset 0 from a follower, 1 MiB a read",
                s.cluster_catch_up_records / 1_000
            ),
            vec![
                cluster(
                    "catch-up",
                    &nodes,
                    &format!(
                        "--records {} --payload-bytes 128",
                        s.cluster_catch_up_records
                    ),
                ),
                bench(
                    LIMIT_SEQ_READ,
                    argv("seq-read felix", &d(CATCH_UP_SHARD), ""),
                ),
            ],
            Some(LIMIT_SEQ_READ),
            vec![ratio(
                RPS,
                Against::Run(LIMIT_SEQ_READ),
                Bound::AtLeast(0.5),
                |c| {
                    format!(
                        "{:.2}× the same read on a local shard ({:.0} vs {:.0} records/s) (target ≥ 0.5×)",
                        c.ratio, c.own, c.reference
                    )
                },
            )],
        ),
        scenario(
            "cluster-failover",
            format!(
                "failover: SIGKILL of the leader, {} times, while 4 producers append",
                s.cluster_kills
            ),
            vec![cluster(
                "failover",
                &nodes,
                &format!("--kills {} --payload-bytes 128", s.cluster_kills),
            )],
            None,
            vec![ratio(
                FAILOVER_OVER_ELECTION,
                Against::Value(2.0),
                Bound::AtMost(1.0),
                |c| {
                    format!(
                        "time to the next acknowledged record p50 = {:.2}× the longest election timeout (target ≤ 2×)",
                        c.own
                    )
                },
            )],
        ),
    ]
}

fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get) as f64
}

/// The local shard the catch-up's limit reads: as many records of 128 B
/// as the cluster's.
pub(super) fn prepare_steps(s: &Sizes, dir: &str) -> Vec<Run> {
    vec![bench(
        "cluster-catch-up",
        argv(
            "prepare felix",
            &format!("{dir}/{CATCH_UP_SHARD}"),
            &format!("--records {}", s.cluster_catch_up_records),
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::super::scenarios::{FULL, QUICK};

    /// A row's key, its runs' labels and programs, and its limit.
    type Shape<'a> = (&'a str, Vec<(&'a str, Program)>, Option<&'a str>);
    use super::*;

    #[test]
    fn cluster_rows_run_the_example_beside_their_local_limits() {
        for sizes in [FULL, QUICK] {
            let rows = scenarios(&sizes, "/data");
            let shape: Vec<Shape<'_>> = rows
                .iter()
                .map(|s| {
                    (
                        s.key.as_str(),
                        s.runs
                            .iter()
                            .map(|r| (r.label.as_str(), r.program))
                            .collect(),
                        s.limit,
                    )
                })
                .collect();
            assert_eq!(
                shape,
                [
                    (
                        "cluster-produce-s1",
                        vec![("felix", Program::Cluster), (LIMIT_ASYNC, Program::Bench)],
                        Some(LIMIT_ASYNC),
                    ),
                    (
                        "cluster-produce-s100",
                        vec![("felix", Program::Cluster)],
                        None,
                    ),
                    ("cluster-idle", vec![("felix", Program::Cluster)], None),
                    (
                        "cluster-catch-up",
                        vec![
                            ("felix", Program::Cluster),
                            (LIMIT_SEQ_READ, Program::Bench)
                        ],
                        Some(LIMIT_SEQ_READ),
                    ),
                    ("cluster-failover", vec![("felix", Program::Cluster)], None),
                ]
            );
            // The limits carry the same load as the cluster's runs.
            let produce = &rows[0].runs;
            let value = |run: &Run, flag: &str| {
                let at = run.args.iter().position(|a| a == flag).unwrap();
                run.args[at + 1].clone()
            };
            assert_eq!(
                value(&produce[0], "--records"),
                value(&produce[1], "--records")
            );
            assert_eq!(
                value(&produce[0], "--in-flight"),
                value(&produce[1], "--in-flight")
            );
            let step = &prepare_steps(&sizes, "/data")[0];
            assert_eq!(value(step, "--dir"), value(&rows[3].runs[1], "--dir"));
            assert_eq!(
                value(step, "--records"),
                value(&rows[3].runs[0], "--records")
            );
        }
    }

    #[test]
    fn cluster_runs_name_the_mode_first_and_the_dir_as_one_argument() {
        let rows = scenarios(&QUICK, "/data with space");
        let failover = &rows[4].runs[0];
        assert_eq!(
            failover.args,
            [
                "failover",
                "--dir",
                "/data with space/nodes",
                "--kills",
                &QUICK.cluster_kills.to_string(),
                "--payload-bytes",
                "128"
            ]
        );
    }
}
