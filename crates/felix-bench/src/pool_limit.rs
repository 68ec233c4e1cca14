//! `shards-commit limit-pool`: what on-commit appends spread over many
//! shards cost when no thread is held per append, with nothing of felix
//! storage in the way but its files. A fresh store of `--shards` shards is
//! created and closed as `shards-commit felix` creates its own; then one
//! thread keeps `--in-flight` appends in flight on the shards' segment
//! files themselves (opened by path, space reserved ahead as the store
//! reserves it), each a `write` on that thread and an `fdatasync` handed
//! to a pool of `--sync-threads` threads through one locked queue, with a
//! message back when it returns. That is the hand-over a sync pool cannot
//! avoid without asynchronous file I/O, on the same files, inodes and
//! directories, and nothing else: no shard, no record codec, no commit
//! protocol. `shards-commit felix` against it says what felix storage
//! adds to the hand-over; `shards-commit limit` (a thread per append, a
//! file per thread) against it what the hand-over and the layout cost.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Instant;

use felix_format::{FileKind, file_name, record_encoded_len};
use felix_storage::{Store, StoreConfig};
use rustix::fs::{FallocateFlags, fallocate};
use serde_json::json;

use crate::args::Args;
use crate::felix::Result;
use crate::report::{CpuTime, Latencies, Measurement};
use crate::shards::{config, err, key};

/// The pool's queue: `(file, slot)` jobs, and whether the run is over.
#[derive(Default)]
struct Jobs {
    queue: VecDeque<(usize, usize)>,
    stop: bool,
}

/// `shards-commit limit-pool`: `--records` (64,000) appends of one
/// 156-byte record, the `k`-th to shard `k mod --shards` (1,000), with
/// `--in-flight` (64) in flight and a pool of `--sync-threads` (the
/// store's default) making them durable. The store is removed afterwards
/// unless `--keep true`.
pub fn commit(args: &Args) -> Result<Measurement> {
    let shards: usize = args.get("shards", 1_000usize)?.max(1);
    let records: u64 = args.get("records", 64_000u64)?;
    let in_flight: usize = args.get("in-flight", 64usize)?.max(1);
    let workers: usize = args
        .get("sync-threads", StoreConfig::default().sync_threads)?
        .max(1);
    let dir = args.dir()?.join("commit-pool-store");
    let (files, mut lens) = segment_files(&dir, shards, args)?;
    let record = vec![9u8; record_encoded_len(128) as usize];
    let queue = (Mutex::new(Jobs::default()), Condvar::new());
    let (jobs, ready) = (&queue.0, &queue.1);
    let (done_tx, done) = mpsc::channel::<Result<usize>>();
    let started = Instant::now();
    let cpu = CpuTime::now();
    let latencies = std::thread::scope(|scope| -> Result<Latencies> {
        for _ in 0..workers {
            let (files, done_tx) = (&files, done_tx.clone());
            scope.spawn(move || {
                loop {
                    let mut state = jobs.lock().unwrap_or_else(PoisonError::into_inner);
                    let (file, slot) = loop {
                        if let Some(job) = state.queue.pop_front() {
                            break job;
                        }
                        if state.stop {
                            return;
                        }
                        state = ready.wait(state).unwrap_or_else(PoisonError::into_inner);
                    };
                    drop(state);
                    let segment = &files[file];
                    let synced = segment
                        .file
                        .sync_data()
                        .map(|()| slot)
                        .map_err(|e| format!("fdatasync {}: {e}", segment.path.display()));
                    if done_tx.send(synced).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done_tx);
        let driven = drive(
            &files, &mut lens, &record, records, in_flight, &queue, &done,
        );
        jobs.lock().unwrap_or_else(PoisonError::into_inner).stop = true;
        ready.notify_all();
        driven
    })?;
    let elapsed = started.elapsed();
    let cpu_end = CpuTime::now();
    drop(files);
    if !args.get("keep", false)? {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let mut m = Measurement::new(
        "shards-commit",
        "limit-pool",
        json!({"shards": shards, "in_flight": in_flight, "sync_threads": workers}),
    );
    m.records = records;
    m.bytes = records * record.len() as u64;
    m.elapsed = elapsed;
    cpu.per_record_notes(cpu_end, records, &mut m);
    m.latencies = Some(latencies);
    m.notes.insert("sync_threads".into(), json!(workers));
    Ok(m)
}

/// A fresh store of `shards` shards under `root`, created and closed, and
/// each one's segment file opened for writing, with the space the store
/// reserves ahead of a new segment's writes reserved again (a clean close
/// gives it back).
fn segment_files(root: &Path, shards: usize, args: &Args) -> Result<(Vec<Segment>, Vec<u64>)> {
    crate::fresh_dir(root).map_err(err)?;
    let store = Store::options(root)
        .config(config(args)?)
        .open()
        .map_err(err)?;
    for i in 0..shards {
        store.create_shard(&key(i as u64)).map_err(err)?;
    }
    store.close().map_err(err)?;
    let name = file_name(0, FileKind::Segment);
    (0..shards)
        .map(|i| {
            let path = root.join(key(i as u64).dir_name()).join(name.as_str());
            let at = |what: &str, e: std::io::Error| format!("{what} {}: {e}", path.display());
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| at("open", e))?;
            let len = file.metadata().map_err(|e| at("fstat", e))?.len();
            fallocate(&file, FallocateFlags::KEEP_SIZE, len, RESERVED_AHEAD)
                .map_err(|e| at("fallocate", e.into()))?;
            Ok((Segment { file, path }, len))
        })
        .collect::<Result<Vec<_>>>()
        .map(|segments| segments.into_iter().unzip())
}

/// A shard's segment file, and its path for errors.
struct Segment {
    file: File,
    path: PathBuf,
}

/// What `Preallocation::Stepped`, the default, reserves past a new
/// segment's end.
const RESERVED_AHEAD: u64 = 32 << 10;

/// The driving thread: writes each record, queues its sync, and refills a
/// place as soon as any sync comes back.
fn drive(
    files: &[Segment],
    lens: &mut [u64],
    record: &[u8],
    records: u64,
    in_flight: usize,
    (jobs, ready): &(Mutex<Jobs>, Condvar),
    done: &mpsc::Receiver<Result<usize>>,
) -> Result<Latencies> {
    let mut latencies = Latencies::with_capacity(records as usize);
    let mut at = vec![Instant::now(); in_flight];
    let mut issued = 0u64;
    let mut issue = |slot: usize, at: &mut [Instant]| -> Result<()> {
        let file = (issued % files.len() as u64) as usize;
        issued += 1;
        at[slot] = Instant::now();
        let segment = &files[file];
        segment
            .file
            .write_all_at(record, lens[file])
            .map_err(|e| format!("write {} at {}: {e}", segment.path.display(), lens[file]))?;
        lens[file] += record.len() as u64;
        jobs.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .queue
            .push_back((file, slot));
        ready.notify_one();
        Ok(())
    };
    for slot in 0..in_flight.min(records as usize) {
        issue(slot, &mut at)?;
    }
    let mut finished = 0u64;
    while finished < records {
        let slot = done.recv().map_err(err)??;
        latencies.push(at[slot].elapsed());
        finished += 1;
        if finished + in_flight as u64 <= records {
            issue(slot, &mut at)?;
        }
    }
    Ok(latencies)
}
