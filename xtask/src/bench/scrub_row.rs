//! The scrub's row of the suite: on-commit batch-1 appends while a scrub
//! reads uncached sealed segments at full speed, against the same appends
//! with no scrub (felix-bench `scrub-append`, which drops the page cache
//! and so needs root). The scrub thread runs at nice 19, as a bulk check
//! should: at full speed it is CPU-bound (checksums), and at normal
//! priority on a small machine it takes the appends' CPU, not their locks
//! (docs/performance.md has both figures). At nice 0 the row also runs a
//! control, a bare read-and-CRC loop over the same files, which costs the
//! appends at least as much as the scrub does.

use super::scenarios::{Against, Bound, P50, Scenario, Sizes, argv, bench, ratio};

pub(super) fn scrub_append(s: &Sizes, dir: String) -> Scenario {
    let tail = |scrub: &str, nice: u32| {
        format!(
            "--sealed-bytes {} --records {} --scrub {scrub} --scrub-nice {nice}",
            s.scrub_sealed_bytes, s.commit_1
        )
    };
    let run = |label: &str, scrub: &str, nice: u32| {
        bench(label, argv("scrub-append felix", &dir, &tail(scrub, nice)))
    };
    Scenario {
        key: "scrub-append".into(),
        title: format!(
            "append, OnCommit, 128 B, batch 1, while a scrub (nice 19) reads {} MiB of uncached sealed segments",
            s.scrub_sealed_bytes >> 20
        ),
        // At nice 0 beside the target: the scrub, and the control that
        // reads and CRCs the same bytes with no record walk (what any
        // full-speed checksum pass costs the appends on this machine).
        runs: vec![
            run("felix", "true", 19),
            run("no-scrub", "false", 19),
            run("felix-nice0", "true", 0),
            run("read-crc-nice0", "read-crc", 0),
        ],
        limit: None,
        versus: P50,
        shows_time: false,
        targets: vec![ratio(
            P50,
            Against::Run("no-scrub"),
            Bound::AtMost(1.2),
            |c| {
                format!(
                    "p50 {:.0} µs = {:.2}× the {:.0} µs with no scrub (target ≤ 1.2×)",
                    c.own, c.ratio, c.reference
                )
            },
        )],
    }
}
