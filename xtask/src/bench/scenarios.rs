//! The benchmark suite as a table: every scenario with its key, its runs
//! (program and arguments), its limit and its targets, each target a ratio
//! of a felix figure to a reference figure; and the data the scenarios need,
//! prepared once. Adding a scenario is adding a row here.

use std::path::Path;

use super::MIB;
pub(super) use super::sizes::{FULL, QUICK, Sizes};

/// The peer crates every peer-compared scenario also runs.
pub(super) const PEERS: [&str; 3] = ["commitlog", "raft-engine", "wal-db"];

/// Which program runs an implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Program {
    /// `target/release/felix-bench`.
    Bench,
    /// `target/release/examples/peers`.
    Peers,
    /// felix-raft's `target/release/examples/raft_bench`.
    Raft,
    /// felix-cluster's `target/release/examples/cluster_bench`, which
    /// starts `target/release/felix-node` processes.
    Cluster,
}

/// One implementation of a scenario: a program and its arguments.
#[derive(Debug, Clone)]
pub(super) struct Run {
    pub(super) label: String,
    pub(super) program: Program,
    pub(super) args: Vec<String>,
    /// Its figures are shown but no ratio is drawn from them (a peer that
    /// does not do the work measured).
    pub(super) no_ratio: bool,
}

/// How felix's figure must compare with the reference: felix / reference
/// at least, strictly above, or at most the given ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Bound {
    AtLeast(f64),
    Above(f64),
    AtMost(f64),
}

impl Bound {
    pub(super) fn met(self, ratio: f64) -> bool {
        match self {
            Self::AtLeast(r) => ratio >= r,
            Self::Above(r) => ratio > r,
            Self::AtMost(r) => ratio <= r,
        }
    }
}

/// What felix's figure is compared with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Against {
    /// The same figure of another run of the scenario.
    Run(&'static str),
    /// The same figure of felix in another scenario.
    Scenario(&'static str),
    /// The same figure of the best of the peers (the highest).
    BestPeer,
    /// A fixed value.
    Value(f64),
}

/// The figures a target's text is made from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Compared<'a> {
    /// felix's figure.
    pub(super) own: f64,
    /// The reference's.
    pub(super) reference: f64,
    /// `own / reference`.
    pub(super) ratio: f64,
    /// The reference run's label (for [`Against::BestPeer`], the peer).
    pub(super) reference_label: &'a str,
    /// felix's appends per sync in the scenario (NaN where not measured).
    pub(super) appends_per_sync: f64,
}

/// A check of a shape across a scenario's runs: given the median of a
/// figure of a run (by label, figure), whether it is met and what was
/// measured.
pub(super) type Curve = fn(&dyn Fn(&str, &str) -> f64, &Sizes) -> (bool, String);

