//! `felix-store bench`: append throughput and per-append latency, printed as
//! the reference tool's `{"event":"bench",…}` JSON line.
//!
//! `--concurrency` appenders append batches of `--batch` records of
//! `--payload-bytes` incompressible bytes (seeded xorshift, so a compressing
//! file system cannot flatter the figures). How they run is `--appenders`:
//!
//! - `async` (the default), as a broker's event loop runs them: one thread
//!   keeps `--concurrency` appends in flight through each append's future
//!   ([`Append::submit`](felix_storage::Append::submit)), issuing the next
//!   as the oldest is acknowledged. Like the reference's `--concurrency`
//!   tasks each awaiting its append, at most `--concurrency` appends are
//!   outstanding at any time.
//! - `threads`: `--concurrency` OS threads, each blocking in
//!   [`Append::wait`](felix_storage::Append::wait) until its append is
//!   acknowledged.
//!
//! `--warmup-records` go first and are not measured; then every appender
//! starts together and each append is timed with a monotonic clock from
//! the call to its acknowledgement. Percentiles are nearest-rank over the
//! sorted latencies of every measured append.

use std::collections::VecDeque;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use bytes::Bytes;
use felix_storage::{AppendFuture, AppendReceipt, Record, Shard};
use serde_json::json;

use crate::cmd::log_args::{Acks, LogArgs, appends_per_sync, now_micros};
use crate::error::{CliError, Outcome};
use crate::output::{Out, Progress, progress_beside_stream, round, seconds};
use crate::pattern::xorshift_bytes;

/// Distinct payloads each thread cycles through: enough that consecutive
/// records differ, few enough to generate up front.
const PAYLOAD_POOL: usize = 64;

/// Payloads per thread: [`PAYLOAD_POOL`], or fewer (at least one) so that
/// every thread's pool together stays within
/// [`MAX_HELD_PAYLOAD_BYTES`](crate::cmd::log_args::MAX_HELD_PAYLOAD_BYTES).
fn pool_len(concurrency: usize, payload_bytes: usize) -> usize {
    let per_payload = (concurrency as u64).saturating_mul(payload_bytes as u64);
    let fits = crate::cmd::log_args::MAX_HELD_PAYLOAD_BYTES
        .checked_div(per_payload)
        .unwrap_or(u64::MAX);
    usize::try_from(fits)
        .unwrap_or(usize::MAX)
        .clamp(1, PAYLOAD_POOL)
}

/// How `bench`'s appenders run (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Appenders {
    /// One thread keeps `--concurrency` appends in flight through their
    /// futures, as a broker's event loop does.
    Async,
    /// `--concurrency` OS threads, each blocking in its append.
    Threads,
}

impl Appenders {
    fn as_str(self) -> &'static str {
        match self {
            Appenders::Async => "async",
            Appenders::Threads => "threads",
        }
    }
}

/// Arguments of `bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    log: LogArgs,
    /// Appends outstanding at once: in flight from one thread, or one per
    /// thread (`--appenders`).
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// How the appenders run: `async` (one thread keeping `--concurrency`
    /// appends in flight, as a broker's event loop does) or `threads`
    /// (`--concurrency` OS threads, each blocking in its append).
    #[arg(long, value_enum, default_value_t = Appenders::Async)]
    appenders: Appenders,
    /// Records appended before measuring starts (not counted).
    #[arg(long, default_value_t = 1_000)]
    warmup_records: u64,
    /// Free text copied into the result line, to tell runs apart.
    #[arg(long, default_value = "felix")]
    label: String,
}

/// What one thread measured.
#[derive(Debug, Default)]
struct Measured {
    latencies_nanos: Vec<u64>,
    receipts: Vec<AppendReceipt>,
}

