//! `felix-store write`: append records whose payloads follow the reference
//! implementation's pattern, printing JSON lines a crash test can trust.
//!
//! Lines, in order: `{"event":"opened","dir":…,"start_offset":N,"fsync":…}`
//! once the shard is open (after recovery); with `--report-acks`,
//! `{"event":"ack","first_offset":A,"last_offset":B}` per batch once it is
//! durable (see `log_args` for what that means per fsync policy);
//! `{"event":"finished",…}` with the figures; and, with `--clean-shutdown`,
//! `{"event":"closed",…}` after the final sync. Every line is flushed as it
//! is written, so a test that kills the process with SIGKILL knows that
//! every ack it read was durable before it was printed.

use std::time::Instant;

use felix_storage::Record;
use serde_json::json;

use crate::cmd::log_args::{Acks, LogArgs, appends_per_sync, now_micros};
use crate::error::{CliError, Outcome};
use crate::output::{Out, Progress, progress_beside_stream, round, seconds};
use crate::pattern::reference_payload;

/// Arguments of `write`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    log: LogArgs,
}

/// Runs `write`.
pub(crate) fn run(args: Args, out: &mut Out) -> Result<Outcome, CliError> {
    let log = args.log;
    log.check()?;
    let shard = log.open()?;
    let start_offset = shard.offsets().written;
    out.json(&json!({
        "event": "opened",
        "dir": log.dir.display().to_string(),
        "start_offset": start_offset,
        "fsync": log.fsync.as_str(),
    }))?;
    // stdout carries JSON lines for scripts; the bar is on stderr only, and
    // only when stdout is not the same terminal.
    let bar = Progress::bar(log.records, "writing records", progress_beside_stream());
    let mut acks = Acks::default();
    let before = shard.stats();
    let started = Instant::now();
    let mut remaining = log.records;
    while remaining > 0 {
        let count = remaining.min(log.batch);
        // One writer holds the shard's lock, so the offsets this batch will
        // get are known before it is appended, and the payloads can carry
        // them.
        let first = shard.offsets().written;
        let timestamp = now_micros();
        // `count` records, even where their offsets would pass the end of
        // the offset space: the shard refuses such a batch whole, before a
        // byte is written, and says why.
        let batch: Vec<Record> = (0..count)
            .map(|i| first.wrapping_add(i))
            .map(|offset| Record::new(timestamp, reference_payload(offset, log.payload_bytes)))
            .collect();
        let receipt = shard.append(&batch).wait()?;
        debug_assert_eq!(receipt.first_offset, first);
        if log.report_acks {
            acks.push(receipt);
            acks.flush(shard.offsets().durable, out)?;
        }
        remaining -= count;
        bar.inc(count);
    }
    let elapsed = started.elapsed();
    bar.finish();
    let after = shard.stats();
    if log.clean_shutdown {
        // Durable, and the clean-shutdown file written, so the next open
        // checks only the newest segment.
        shard.close()?;
    }
    if log.report_acks {
        acks.flush(shard.offsets().durable, out)?;
    }
    out.json(&json!({
        "event": "finished",
        "records": log.records,
        "first_offset": start_offset,
        "next_offset": shard.offsets().written,
        "durable_offset": shard.offsets().durable,
        "elapsed_seconds": round(seconds(elapsed), 6),
        "records_per_second": round(log.records as f64 / seconds(elapsed).max(1e-9), 1),
        "appends_per_sync": round(appends_per_sync(log.fsync, &before, &after), 3),
    }))?;
    if log.clean_shutdown {
        let next_offset = shard.offsets().written;
        let durable_offset = shard.offsets().durable;
        // Dropping the last handle releases the shard's lock.
        drop(shard);
        out.json(&json!({
            "event": "closed",
            "next_offset": next_offset,
            "durable_offset": durable_offset,
        }))?;
    }
    Ok(Outcome::Success)
}
