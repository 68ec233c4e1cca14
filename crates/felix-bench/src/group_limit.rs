//! `append limit-group`: group commit by `--threads` OS threads with
//! nothing of felix storage in the way, the least a blocking `append` from
//! that many threads can cost. Each thread takes the next place in one
//! file, writes its batch there with one `pwrite`, and waits until an
//! `fdatasync` that began after its write returns. The first thread to
//! find no sync running becomes the leader: it syncs everything written
//! so far, wakes each thread that sync covered (an unpark each), and goes
//! on syncing while more are waiting (it never hands the lead over, as
//! felix storage's combining leader does after a few rounds, so its own
//! append waits longer while the others go on). Waking a group by one
//! futex word and one `FUTEX_WAKE`, or by a condition variable, was no
//! faster (docs/performance.md), so the unpark is kept: a thread woken per
//! append is what a blocking API on OS threads pays at least.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, MutexGuard, PoisonError};
use std::thread::Thread;
use std::time::Instant;

use serde_json::json;

use crate::args::Args;
use crate::data::{framed_pool, payload_pool};
use crate::felix::{AppendParams, Result};
use crate::report::{CpuTime, Latencies, Measurement};

/// A thread waiting for a sync: its flag, set once a sync covered its
/// write (or failed), and the thread to unpark.
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
    /// A sync failed: every thread stops with this, none is left parked.
    failed: Option<String>,
}

/// The file every thread appends to, and the group's state.
struct Log<'a> {
    file: &'a File,
    path: &'a Path,
    group: Mutex<Group>,
    syncs: AtomicU64,
}

/// `append limit-group --threads N`: `--records` records in batches of
/// `--batch` framed records (of `--payload-bytes`), the batches spread
/// over the threads. The file is removed afterwards unless `--keep true`.
pub fn append(args: &Args) -> Result<Measurement> {
    let p = AppendParams::from_args(args)?;
    let dir = args.dir()?;
    crate::fresh_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("limit.log");
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| format!("create {}: {e}", path.display()))?;
    let framed = framed_pool(&payload_pool(0, p.payload_bytes));
    // The pool's records in turn, as many as the batch holds.
    let batch: Vec<u8> = (0..p.batch)
        .flat_map(|j| framed[j % framed.len()].iter().copied())
        .collect();
    let log = Log {
        file: &file,
        path: &path,
        group: Mutex::new(Group::default()),
        syncs: AtomicU64::new(0),
    };
    let appends = p.records.div_ceil(p.batch as u64);
    let split = |total: u64, t: usize| {
        total / p.threads as u64 + u64::from((t as u64) < total % p.threads as u64)
    };
    // Each thread appends its share of the warmup untimed, as felix's
    // threads do, then all start together. Two rendezvous: every warmup
    // has finished before the counters are read, and they are read
    // before any measured append starts.
    let warmed = Barrier::new(p.threads + 1);
    let go = Barrier::new(p.threads + 1);
    let (started, cpu, warm_syncs, per_thread) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..p.threads)
            .map(|t| {
                let (log, batch, warmed, go) = (&log, &batch, &warmed, &go);
                let mine = split(appends, t);
                let warm = split(p.warmup, t).div_ceil(p.batch as u64);
                scope.spawn(move || -> Result<Latencies> {
                    let warm = (0..warm).try_for_each(|_| log.append(batch));
                    warmed.wait();
                    go.wait();
                    warm?;
                    let mut latencies = Latencies::with_capacity(mine as usize);
                    for _ in 0..mine {
                        let at = Instant::now();
                        log.append(batch)?;
                        latencies.push(at.elapsed());
                    }
                    Ok(latencies)
                })
            })
            .collect();
        warmed.wait();
        let warm_syncs = log.syncs.load(Ordering::Relaxed);
        go.wait();
        let (started, cpu) = (Instant::now(), CpuTime::now());
        (started, cpu, warm_syncs, crate::join_appenders(workers))
    });
    let elapsed = started.elapsed();
    let cpu_end = CpuTime::now();
    let latencies = Latencies::merged(per_thread)?;
    let syncs = log.syncs.load(Ordering::Relaxed) - warm_syncs;
    drop(file);
    if !args.get("keep", false)? {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let mut m = p.measurement(
        ("append", "limit-group"),
        "on_commit",
        p.threads,
        json!({}),
        (elapsed, p.timed.then_some(latencies)),
    );
    m.appends_per_sync = Some(appends as f64 / syncs.max(1) as f64);
    m.notes.insert("syncs".into(), json!(syncs));
    cpu.process_notes(cpu_end, p.records, &mut m);
    Ok(m)
}

impl Log<'_> {
    fn lock(&self) -> MutexGuard<'_, Group> {
        self.group.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `batch` at the next place and returns once it is durable.
    fn append(&self, batch: &[u8]) -> Result<()> {
        let place = {
            let mut g = self.lock();
            if let Some(failed) = &g.failed {
                return Err(failed.clone());
            }
            let place = g.end;
            g.end += batch.len() as u64;
            place
        };
        self.file
            .write_all_at(batch, place)
            .map_err(|e| format!("write {} at {place}: {e}", self.path.display()))?;
        self.commit()
    }

    /// Returns once a sync that began after this thread's write has
    /// returned: leads the syncs if none is running, else waits to be
    /// woken by the leader whose sync covered it.
    fn commit(&self) -> Result<()> {
        let mut g = self.lock();
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
            return self.lock().failed.clone().map_or(Ok(()), Err);
        }
        g.syncing = true;
        let mut covered = std::mem::take(&mut g.waiting);
        drop(g);
        loop {
            let synced = self.file.sync_data();
            self.syncs.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = synced {
                // Everyone waiting, covered or not, stops with the error.
                let failed = format!("fdatasync {}: {e}", self.path.display());
                let mut g = self.lock();
                g.failed = Some(failed.clone());
                g.syncing = false;
                covered.append(&mut g.waiting);
                drop(g);
                wake(covered);
                return Err(failed);
            }
            // Woken before the next sync is taken, so that those woken
            // first write in time for it.
            wake(std::mem::take(&mut covered));
            let mut g = self.lock();
            if g.waiting.is_empty() {
                g.syncing = false;
                return Ok(());
            }
            covered = std::mem::take(&mut g.waiting);
        }
    }
}

fn wake(waiters: Vec<Waiter>) {
    for waiter in waiters {
        waiter.done.store(true, Ordering::Release);
        waiter.thread.unpark();
    }
}