/// Runs `bench`.
pub(crate) fn run(args: Args, out: &mut Out) -> Result<Outcome, CliError> {
    let log = &args.log;
    log.check()?;
    if args.concurrency == 0 {
        return Err(CliError::Usage("--concurrency must be at least 1".into()));
    }
    log.check_held(Some(args.concurrency as u64))?;
    let pool_len = pool_len(args.concurrency, log.payload_bytes);
    let shard = log.open()?;
    // Threads, and the appends each keeps outstanding.
    let (threads, in_flight) = match args.appenders {
        Appenders::Async => (1, args.concurrency),
        Appenders::Threads => (args.concurrency, 1),
    };
    let pools: Vec<Vec<Bytes>> = (0..threads)
        .map(|t| {
            (0..pool_len)
                .map(|i| {
                    // Spread consecutive seeds over the whole state space.
                    let seed =
                        ((t * PAYLOAD_POOL + i) as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    Bytes::from(xorshift_bytes(seed, log.payload_bytes))
                })
                .collect()
        })
        .collect();
    let bar = Progress::bar(log.records, "benchmarking", progress_beside_stream());
    // Two rendezvous: every warm-up has finished before the counters are
    // read, and the counters are read before any measured append starts.
    let warmed = Barrier::new(threads + 1);
    let go = Barrier::new(threads + 1);
    let (elapsed, before, measured) = std::thread::scope(|scope| {
        let handles: Vec<_> = pools
            .iter()
            .enumerate()
            .map(|(t, pool)| {
                let shard = &shard;
                let (warmed, go) = (&warmed, &go);
                let bar = &bar;
                let warmup = share(args.warmup_records, threads, t);
                let records = share(log.records, threads, t);
                let appender = Appender {
                    shard,
                    pool,
                    batch: log.batch,
                    in_flight: (args.appenders == Appenders::Async).then_some(in_flight),
                };
                scope.spawn(move || -> Result<Measured, CliError> {
                    let warm = appender.append_n(warmup, None, &mut |_| {});
                    // Every thread reaches the barrier even after a failure,
                    // so the others are never left waiting.
                    warmed.wait();
                    go.wait();
                    warm?;
                    let mut measured = Measured::default();
                    appender.append_n(records, Some(&mut measured), &mut |n| bar.inc(n))?;
                    Ok(measured)
                })
            })
            .collect();
        warmed.wait();
        let before = shard.stats();
        go.wait();
        let started = Instant::now();
        let measured: Vec<_> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(CliError::Usage("a bench thread panicked".into())))
            })
            .collect();
        (started.elapsed(), before, measured)
    });
    bar.finish();
    let mut latencies = Vec::new();
    let mut acks = Acks::default();
    let mut receipts = Vec::new();
    for result in measured {
        let m = result?;
        latencies.extend(m.latencies_nanos);
        receipts.extend(m.receipts);
    }
    // Before the final sync of a clean shutdown, which is not part of the
    // measurement.
    let after = shard.stats();
    if log.clean_shutdown {
        // Durable, and the clean-shutdown file written, so the next open
        // checks only the newest segment.
        shard.close()?;
    }
    if log.report_acks {
        receipts.sort_by_key(|r| r.first_offset);
        for receipt in receipts {
            acks.push(receipt);
        }
        acks.flush(shard.offsets().durable, out)?;
    }
    let appends_per_sync = appends_per_sync(log.fsync, &before, &after);
    latencies.sort_unstable();
    let secs = seconds(elapsed).max(1e-9);
    let payload_total = log.records as f64 * log.payload_bytes as f64;
    out.json(&json!({
        "event": "bench",
        "label": args.label,
        "records": log.records,
        "payload_bytes": log.payload_bytes,
        "batch": log.batch,
        "concurrency": args.concurrency,
        "appenders": args.appenders.as_str(),
        "appender_threads": threads,
        "fsync": log.fsync.as_str(),
        "elapsed_seconds": round(secs, 6),
        "records_per_second": round(log.records as f64 / secs, 1),
        "mb_per_second": round(payload_total / secs / 1e6, 3),
        "appends_per_sync": round(appends_per_sync, 3),
        "latency_us": {
            "p50": percentile_us(&latencies, 0.50),
            "p90": percentile_us(&latencies, 0.90),
            "p99": percentile_us(&latencies, 0.99),
            "p999": percentile_us(&latencies, 0.999),
            "max": percentile_us(&latencies, 1.0),
        },
    }))?;
    if log.clean_shutdown {
        let next_offset = shard.offsets().written;
        drop(shard);
        out.json(&json!({"event": "closed", "next_offset": next_offset}))?;
    }
    Ok(Outcome::Success)
}

