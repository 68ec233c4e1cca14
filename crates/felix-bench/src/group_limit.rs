//! `append limit-group`: group commit by `--threads` OS threads with
//! nothing of felix storage in the way, the least a blocking `append` from
//! that many threads can cost. Each thread takes the next place in one
//! file, writes its batch there with one `pwrite`, and waits until an
//! `fdatasync` that began after its write returns. The first thread to
//! find no sync running becomes the leader: it syncs everything written
//! so far, wakes each thread that sync covered (an unpark each), and goes
//! on syncing while more are waiting. Waking a group by one futex word and
//! one `FUTEX_WAKE`, or by a condition variable, was no faster
//! (docs/performance.md), so the unpark is kept: a thread woken per append
//! is what a blocking API on OS threads pays at least.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::Thread;
use std::time::Instant;

use serde_json::json;

use crate::args::Args;
use crate::data::{framed_pool, payload_pool};
use crate::felix::{AppendParams, Result};
use crate::report::{CpuTime, Latencies, Measurement};

fn err(what: impl std::fmt::Display) -> String {
    what.to_string()
}

/// A thread waiting for a sync: its flag, set once a sync covered its
/// write, and the thread to unpark.
struct Waiter {
    done: Arc<AtomicBool>,
    thread: Thread,
}

#[derive(Default)]
struct Group {
    /// The next write's place in the file.
    end: u64,
    /// Written, not yet covered by a sync that began after the write.
    waiting: Vec<Waiter>,
    /// A leader is syncing.
    syncing: bool,
}

/// `append limit-group --threads N`: `--records` batches of `--batch`
/// framed records (of `--payload-bytes`), spread over the threads.
pub fn append(args: &Args) -> Result<Measurement> {
    let p = AppendParams::from_args(args)?;
    let dir = args.dir()?;
    crate::fresh_dir(&dir).map_err(err)?;
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.join("limit.log"))
        .map_err(err)?;
    let framed = framed_pool(&payload_pool(0, p.payload_bytes));
    let batch: Vec<u8> = framed.iter().take(p.batch).flatten().copied().collect();
    let group = Mutex::new(Group::default());
    let syncs = AtomicU64::new(0);
    let appends = p.records.div_ceil(p.batch as u64);
    let started = Instant::now();
    let cpu = CpuTime::now();
    let per_thread: Vec<Result<Latencies>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..p.threads)
            .map(|t| {
                let (file, batch, group, syncs) = (&file, &batch, &group, &syncs);
                let mine =
                    appends / p.threads as u64 + u64::from((t as u64) < appends % p.threads as u64);
                scope.spawn(move || -> Result<Latencies> {
                    let mut latencies = Latencies::with_capacity(mine as usize);
                    for _ in 0..mine {
                        let at = Instant::now();
                        let place = {
                            let mut g = group.lock().unwrap_or_else(PoisonError::into_inner);
                            let place = g.end;
                            g.end += batch.len() as u64;
                            place
                        };
                        file.write_all_at(batch, place).map_err(err)?;
                        commit(file, group, syncs)?;
                        latencies.push(at.elapsed());
                    }
                    Ok(latencies)
                })
            })
            .collect();
        crate::join_appenders(workers)
    });
    let elapsed = started.elapsed();
    let cpu_end = CpuTime::now();
    let mut latencies = Latencies::with_capacity(appends as usize);
    for l in per_thread {
        latencies.extend(l?);
    }
    drop(file);
    let _ = std::fs::remove_dir_all(&dir);
    let mut m = Measurement::new(
        "append",
        "limit-group",
        json!({
            "durability": "on_commit",
            "payload_bytes": p.payload_bytes,
            "batch": p.batch,
            "threads": p.threads,
        }),
    );
    m.records = p.records;
    m.bytes = p.bytes();
    m.elapsed = elapsed;
    m.latencies = p.timed.then_some(latencies);
    m.appends_per_sync = Some(appends as f64 / syncs.load(Ordering::Relaxed).max(1) as f64);
    cpu.per_record_notes(cpu_end, p.records, &mut m);
    Ok(m)
}

/// Returns once a sync that began after this thread's write has returned:
/// leads the syncs if none is running, else waits to be woken by the
/// leader whose sync covered it.
fn commit(file: &std::fs::File, group: &Mutex<Group>, syncs: &AtomicU64) -> Result<()> {
    let lock = || group.lock().unwrap_or_else(PoisonError::into_inner);
    let mut g = lock();
    if g.syncing {
        let done = Arc::new(AtomicBool::new(false));
        g.waiting.push(Waiter {
            done: Arc::clone(&done),
            thread: std::thread::current(),
        });
        drop(g);
        while !done.load(Ordering::Acquire) {
            std::thread::park();
        }
        return Ok(());
    }
    g.syncing = true;
    let mut covered = std::mem::take(&mut g.waiting);
    drop(g);
    loop {
        let synced = file.sync_data();
        syncs.fetch_add(1, Ordering::Relaxed);
        // Woken even when the sync failed: the run stops with its error,
        // and no thread is left parked.
        for waiter in covered.drain(..) {
            waiter.done.store(true, Ordering::Release);
            waiter.thread.unpark();
        }
        let mut g = lock();
        if let Err(e) = synced {
            g.syncing = false;
            return Err(err(e));
        }
        if g.waiting.is_empty() {
            g.syncing = false;
            return Ok(());
        }
        covered = std::mem::take(&mut g.waiting);
    }
}
