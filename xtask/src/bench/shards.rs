//! The read path's and the store's resource scenarios: the run read over
//! the 10 M-record shard against the recovery scan's limit, and a store of
//! many shards — opening 10,000 after a clean close and reading one record
//! of each, one on-commit append to each of them, and on-commit appends
//! spread over 1,000 — with the descriptors, threads and memory they cost.

use super::MIB;
use super::scenarios::{
    Against, BPS, Bound, ELAPSED, RPS, Run, Scenario, Sizes, Target, argv, bench, ratio,
};

/// Shards of the commit scenario.
const COMMIT_SHARDS: u64 = 1_000;
/// The store's default `max_open_shards`.
const MAX_OPEN_SHARDS: f64 = 1_024.0;
/// Descriptors an open shard holds (its directory's lock, the older
/// releases' lock file, the active segment and its index).
const PER_SHARD_DESCRIPTORS: f64 = 4.0;

/// The store's default sync pool: sixteen times the available
/// parallelism, 16 to 64 (`felix_storage::limits::default_sync_threads`).
pub(super) fn default_sync_threads() -> f64 {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    (16 * cores).clamp(16, 64) as f64
}

fn scenario(
    key: &str,
    title: String,
    runs: Vec<Run>,
    versus: &'static str,
    shows_time: bool,
    targets: Vec<Target>,
) -> Scenario {
    Scenario {
        key: key.to_string(),
        title,
        runs,
        limit: Some("limit"),
        versus,
        shows_time,
        targets,
    }
}

pub(super) fn descriptors_bounded() -> Target {
    ratio(
        "open_descriptors",
        Against::Value(MAX_OPEN_SHARDS * PER_SHARD_DESCRIPTORS + 64.0),
        Bound::AtMost(1.0),
        |c| {
            format!(
                "{:.0} descriptors open (bound: 1,024 open shards × 4 + 64 = {:.0})",
                c.own, c.reference
            )
        },
    )
}

/// The scenarios; `shard` holds the 10 M-record shard, `shards` the store
/// `prepare-shards` makes.
pub(super) fn scenarios(s: &Sizes, shard: &str, shards: &str) -> Vec<Scenario> {
    let many = s.sealed_segments;
    let many_tail = format!("--shards {many}");
    let commit_tail = format!("--shards {COMMIT_SHARDS} --records {}", s.commit_64);
    vec![
        scenario(
            "seq-read-runs",
            format!(
                "sequential read through the run read, {} M-record shard",
                s.read_records as f64 / 1e6
            ),
            vec![
                bench("felix", argv("seq-read-runs felix", shard, "")),
                bench("limit", argv("seq-read-runs limit", shard, "")),
            ],
            BPS,
            false,
            vec![ratio(
                BPS,
                Against::Run("limit"),
                Bound::AtLeast(0.8),
                |c| {
                    format!(
                        "{:.2}× the recovery scan's limit's bytes/s (target ≥ 0.8×)",
                        c.ratio
                    )
                },
            )],
        ),
        scenario(
            "shards-open",
            format!("open a store of {many} shards after a clean close, read one record of each"),
            vec![
                bench("felix", argv("shards-open felix", shards, &many_tail)),
                bench("limit", argv("shards-open limit", shards, "")),
            ],
            ELAPSED,
            true,
            vec![
                ratio(ELAPSED, Against::Run("limit"), Bound::AtMost(5.0), |c| {
                    format!(
                        "{:.0} ms = {:.1}× listing the root and each shard directory ({:.0} ms) (target ≤ 5×)",
                        c.own * 1e3,
                        c.ratio,
                        c.reference * 1e3
                    )
                }),
                descriptors_bounded(),
                ratio(
                    "rss_after_open_bytes",
                    Against::Value(MIB as f64),
                    Bound::AtMost(64.0),
                    |c| format!("{:.1} MiB resident (bound 64 MiB)", c.own / MIB as f64),
                ),
            ],
        ),
        scenario(
            "shards-append",
            format!(
                "one OnCommit append to each of {many} shards, 64 in flight (64 threads, as the limit's)"
            ),
            vec![
                // Threads, like the limit: opens of different shards run
                // at once, where one thread driving futures opens each
                // shard in turn (docs/performance.md).
                bench(
                    "felix",
                    argv(
                        "shards-append felix",
                        shards,
                        &format!("{many_tail} --form threads"),
                    ),
                ),
                bench("limit", argv("shards-append limit", shards, &many_tail)),
                // The fewest calls a writer of the format makes for the
                // same work (felix-bench's format_floor.rs): how much of
                // the gap to the one-file limit the format's own files set.
                bench(
                    "limit-format",
                    argv("shards-append limit-format", shards, &many_tail),
                ),
            ],
            RPS,
            false,
            vec![
                ratio(RPS, Against::Run("limit"), Bound::AtLeast(0.8), |c| {
                    format!(
                        "{:.2}× 64 threads each opening, writing, fdatasyncing and closing a file (target ≥ 0.8×)",
                        c.ratio
                    )
                }),
                descriptors_bounded(),
            ],
        ),
        scenario(
            "shards-commit",
            format!("OnCommit, {COMMIT_SHARDS} shards, 64 in flight spread over them (futures)"),
            vec![
                bench("felix", argv("shards-commit felix", shards, &commit_tail)),
                bench("limit", argv("shards-commit limit", shards, &commit_tail)),
            ],
            RPS,
            false,
            vec![
                ratio(RPS, Against::Run("limit"), Bound::AtLeast(0.8), |c| {
                    format!(
                        "{:.2}× 64 threads each write+fdatasync on a file of its own (target ≥ 0.8×)",
                        c.ratio
                    )
                }),
                ratio(
                    "threads",
                    Against::Value(default_sync_threads() + 2.0),
                    Bound::AtMost(1.0),
                    |c| {
                        format!(
                            "{:.0} threads (target ≤ the default pool + 2 = {:.0})",
                            c.own, c.reference
                        )
                    },
                ),
                ratio(
                    "rss_bytes",
                    Against::Value(MIB as f64),
                    Bound::AtMost(64.0),
                    |c| format!("{:.1} MiB resident (target ≤ 64 MiB)", c.own / MIB as f64),
                ),
            ],
        ),
    ]
}

/// The store of `prepare-shards`, with the limits' files beside it.
pub(super) fn prepare_steps(s: &Sizes, shards: &str) -> Vec<Run> {
    vec![bench(
        "shards",
        argv(
            "prepare-shards felix",
            shards,
            &format!("--shards {}", s.sealed_segments),
        ),
    )]
}
