//! `felix-bench <scenario> <impl> [--key value]...`: one measured run of
//! felix storage or of a scenario's limit, printed as one JSON line.
//! `cargo xtask bench` drives it; see `docs/performance.md`.

use std::process::ExitCode;

use felix_bench::{
    Args, Measurement, completions, contract, felix, format_floor, limits, pool_limit, scrub,
    shards, time,
};

const USAGE: &str = "\
usage: felix-bench <scenario> <impl> --dir DIR [--key value]...

scenario        impls
append          felix, limit-write, limit-bufwriter, limit-fdatasync, limit-fsync,
                limit-group
                  --durability none|on_commit --payload-bytes 128 --batch N
                  --threads N --records N [--preallocate off|stepped|whole] [--timed false]
                  (limit-group: --threads writing to one file, group commit by
                  the first to find no sync running, each waiter unparked)
                  (limit-fdatasync, limit-fsync: [--growth grow|keep-size|extend|zeroed],
                  how the file grows: past the end, reserved with KEEP_SIZE,
                  extended 2 MiB ahead with fallocate, or pre-zeroed)
append-async    felix      on-commit appends from one thread, --in-flight N futures
                  in flight, the oldest awaited each time (--records, --batch)
prepare         felix      a shard of --records (or --bytes) records, --segment-bytes
scan            felix, limit   full scan of the newest segment (felix: --depth full|headers)
index-rebuild   felix      same as scan felix --depth headers
seq-read        felix, limit   read the prepared shard from offset 0
seq-read-runs   felix, limit   the same through the run read (limit: the scan's limit over every segment)
random-read     felix, limit   --reads N single-record reads at random offsets
time-lookup     felix      --lookups N offset_for_timestamp calls at random
                  timestamps, each beside a random read by offset
prepare-sealed  felix      --segments N sealed segments
open            felix, limit   open the prepared shard (limit: list its directory)
prepare-crash   felix      --sealed N --segment-bytes B --newest-bytes B
crash-open      felix      tear the newest segment's tail, then open
follow          felix      a consumer follows a producer's --records appends with
                  wait_readable + read: empty reads and wake-up latency
                  --durability none|on_commit --batch N [--interval-us N]
shards-du       felix      --shards N shards of one record each, closed: bytes
                  allocated on disk [--preallocate off|stepped|whole]
prepare-shards  felix      a store of --shards N (10,000) one-record shards, closed, and
                  the limits' files beside it
shards-open     felix, limit   open the store and read one record of each shard
                  (limit: list the root and each shard directory)
shards-append   felix, limit, limit-format
                  one on-commit append to each shard, --in-flight 64 from one
                  thread (--form futures) or from --threads 64 (--form threads)
                  (limit: open, pwrite, fdatasync, close each file from 64 threads;
                  limit-format: the fewest calls a writer of the format makes, from
                  64 threads: lock the shard directory and its lock file, list it,
                  read the segment, pwrite, fdatasync, close)
shards-commit   felix, limit, limit-pool
                  --records on-commit appends spread over --shards 1,000,
                  --in-flight 64 (--form futures) or --threads 64 (--form threads)
                  (limit: write+fdatasync, a file per thread, 64 threads;
                  limit-pool: one thread writes --in-flight 64 over --shards files,
                  a pool of --sync-threads syncs them)
                  (felix, in every shards- run: [--sync-threads N]
                  [--preallocate off|stepped|whole], the store's defaults if not given)
scrub-append    felix      OnCommit batch-1 appends while a scrub reads --sealed-bytes
                  of uncached sealed segments at full speed [--scrub false|read-crc]
                  [--scrub-nice N]
                  (drops the page cache: needs root)";

fn run(args: &Args) -> Result<Measurement, String> {
    let imp = args.implementation.as_str();
    match (args.scenario.as_str(), imp) {
        ("append", "felix") => felix::append(args),
        ("append", _) if imp.starts_with("limit-") => limits::append(args),
        ("append-async", "felix") => completions::append_submitted(args),
        ("prepare", "felix") => felix::prepare(args),
        ("scan", "felix") => felix::scan(args),
        ("index-rebuild", "felix") => {
            let mut args = args.clone();
            args.params.insert("depth".into(), "headers".into());
            felix::scan(&args)
        }
        ("scan", "limit") => limits::scan(args),
        ("seq-read", "felix") => felix::seq_read(args),
        ("seq-read", "limit") => limits::seq_read(args),
        ("seq-read-runs", "felix") => felix::seq_read_runs(args),
        ("seq-read-runs", "limit") => limits::seq_read_scan(args),
        ("random-read", "felix") => felix::random_read(args),
        ("random-read", "limit") => limits::random_read(args),
        ("time-lookup", "felix") => time::time_lookup(args),
        ("prepare-sealed", "felix") => felix::prepare_sealed(args),
        ("open", "felix") => felix::open(args),
        ("open", "limit") => limits::open(args),
        ("prepare-crash", "felix") => felix::prepare_crash(args),
        ("crash-open", "felix") => felix::crash_open(args),
        ("follow", "felix") => contract::follow(args),
        ("prepare-shards", "felix") => shards::prepare(args),
        ("shards-open", "felix") => shards::open(args),
        ("shards-open", "limit") => shards::open_limit(args),
        ("shards-append", "felix") => shards::append(args),
        ("shards-append", "limit") => shards::append_limit(args),
        ("shards-append", "limit-format") => format_floor::append(args),
        ("shards-commit", "felix") => shards::commit(args),
        ("shards-commit", "limit") => shards::commit_limit(args),
        ("shards-commit", "limit-pool") => pool_limit::commit(args),
        ("shards-du", "felix") => contract::shards_du(args),
        ("scrub-append", "felix") => scrub::scrub_append(args),
        (scenario, imp) => Err(format!("no run {scenario} {imp}\n\n{USAGE}")),
    }
}

fn main() -> ExitCode {
    // Built with the `metrics` feature: felix-storage records every metric
    // into a recorder, as an application with an exporter would.
    #[cfg(feature = "metrics")]
    if let Err(message) = install_recorder() {
        eprintln!("felix-bench: {message}");
        return ExitCode::FAILURE;
    }
    let args = match Args::from_env() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("felix-bench: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(measurement) => {
            measurement.print();
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!(
                "felix-bench {} {}: {message}",
                args.scenario, args.implementation
            );
            ExitCode::FAILURE
        }
    }
}

/// Installs the recorder `FELIX_BENCH_RECORDER` names: `debugging` (the
/// default: metrics-util's, which keeps every histogram sample for the
/// life of the process) or `prometheus` (metrics-exporter-prometheus's
/// recorder without its HTTP listener, its upkeep run each second as its
/// listener would, so histograms are drained as a deployed exporter
/// drains them).
#[cfg(feature = "metrics")]
fn install_recorder() -> Result<(), String> {
    let which = std::env::var("FELIX_BENCH_RECORDER").unwrap_or_else(|_| "debugging".into());
    match which.as_str() {
        "debugging" => metrics_util::debugging::DebuggingRecorder::new()
            .install()
            .map_err(|e| format!("install the debugging recorder: {e}")),
        "prometheus" => {
            let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder)
                .map_err(|e| format!("install the prometheus recorder: {e}"))?;
            std::thread::Builder::new()
                .name("metrics-upkeep".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(std::time::Duration::from_secs(1));
                        handle.run_upkeep();
                    }
                })
                .map(drop)
                .map_err(|e| format!("spawn the metrics upkeep thread: {e}"))
        }
        other => Err(format!(
            "FELIX_BENCH_RECORDER={other}: expected prometheus or debugging"
        )),
    }
}
