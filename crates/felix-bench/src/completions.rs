//! `append-async felix`: one thread keeping `--in-flight` appends in flight
//! through the futures of [`felix_storage::Append::submit`], awaiting the
//! oldest each time (completions of a shard resolve in offset order) with
//! the smallest executor there is: the futures need only a `Waker`.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Instant;

use felix_storage::{AppendFuture, Durability, Record, Shard, StoreConfig};
use serde_json::json;

use crate::args::Args;
use crate::data::payload_pool;
use crate::felix::{AppendParams, Result, SHARD_LABEL, preallocation, record_batches, shard_dir};
use crate::report::{Latencies, Measurement};

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on this thread, parking between polls.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

/// `append-async felix --in-flight N`: on-commit appends from one thread,
/// `N` in flight; each latency runs from the call to its resolution.
pub fn append_submitted(args: &Args) -> Result<Measurement> {
    let p = AppendParams::from_args(args)?;
    let in_flight: usize = args.get("in-flight", 64usize)?.max(1);
    let preallocate_name = args.text("preallocate", "stepped");
    let dir = shard_dir(&args.dir()?);
    crate::fresh_dir(&dir).map_err(|e| e.to_string())?;
    let config = StoreConfig {
        durability: Durability::OnCommit,
        preallocate: preallocation(&preallocate_name)?,
        segment_size_bytes: args.get("segment-bytes", 1u64 << 30)?,
        ..StoreConfig::default()
    };
    let shard = Shard::options(&dir)
        .config(config)
        .label(SHARD_LABEL)
        .open()
        .map_err(|e| e.to_string())?;
    let pool = payload_pool(0, p.payload_bytes);
    let batches = record_batches(&pool, p.batch);
    run(&shard, &batches, p.warmup, in_flight, None)?;
    let before = shard.stats();
    let mut latencies = Latencies::with_capacity(p.records as usize / p.batch + 1);
    let started = Instant::now();
    run(&shard, &batches, p.records, in_flight, Some(&mut latencies))?;
    let elapsed = started.elapsed();
    let after = shard.stats();
    let mut m = p.measurement(
        ("append-async", &args.implementation),
        "on_commit",
        1,
        json!({"in_flight": in_flight, "preallocate": preallocate_name}),
        (elapsed, Some(latencies)),
    );
    let syncs = after.syncs - before.syncs;
    let synced = after.synced_appends - before.synced_appends;
    m.appends_per_sync = Some(if syncs == 0 {
        0.0
    } else {
        synced as f64 / syncs as f64
    });
    m.notes.insert("syncs".into(), json!(syncs));
    drop(shard);
    if !args.get("keep", false)? {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(m)
}

/// Appends `records` records, `in_flight` at a time, awaiting the oldest.
fn run(
    shard: &Shard,
    batches: &[Vec<Record>],
    records: u64,
    in_flight: usize,
    mut latencies: Option<&mut Latencies>,
) -> Result<()> {
    let mut pending: VecDeque<(Instant, AppendFuture)> = VecDeque::with_capacity(in_flight);
    let mut remaining = records;
    let mut next = 0usize;
    while remaining > 0 || !pending.is_empty() {
        while remaining > 0 && pending.len() < in_flight {
            let batch = &batches[next % batches.len()];
            let count = remaining.min(batch.len() as u64) as usize;
            next += 1;
            // From the call: the latency holds the write and any wait
            // for a place in flight, as a blocking append's does.
            let issued = Instant::now();
            let append = shard
                .append(&batch[..count])
                .submit()
                .map_err(|e| e.to_string())?;
            pending.push_back((issued, append));
            remaining -= count as u64;
        }
        if let Some((issued, append)) = pending.pop_front() {
            block_on(append).map_err(|e| e.to_string())?;
            if let Some(l) = latencies.as_deref_mut() {
                l.push(issued.elapsed());
            }
        }
    }
    Ok(())
}