/// A target of a scenario.
#[derive(Debug, Clone)]
pub(super) enum Target {
    /// felix's `figure` over the reference's must meet `bound`.
    Ratio {
        figure: &'static str,
        against: Against,
        bound: Bound,
        text: fn(&Compared<'_>) -> String,
    },
    /// A shape across the scenario's runs (how a time grows), from the
    /// medians of the runs by label: met, and what was measured.
    Curve(Curve),
}

/// One row group of the table: a scenario with fixed parameters, run by
/// several implementations in alternation.
#[derive(Debug, Clone)]
pub(super) struct Scenario {
    pub(super) key: String,
    pub(super) title: String,
    pub(super) runs: Vec<Run>,
    /// The limit's label in `runs`, if the scenario has one.
    pub(super) limit: Option<&'static str>,
    /// The figure the table's "vs limit" column compares.
    pub(super) versus: &'static str,
    /// The table shows the time taken rather than a rate (opens).
    pub(super) shows_time: bool,
    pub(super) targets: Vec<Target>,
}

/// The words of `head`, then `dir` as one argument (a path may hold
/// spaces), then the words of `tail`.
pub(super) fn argv(head: &str, dir: &str, tail: &str) -> Vec<String> {
    let words = |text: &str| {
        text.split_whitespace()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let mut args = words(head);
    args.extend(["--dir".to_string(), dir.to_string()]);
    args.extend(words(tail));
    args
}

/// felix-bench with `args`, labelled `label`.
pub(super) fn bench(label: &str, args: Vec<String>) -> Run {
    Run {
        label: label.to_string(),
        program: Program::Bench,
        args,
        no_ratio: false,
    }
}

/// `peers <scenario> <peer> --dir <dir> <tail>` for every peer, labelled by
/// peer.
pub(super) fn peers(scenario: &str, dir: &str, tail: &str) -> Vec<Run> {
    PEERS
        .iter()
        .map(|peer| Run {
            label: peer.to_string(),
            program: Program::Peers,
            args: argv(&format!("{scenario} {peer}"), dir, tail),
            no_ratio: false,
        })
        .collect()
}

pub(super) fn ratio(
    figure: &'static str,
    against: Against,
    bound: Bound,
    text: fn(&Compared<'_>) -> String,
) -> Target {
    Target::Ratio {
        figure,
        against,
        bound,
        text,
    }
}

pub(super) const RPS: &str = "records_per_second";
pub(super) const BPS: &str = "bytes_per_second";
pub(super) const P50: &str = "latency_p50_us";
pub(super) const ELAPSED: &str = "elapsed_seconds";

/// The scenarios, in table order, with their data under `data`.
pub(super) fn scenarios(s: &Sizes, data: &Path) -> Vec<Scenario> {
    let d = |sub: &str| data.join(sub).to_string_lossy().into_owned();
    let mut out = Vec::new();
    let scenario = |key: String, title: String, runs, limit, versus, targets| Scenario {
        key,
        title,
        runs,
        limit,
        versus,
        shows_time: false,
        targets,
    };

    // Appends with durability none, against a write loop or a BufWriter.
    let append_targets = |batch: u64| -> Vec<Target> {
        match batch {
            1 => vec![
                ratio(RPS, Against::Run("limit-write"), Bound::AtLeast(0.8), |c| {
                    format!("{:.2}× the write loop's records/s (target ≥ 0.8×)", c.ratio)
                }),
                ratio(RPS, Against::BestPeer, Bound::Above(1.0), |c| {
                    format!(
                        "{:.2}× the best peer at batch 1 ({}) (target: ahead of every peer)",
                        c.ratio, c.reference_label
                    )
                }),
            ],
            _ => {
                let mut targets = vec![ratio(
                    RPS,
                    Against::Run("limit-bufwriter"),
                    Bound::AtLeast(0.6),
                    |c| format!("{:.2}× the BufWriter's records/s (target ≥ 0.6×)", c.ratio),
                )];
                if batch == 16 {
                    targets.push(ratio(
                        RPS,
                        Against::Scenario("append-none-b1"),
                        Bound::AtLeast(4.0),
                        |c| format!("{:.1}× our batch-1 records/s (target ≥ 4×)", c.ratio),
                    ));
                }
                targets
            }
        }
    };
    for (batch, records, limit) in [
        (1, s.append_b1, "limit-write"),
        (16, s.append_b16, "limit-bufwriter"),
        (256, s.append_b256, "limit-bufwriter"),
    ] {
        let (dir, tail) = (
            d("append"),
            format!("--durability none --batch {batch} --records {records} --timed false"),
        );
        let mut runs = vec![
            bench("felix", argv("append felix", &dir, &tail)),
            bench(limit, argv(&format!("append {limit}"), &dir, &tail)),
        ];
        runs.extend(peers("append", &dir, &tail));
        out.push(scenario(
            format!("append-none-b{batch}"),
            format!("append, durability none, 128 B, batch {batch}, 1 thread"),
            runs,
            Some(limit),
            BPS,
            append_targets(batch),
        ));
    }

    // On-commit appends: threads, and futures from one thread.
    out.extend(super::commit::scenarios(s, &d("commit")));

    // On-commit appends while a scrub reads uncached sealed segments.
    out.push(super::scrub_row::scrub_append(s, d("scrub")));

    // Recovery scan and index rebuild of one newest segment.
    let seg = d("segment");
    let mut runs = vec![
        bench("felix", argv("scan felix", &seg, "")),
        bench("limit", argv("scan limit", &seg, "")),
    ];
    for mut peer in peers("scan", &seg, "") {
        // commitlog's open reads no record: its row is labelled so, and no
        // ratio is drawn from it.
        if peer.label == "commitlog" {
            peer.label = "commitlog (reads nothing on open)".into();
            peer.no_ratio = true;
        }
        runs.push(peer);
    }
    out.push(scenario(
        "scan".into(),
        format!(
            "recovery: full scan of a {} MiB newest segment, 128 B records",
            s.segment_bytes / MIB
        ),
        runs,
        Some("limit"),
        BPS,
        vec![ratio(
            BPS,
            Against::Run("limit"),
            Bound::AtLeast(0.6),
            |c| format!("{:.2}× the limit's bytes/s (target ≥ 0.6×)", c.ratio),
        )],
    ));
    out.push(scenario(
        "index-rebuild".into(),
        "index rebuild (headers only) of the same segment".into(),
        vec![bench("felix", argv("index-rebuild felix", &seg, ""))],
        None,
        BPS,
        vec![ratio(RPS, Against::Value(20e6), Bound::AtLeast(1.0), |c| {
            format!("{:.1} M records/s (target ≥ 20 M)", c.own / 1e6)
        })],
    ));

    // Reads of a shard of `read_records` records.
    let shard = d("shard");
    let records = s.read_records as f64 / 1e6;
    let random = format!("--reads {}", s.random_reads);
    for (key, title, tail, versus, target) in [
        (
            "seq-read",
            "sequential read from offset 0 (consumer catch-up)",
            "",
            BPS,
            ratio(BPS, Against::Run("limit"), Bound::AtLeast(0.5), |c| {
                format!("{:.2}× the limit's bytes/s (target ≥ 0.5×)", c.ratio)
            }),
        ),
        (
            "random-read",
            "random read of one record by offset",
            random.as_str(),
            P50,
            ratio(P50, Against::Run("limit"), Bound::AtMost(2.0), |c| {
                format!(
                    "p50 {:.2} µs = {:.2}× one pread's {:.2} µs (target ≤ 2×)",
                    c.own, c.ratio, c.reference
                )
            }),
        ),
    ] {
        let mut runs = vec![
            bench("felix", argv(&format!("{key} felix"), &shard, tail)),
            bench("limit", argv(&format!("{key} limit"), &shard, tail)),
        ];
        runs.extend(peers(key, &shard, tail));
        out.push(scenario(
            key.into(),
            format!("{title}, {records} M-record shard"),
            runs,
            Some("limit"),
            versus,
            vec![target],
        ));
    }

    // Lookups by time on the same shard, each beside a random read by
    // offset in the same run.
    out.push(scenario(
        "time-lookup".into(),
        format!("offset for a timestamp (offset_for_timestamp), {records} M-record shard"),
        vec![bench(
            "felix",
            argv(
                "time-lookup felix",
                &shard,
                &format!("--lookups {}", s.random_reads),
            ),
        )],
        None,
        P50,
        vec![ratio(
            "lookup_over_read_p50",
            Against::Value(2.0),
            Bound::AtMost(1.0),
            |c| {
                format!(
                    "p50 {:.2}× a random read by offset in the same run (target ≤ 2×)",
                    c.own
                )
            },
        )],
    ));

    out.extend(super::shards::scenarios(s, &shard, &d("shards")));

    // Opening after a clean close, and after a crash (two curves).
    let sealed = d("sealed");
    out.push(Scenario {
        shows_time: true,
        ..scenario(
            "open".into(),
            format!(
                "open a shard of {} sealed segments after a clean close",
                s.sealed_segments
            ),
            vec![
                bench("felix", argv("open felix", &sealed, "")),
                bench("limit", argv("open limit", &sealed, "")),
            ],
            Some("limit"),
            ELAPSED,
            vec![
                ratio(ELAPSED, Against::Run("limit"), Bound::AtMost(5.0), |c| {
                    format!(
                        "{:.1} ms = {:.1}× listing the directory ({:.1} ms) (target ≤ 5×)",
                        c.own * 1e3,
                        c.ratio,
                        c.reference * 1e3
                    )
                }),
                ratio(
                    "rss_after_open_bytes",
                    Against::Value(32.0 * MIB as f64),
                    Bound::AtMost(1.0),
                    |c| {
                        format!(
                            "{:.1} MiB resident after open (target ≤ 32 MiB)",
                            c.own / MIB as f64
                        )
                    },
                ),
            ],
        )
    });
    let mut crash_runs: Vec<Run> = s
        .crash_newest
        .iter()
        .map(|&newest| {
            let dir = d(&format!("crash-newest-{}", newest / MIB));
            bench(&newest_label(newest), argv("crash-open felix", &dir, ""))
        })
        .collect();
    crash_runs.extend(s.crash_sealed.iter().map(|&sealed| {
        let dir = d(&format!("crash-sealed-{sealed}"));
        bench(&sealed_label(sealed, s), argv("crash-open felix", &dir, ""))
    }));
    out.push(Scenario {
        shows_time: true,
        ..scenario(
            "crash-open".into(),
            format!(
                "open after a crash (torn tail), sealed segments of {} MiB",
                s.crash_segment_bytes / MIB
            ),
            crash_runs,
            None,
            ELAPSED,
            vec![Target::Curve(crash_open_grows_with_the_newest_segment_only)],
        )
    });

    // Memory of a long append run.
    let memory_runs = s
        .memory_bytes
        .iter()
        .map(|&bytes| {
            let tail = format!(
                "--durability none --batch 256 --records {} --timed false",
                bytes / 156
            );
            bench(
                &memory_label(bytes),
                argv("append felix", &d("memory"), &tail),
            )
        })
        .collect();
    out.push(scenario(
        "memory".into(),
        "peak RSS of an append run (durability none, batch 256)".into(),
        memory_runs,
        None,
        BPS,
        vec![Target::Curve(memory_does_not_grow_with_data)],
    ));
    out.extend(super::contract::scenarios(s, &d("contract")));
    out.extend(super::raft::scenarios(s, &d("raft")));
    out.extend(super::cluster::scenarios(s, &d("cluster")));
    out
}

fn newest_label(newest: u64) -> String {
    format!("newest {} MiB, 4 sealed", newest / MIB)
}

fn sealed_label(sealed: u64, s: &Sizes) -> String {
    format!("{sealed} sealed, newest {} MiB", s.crash_newest[0] / MIB)
}

fn memory_label(bytes: u64) -> String {
    format!("felix {} MiB", bytes / MIB)
}

/// Open after a crash takes time with the newest segment (scanned in full)
/// and not with the sealed ones (tail-checked).
fn crash_open_grows_with_the_newest_segment_only(
    median: &dyn Fn(&str, &str) -> f64,
    s: &Sizes,
) -> (bool, String) {
    let t = |label: String| median(&label, ELAPSED);
    let newest: Vec<f64> = s.crash_newest.iter().map(|&n| t(newest_label(n))).collect();
    let sealed: Vec<f64> = s
        .crash_sealed
        .iter()
        .map(|&k| t(sealed_label(k, s)))
        .collect();
    let grows = newest[2] / newest[0];
    let flat = sealed[2] / sealed[0];
    let size_ratio = s.crash_newest[2] as f64 / s.crash_newest[0] as f64;
    (
        grows >= size_ratio / 4.0 && flat <= 2.0,
        format!(
            "newest ×{size_ratio:.0} → time ×{grows:.1}; shard {}→{} sealed segments (×{:.0} bytes) → time ×{flat:.2} (target: grows with the newest segment only)",
            s.crash_sealed[0],
            s.crash_sealed[2],
            (s.crash_sealed[2] * s.crash_segment_bytes + s.crash_newest[0]) as f64
                / s.crash_newest[0] as f64,
        ),
    )
}

/// A long append run's peak memory stays small and does not grow with the
/// data appended.
fn memory_does_not_grow_with_data(median: &dyn Fn(&str, &str) -> f64, s: &Sizes) -> (bool, String) {
    let small = median(&memory_label(s.memory_bytes[0]), "peak_rss_bytes");
    let big = median(&memory_label(s.memory_bytes[1]), "peak_rss_bytes");
    (
        big < 64.0 * MIB as f64 && big <= small * 1.5 + 4.0 * MIB as f64,
        format!(
            "peak RSS {:.1} MiB after {} MiB appended, {:.1} MiB after {} MiB (target < 64 MiB, not growing with data)",
            big / MIB as f64,
            s.memory_bytes[1] / MIB,
            small / MIB as f64,
            s.memory_bytes[0] / MIB
        ),
    )
}

/// Data the scenarios need, made once before the rounds: a segment to
/// scan, a shard to read, a shard of sealed segments to open, shards left
/// by a crash.
pub(super) fn prepare_steps(s: &Sizes, data: &Path) -> Vec<Run> {
    let d = |sub: &str| data.join(sub).to_string_lossy().into_owned();
    let (segment, shard) = (d("segment"), d("shard"));
    let segment_tail = format!(
        "--bytes {} --segment-bytes {}",
        s.segment_bytes,
        s.segment_bytes + 64 * MIB
    );
    let mut steps = vec![
        bench("segment", argv("prepare felix", &segment, &segment_tail)),
        bench(
            "shard",
            argv(
                "prepare felix",
                &shard,
                &format!("--records {}", s.read_records),
            ),
        ),
        bench(
            "sealed",
            argv(
                "prepare-sealed felix",
                &d("sealed"),
                &format!("--segments {}", s.sealed_segments),
            ),
        ),
    ];
    let segment_records = (s.segment_bytes - 32) / 156;
    for peer in PEERS {
        for (dir, records) in [(&segment, segment_records), (&shard, s.read_records)] {
            steps.push(Run {
                label: peer.to_string(),
                program: Program::Peers,
                args: argv(
                    &format!("prepare {peer}"),
                    dir,
                    &format!("--records {records}"),
                ),
                no_ratio: false,
            });
        }
    }
    steps.extend(super::shards::prepare_steps(s, &d("shards")));
    steps.extend(super::cluster::prepare_steps(s, &d("cluster")));
    let crash = |dir: &str, sealed: u64, newest: u64| {
        let tail = format!(
            "--sealed {sealed} --segment-bytes {} --newest-bytes {newest}",
            s.crash_segment_bytes
        );
        bench("crash", argv("prepare-crash felix", &d(dir), &tail))
    };
    for newest in s.crash_newest {
        steps.push(crash(&format!("crash-newest-{}", newest / MIB), 4, newest));
    }
    for sealed in s.crash_sealed {
        steps.push(crash(
            &format!("crash-sealed-{sealed}"),
            sealed,
            s.crash_newest[0],
        ));
    }
    steps
}
