//! `felix-store produce`: append records to a replicated shard through
//! its leader, printing acks a test can trust.
//!
//! Payloads are stdin's lines (`--stdin`, without their line ends) or
//! `--records` generated ones of `--payload-bytes`: the record's sequence
//! number in this run (8 bytes, big-endian), then bytes counting up from
//! it. `--in-flight N` keeps N batches of `--batch` records in flight.
//! With `--report-acks`, `{"event":"ack","first_offset":A,"last_offset":B}`
//! is printed for each run of consecutive offsets a batch was given, once
//! a majority of the replicas holds it durably, as `write --report-acks`
//! prints them; then `{"event":"finished",…}` with the figures.

use std::io::BufRead;
use std::time::Instant;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::json;

use crate::cmd::cluster_args::{ClusterArgs, KeyArg};
use crate::error::{CliError, Outcome};
use crate::output::{Out, round, seconds};

/// Arguments of `produce`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    key: KeyArg,
    /// Records to generate (without `--stdin`).
    #[arg(long, default_value_t = 1000, conflicts_with = "stdin")]
    records: u64,
    /// Payload size of every generated record.
    #[arg(long, default_value_t = 100, conflicts_with = "stdin")]
    payload_bytes: usize,
    /// Append stdin's lines, one record each, instead.
    #[arg(long)]
    stdin: bool,
    /// Records per append request.
    #[arg(long, default_value_t = 1)]
    batch: u64,
    /// Append requests in flight at once.
    #[arg(long, default_value_t = 1)]
    in_flight: u64,
    /// Print an ack line for every batch once a majority holds it durably.
    #[arg(long)]
    report_acks: bool,
}

/// Generated payload number `seq` of `len` bytes.
fn payload(seq: u64, len: usize) -> Vec<u8> {
    let mut bytes: Vec<u8> = seq
        .to_be_bytes()
        .into_iter()
        .chain((0..).map(|i: u64| (seq.wrapping_add(i)) as u8))
        .take(len.max(8))
        .collect();
    bytes.truncate(len);
    bytes
}

/// Every batch of payloads, in order.
fn batches(args: &Args) -> Result<Vec<Vec<Vec<u8>>>, CliError> {
    let batch = usize::try_from(args.batch).unwrap_or(usize::MAX);
    let payloads: Vec<Vec<u8>> = if args.stdin {
        let mut lines = Vec::new();
        for line in std::io::stdin().lock().lines() {
            lines.push(
                line.map_err(|e| CliError::io("read stdin", "-", e))?
                    .into_bytes(),
            );
        }
        lines
    } else {
        (0..args.records)
            .map(|seq| payload(seq, args.payload_bytes))
            .collect()
    };
    Ok(payloads.chunks(batch).map(<[Vec<u8>]>::to_vec).collect())
}

/// Runs `produce`.
pub(crate) fn run(args: Args, out: &mut Out) -> Result<Outcome, CliError> {
    if args.batch == 0 || args.in_flight == 0 {
        return Err(CliError::Usage(
            "--batch and --in-flight must be at least 1".into(),
        ));
    }
    if args.payload_bytes > felix_format::MAX_PAYLOAD_BYTES as usize {
        return Err(CliError::Usage(format!(
            "--payload-bytes {} is over the format's limit of {} bytes",
            args.payload_bytes,
            felix_format::MAX_PAYLOAD_BYTES
        )));
    }
    // One append request is one frame; half of one leaves room for the
    // records' framing.
    let limit = (felix_cluster::wire::MAX_FRAME / 2) as u64;
    let held = args.batch.saturating_mul(args.payload_bytes as u64);
    if !args.stdin && held > limit {
        return Err(CliError::Usage(format!(
            "--batch {} × --payload-bytes {} is {held} bytes, above the {limit} bytes one append request carries",
            args.batch, args.payload_bytes
        )));
    }
    let key = args.key.key()?;
    let batches = batches(&args)?;
    let records: usize = batches.iter().map(Vec::len).sum();
    let in_flight = usize::try_from(args.in_flight).unwrap_or(usize::MAX);
    let report = args.report_acks;
    args.cluster.run(|client| async move {
        let started = Instant::now();
        let mut pending = FuturesUnordered::new();
        let mut queue = batches.into_iter();
        let mut latencies = Vec::with_capacity(records);
        loop {
            while pending.len() < in_flight {
                let Some(batch) = queue.next() else { break };
                let (client, key) = (&client, &key);
                pending.push(async move {
                    let sent = Instant::now();
                    let offsets = client.append(key, batch).await;
                    (offsets, sent.elapsed())
                });
            }
            let Some((offsets, latency)) = pending.next().await else {
                break;
            };
            let offsets = offsets?;
            latencies.push(latency);
            if report {
                for (first, last) in runs(&offsets) {
                    out.json(&json!({"event": "ack", "first_offset": first, "last_offset": last}))?;
                }
            }
        }
        let elapsed = started.elapsed();
        latencies.sort_unstable();
        let percentile = |p: f64| {
            let at = ((latencies.len() as f64 - 1.0) * p).round() as usize;
            latencies
                .get(at)
                .map_or(0.0, |d| round(seconds(*d) * 1e6, 1))
        };
        out.json(&json!({
            "event": "finished",
            "records": records,
            "elapsed_seconds": round(seconds(elapsed), 6),
            "records_per_second": round(records as f64 / seconds(elapsed).max(1e-9), 1),
            "append_p50_us": percentile(0.5),
            "append_p99_us": percentile(0.99),
        }))?;
        Ok(Outcome::Success)
    })
}

/// The runs of consecutive offsets in `offsets`, as (first, last).
fn runs(offsets: &[u64]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &offset in offsets {
        match runs.last_mut() {
            Some((_, last)) if last.checked_add(1) == Some(offset) => *last = offset,
            _ => runs.push((offset, offset)),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_are_printed_per_run_of_consecutive_offsets() {
        assert_eq!(runs(&[4, 5, 6, 9, 10, 12]), [(4, 6), (9, 10), (12, 12)]);
        assert_eq!(runs(&[]), []);
    }

    #[test]
    fn a_generated_payload_starts_with_its_sequence_number() {
        let p = payload(0x0102, 12);
        assert_eq!(p.len(), 12);
        assert_eq!(p[..8], 0x0102u64.to_be_bytes());
        assert_eq!(payload(7, 3), [0, 0, 0]);
    }
}