/// Thread `t`'s share of `total` among `threads`, the remainder going to
/// the first threads.
fn share(total: u64, threads: usize, t: usize) -> u64 {
    let threads = threads as u64;
    let t = t as u64;
    total / threads + u64::from(t < total % threads)
}

/// One appender thread's work: batches of `batch` records from `pool`.
struct Appender<'a> {
    shard: &'a Arc<Shard>,
    pool: &'a [Bytes],
    batch: u64,
    /// `Some(n)`: `n` appends kept in flight through their futures;
    /// `None`: each append blocks until acknowledged.
    in_flight: Option<usize>,
}

impl Appender<'_> {
    /// Appends `records` records, timing each append from the call to its
    /// acknowledgement into `measured` when given.
    fn append_n(
        &self,
        records: u64,
        mut measured: Option<&mut Measured>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), CliError> {
        let mut done = |issued: Instant, receipt: AppendReceipt| {
            let nanos = u64::try_from(issued.elapsed().as_nanos()).unwrap_or(u64::MAX);
            if let Some(m) = measured.as_deref_mut() {
                m.latencies_nanos.push(nanos);
                m.receipts.push(receipt);
            }
            progress(receipt.last_offset - receipt.first_offset + 1);
        };
        let mut remaining = records;
        let mut next = 0usize;
        // No more than this thread appends: `--batch` may be far larger.
        let mut batch = Vec::with_capacity(usize::try_from(self.batch.min(records)).unwrap_or(0));
        let Some(in_flight) = self.in_flight else {
            while remaining > 0 {
                remaining -= self.fill(&mut batch, remaining, &mut next);
                let issued = Instant::now();
                let receipt = self.shard.append(&batch).wait()?;
                done(issued, receipt);
            }
            return Ok(());
        };
        // Completions of one shard resolve in offset order, so the oldest
        // outstanding append is always the next to resolve.
        let mut pending: VecDeque<(Instant, AppendFuture)> = VecDeque::with_capacity(in_flight);
        loop {
            while remaining > 0 && pending.len() < in_flight {
                remaining -= self.fill(&mut batch, remaining, &mut next);
                let issued = Instant::now();
                pending.push_back((issued, self.shard.append(&batch).submit()?));
            }
            let Some((issued, append)) = pending.pop_front() else {
                return Ok(());
            };
            done(issued, append.wait()?);
        }
    }

    /// Refills `batch` with the next batch (at most `remaining` records),
    /// stamped now; returns how many records it holds.
    fn fill(&self, batch: &mut Vec<Record>, remaining: u64, next: &mut usize) -> u64 {
        let count = remaining.min(self.batch);
        let timestamp = now_micros();
        batch.clear();
        batch.extend((0..count).map(|_| {
            *next = (*next + 1) % self.pool.len().max(1);
            Record {
                timestamp_micros: timestamp,
                payload: self.pool.get(*next).cloned().unwrap_or_default(),
            }
        }));
        count
    }
}

/// The nearest-rank `q` quantile of sorted nanosecond latencies, in
/// microseconds with one decimal; 0 when nothing was measured.
fn percentile_us(sorted_nanos: &[u64], q: f64) -> f64 {
    if sorted_nanos.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted_nanos.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted_nanos.len()) - 1;
    round(
        sorted_nanos.get(index).copied().unwrap_or_default() as f64 / 1e3,
        1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_splits_the_remainder_over_the_first_threads() {
        assert_eq!(
            (0..3).map(|t| share(10, 3, t)).collect::<Vec<_>>(),
            [4, 3, 3]
        );
        assert_eq!((0..4).map(|t| share(2, 4, t)).sum::<u64>(), 2);
    }

    #[test]
    fn percentile_us_is_nearest_rank() {
        let nanos: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        assert_eq!(percentile_us(&nanos, 0.5), 500.0);
        assert_eq!(percentile_us(&nanos, 0.999), 999.0);
        assert_eq!(percentile_us(&nanos, 1.0), 1000.0);
        assert_eq!(percentile_us(&[], 0.5), 0.0);
    }
}
