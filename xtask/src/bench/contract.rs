//! The broker contract's scenarios: a consumer following a producer
//! through `wait_readable` (no empty read, wake-up p50 ≤ 50 µs), and the
//! disk 10,000 one-record shards occupy with stepped preallocation (under
//! 1 GiB). Neither has a limit to compare with: the targets are absolute.

use super::scenarios::{Against, Bound, P50, Run, Scenario, Sizes, Target, argv, bench, ratio};

/// The consumer's empty reads: none.
const EMPTY_READS: &str = "empty_reads";
/// Bytes allocated on disk per shard.
const PER_SHARD: &str = "allocated_bytes_per_shard";
/// 1 GiB over 10,000 shards.
const DU_PER_SHARD_LIMIT: f64 = (1u64 << 30) as f64 / 10_000.0;

fn absolute(
    key: &str,
    title: String,
    runs: Vec<Run>,
    versus: &'static str,
    targets: Vec<Target>,
) -> Scenario {
    Scenario {
        key: key.to_string(),
        title,
        runs,
        limit: None,
        versus,
        shows_time: false,
        targets,
    }
}

fn follow_targets() -> Vec<Target> {
    vec![
        ratio(EMPTY_READS, Against::Value(1.0), Bound::AtMost(0.0), |c| {
            format!("{:.0} empty reads (target: none)", c.own)
        }),
        ratio(P50, Against::Value(1.0), Bound::AtMost(50.0), |c| {
            format!("wake-up p50 {:.1} µs (target ≤ 50 µs)", c.own)
        }),
    ]
}

pub(super) fn scenarios(s: &Sizes, dir: &str) -> Vec<Scenario> {
    // 1 M records in a full run, as the contract states it.
    let records = s.read_records / 10;
    let follows = [
        (
            "follow-none",
            format!("--durability none --records {records}"),
            format!("follow, None, {records} records at full speed"),
        ),
        (
            "follow-paced",
            format!(
                "--durability none --records {} --interval-us 50",
                records / 10
            ),
            format!("follow, None, {} records, one each 50 µs", records / 10),
        ),
        (
            "follow-commit",
            format!("--durability on_commit --records {}", s.commit_1 * 2),
            format!(
                "follow, OnCommit, {} records (woken by the sync)",
                s.commit_1 * 2
            ),
        ),
    ];
    let mut out: Vec<Scenario> = follows
        .into_iter()
        .map(|(key, tail, title)| {
            let runs = vec![bench("felix", argv("follow felix", dir, &tail))];
            absolute(key, title, runs, P50, follow_targets())
        })
        .collect();
    let shards = s.sealed_segments;
    out.push(absolute(
        "shards-du",
        format!("disk of {shards} one-record shards, stepped preallocation"),
        vec![bench(
            "felix",
            argv("shards-du felix", dir, &format!("--shards {shards}")),
        )],
        PER_SHARD,
        vec![ratio(
            PER_SHARD,
            Against::Value(1.0),
            Bound::AtMost(DU_PER_SHARD_LIMIT),
            |c| {
                format!(
                    "{:.1} KiB per shard, {:.0} MiB per 10,000 (target < 1 GiB per 10,000)",
                    c.own / 1024.0,
                    c.own * 10_000.0 / (1024.0 * 1024.0)
                )
            },
        )],
    ));
    out
}
