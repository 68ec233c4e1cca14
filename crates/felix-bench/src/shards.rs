//! Many shards in one store: opening 10,000 after a clean close and reading
//! one record from each, one on-commit append to each, and on-commit
//! appends spread over 1,000; with the descriptors, threads and memory they
//! cost, and the limit of each.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use felix_format::{SEGMENT_HEADER_LEN, ShardKey, record_encoded_len};
use felix_storage::{ReadBound, Record, Store, StoreConfig};
use serde_json::json;

use crate::args::Args;
use crate::felix::Result;
use crate::nosync::NoSyncFs;
use crate::report::{CpuTime, Latencies, Measurement, rss_bytes};

pub(crate) fn err(what: impl std::fmt::Display) -> String {
    what.to_string()
}

/// The store root under `--dir`.
pub(crate) fn root(args: &Args) -> Result<PathBuf> {
    Ok(args.dir()?.join("store"))
}

/// The limit's files under `--dir`.
fn limit_dir(args: &Args) -> Result<PathBuf> {
    Ok(args.dir()?.join("limit-files"))
}

/// The key of shard `i`.
pub fn key(i: u64) -> ShardKey {
    ShardKey::new("bench", "default", "many", i as u32)
}

/// The keys of shards `0..shards`, built before a run's timed part, as a
/// broker holds the keys it serves.
pub(crate) fn keys(shards: u64) -> Vec<ShardKey> {
    (0..shards).map(key).collect()
}

/// The store's configuration: `--durability` (on_commit), `--sync-threads`
/// and `--preallocate` (`off`, `stepped` or `whole`; both the store's
/// defaults when not given).
pub(crate) fn config(args: &Args) -> Result<StoreConfig> {
    let default = StoreConfig::default();
    let preallocate = match args.text("preallocate", "").as_str() {
        "" => default.preallocate,
        name => crate::args::preallocation(name)?,
    };
    Ok(StoreConfig {
        durability: crate::args::durability(&args.text("durability", "on_commit"))?,
        sync_threads: args.get("sync-threads", default.sync_threads)?,
        preallocate,
        ..default
    })
}

/// Notes the store settings a run may be given (`config`'s), so that runs
/// with different ones are told apart in the results.
pub(crate) fn note_config(config: &StoreConfig, m: &mut Measurement) {
    m.notes.insert(
        "preallocate".into(),
        json!(format!("{:?}", config.preallocate)),
    );
    m.notes
        .insert("sync_threads".into(), json!(config.sync_threads));
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, so a run that holds
/// many descriptors is limited by the store's budget, not by the shell's
/// default; returns the soft limit now in force.
pub fn raise_nofile() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let raised = rustix::process::Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    if setrlimit(Resource::Nofile, raised).is_ok() {
        return limit.maximum.unwrap_or(u64::MAX);
    }
    limit.current.unwrap_or(u64::MAX)
}

/// Whether `--form` (`futures`, the default, or `threads`) asks for the
/// blocking appends from `--threads` threads.
fn threads_form(args: &Args) -> Result<bool> {
    match args.text("form", "futures").as_str() {
        "futures" => Ok(false),
        "threads" => Ok(true),
        other => Err(format!("--form {other}: futures or threads")),
    }
}

/// Descriptors the process holds now.
pub fn open_descriptors() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// Threads the process runs now, from the `Threads:` line of
/// `/proc/self/status` (one read, where listing `/proc/self/task` costs a
/// lookup per thread).
pub fn thread_count() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// How often (every so many appends) a timed loop counts the descriptors
/// held: listing `/proc/self/fd` with thousands open is slow, and counted
/// every 256 appends it took a large share of the 1,000-shard commit run.
/// The store's budget is reached in the first thousand appends and held
/// from then on, so a sample every 2,048 still sees the peak. The
/// 1,000-shard commit run, whose shards are all open before it is timed,
/// counts at its start and end only: even every 2,048 was a visible share
/// of its driving thread's time per append. The figures are in
/// docs/performance.md ("The run read and many shards").
pub(crate) const FD_SAMPLE_EVERY: u64 = 2_048;

/// `prepare-shards felix`: a store of `--shards` shards (10,000), each
/// holding one 128-byte record, closed cleanly; and beside it the limit's
/// files, one per shard, each a segment header and one record, and the
/// format floor's shard directories (`format_floor`). Built without syncs
/// (the page cache is what the runs read).
pub fn prepare(args: &Args) -> Result<Measurement> {
    let shards: u64 = args.get("shards", 10_000u64)?;
    let root = root(args)?;
    crate::fresh_dir(&root).map_err(err)?;
    let started = Instant::now();
    let store = Store::options(&root)
        .file_system(NoSyncFs::handle())
        .config(config(args)?)
        .open()
        .map_err(err)?;
    let payload = bytes::Bytes::from(crate::data::xorshift_bytes(3, 128));
    for i in 0..shards {
        let shard = store.create_shard(&key(i)).map_err(err)?;
        shard
            .append(&[Record::new(i, payload.clone())])
            .wait()
            .map_err(err)?;
        // One at a time: a store keeps every open shard's files open.
        store.close_shard(&key(i)).map_err(err)?;
    }
    store.close().map_err(err)?;
    let limit = limit_dir(args)?;
    crate::fresh_dir(&limit).map_err(err)?;
    let record = vec![7u8; SEGMENT_HEADER_LEN + record_encoded_len(128) as usize];
    for i in 0..shards {
        std::fs::write(limit.join(format!("{i:05}.log")), &record).map_err(err)?;
    }
    crate::format_floor::prepare(args, shards)?;
    let mut m = Measurement::new("prepare-shards", "felix", json!({"shards": shards}));
    m.records = shards;
    m.elapsed = started.elapsed();
    Ok(m)
}

/// `shards-open felix`: opens the store prepared by `prepare-shards`, then
/// each of its `--shards` shards, reading one record from each; timed from
/// the store's open to the last read. Reports the resident memory and the
/// descriptors held after the last read.
pub fn open(args: &Args) -> Result<Measurement> {
    let shards: u64 = args.get("shards", 10_000u64)?;
    let nofile = raise_nofile();
    let root = root(args)?;
    crate::warm_page_cache(&root).map_err(err)?;
    let fds_before = open_descriptors();
    let rss_before = rss_bytes();
    let keys = keys(shards);
    let started = Instant::now();
    let config = config(args)?;
    let store = Store::options(&root).config(config).open().map_err(err)?;
    let mut bytes = 0u64;
    for key in &keys {
        let shard = store.open_shard(key).map_err(err)?;
        let runs = shard.read_runs(0, 1, ReadBound::Committed).map_err(err)?;
        bytes += runs.iter().map(|r| r.bytes().len() as u64).sum::<u64>();
    }
    let elapsed = started.elapsed();
    let (rss, fds) = (rss_bytes(), open_descriptors());
    // Untimed: close cleanly again, so the next run opens the same state.
    store.close().map_err(err)?;
    let mut m = Measurement::new("shards-open", "felix", json!({"shards": shards}));
    note_config(&config, &mut m);
    m.records = shards;
    m.bytes = bytes;
    m.elapsed = elapsed;
    m.notes.insert("rss_after_open_bytes".into(), json!(rss));
    m.notes.insert(
        "rss_growth_bytes".into(),
        json!(rss.saturating_sub(rss_before)),
    );
    m.notes.insert(
        "open_descriptors".into(),
        json!(fds.saturating_sub(fds_before)),
    );
    m.notes.insert("rlimit_nofile".into(), json!(nofile));
    Ok(m)
}

/// `shards-open limit`: lists the store's root, then each shard directory
/// in it (names collected, nothing opened).
pub fn open_limit(args: &Args) -> Result<Measurement> {
    let root = root(args)?;
    crate::warm_page_cache(&root).map_err(err)?;
    let started = Instant::now();
    let mut entries = 0u64;
    for dir in std::fs::read_dir(&root).map_err(err)? {
        let dir = dir.map_err(err)?;
        entries += 1;
        if dir.file_type().map_err(err)?.is_dir() {
            for entry in std::fs::read_dir(dir.path()).map_err(err)? {
                let _name = entry.map_err(err)?.file_name();
                entries += 1;
            }
        }
    }
    let mut m = Measurement::new("shards-open", "limit", json!({}));
    m.elapsed = started.elapsed();
    m.notes.insert("entries".into(), json!(entries));
    Ok(m)
}

/// `shards-append felix`: opens the prepared store, then appends one
/// record to each of its `--shards` shards, `OnCommit`, from `--threads`
/// threads (64) each taking the next shard in turn: `Store::open_shard`
/// (reopening a shard the store closed to stay within
/// `--max-open-shards`, default the store's), the append, the handle
/// dropped; each timed. Reports the most descriptors and threads seen.
pub fn append(args: &Args) -> Result<Measurement> {
    if !threads_form(args)? {
        return crate::shards_async::append(args);
    }
    let shards: u64 = args.get("shards", 10_000u64)?;
    let threads: u64 = args.get("threads", 64u64)?.max(1);
    let nofile = raise_nofile();
    let root = root(args)?;
    let mut config = config(args)?;
    config.max_open_shards = args.get("max-open-shards", config.max_open_shards)?;
    crate::warm_page_cache(&root).map_err(err)?;
    let fds_before = open_descriptors();
    let store = Store::options(&root).config(config).open().map_err(err)?;
    let payload = bytes::Bytes::from(crate::data::xorshift_bytes(5, 128));
    let next = AtomicU64::new(0);
    let peak_fds = AtomicU64::new(0);
    let peak_threads = AtomicU64::new(0);
    let keys = keys(shards);
    let started = Instant::now();
    let per_thread: Vec<Result<Latencies>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (store, payload, next, keys) = (&store, payload.clone(), &next, &keys);
                let (peak_fds, peak_threads) = (&peak_fds, &peak_threads);
                scope.spawn(move || -> Result<Latencies> {
                    let mut latencies = Latencies::with_capacity((shards / threads + 1) as usize);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= shards {
                            return Ok(latencies);
                        }
                        let at = Instant::now();
                        let shard = store.open_shard(&keys[i as usize]).map_err(err)?;
                        shard
                            .append(&[Record::new(i, payload.clone())])
                            .wait()
                            .map_err(err)?;
                        drop(shard);
                        latencies.push(at.elapsed());
                        if t == 0 && i % 64 == 0 {
                            peak_threads.fetch_max(thread_count(), Ordering::Relaxed);
                        }
                        if i % FD_SAMPLE_EVERY == 0 {
                            peak_fds.fetch_max(open_descriptors(), Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        crate::join_appenders(workers)
    });
    let elapsed = started.elapsed();
    let rss = rss_bytes();
    let latencies = Latencies::merged(per_thread)?;
    store.close().map_err(err)?;
    let mut m = Measurement::new(
        "shards-append",
        "felix",
        json!({"shards": shards, "threads": threads, "max_open_shards": config.max_open_shards}),
    );
    note_config(&config, &mut m);
    m.records = shards;
    m.bytes = shards * record_encoded_len(128);
    m.elapsed = elapsed;
    m.latencies = Some(latencies);
    let fds = peak_fds.load(Ordering::Relaxed).saturating_sub(fds_before);
    m.notes.insert("open_descriptors".into(), json!(fds));
    m.notes.insert("rss_bytes".into(), json!(rss));
    m.notes.insert(
        "threads".into(),
        json!(peak_threads.load(Ordering::Relaxed)),
    );
    m.notes.insert("rlimit_nofile".into(), json!(nofile));
    Ok(m)
}

/// `shards-append limit`: the limit's files of `prepare-shards`, one per
/// shard; `--threads` threads (64) each take the next file in turn and
/// open it, `pwrite` one 156-byte record at its end, `fdatasync` and close
/// it.
pub fn append_limit(args: &Args) -> Result<Measurement> {
    raise_nofile();
    let dir = limit_dir(args)?;
    let record = vec![9u8; record_encoded_len(128) as usize];
    append_each_from_threads(
        args,
        "limit",
        record.len(),
        || (),
        |i, ()| {
            let path = dir.join(format!("{i:05}.log"));
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(err)?;
            let len = file.metadata().map_err(err)?.len();
            file.write_all_at(&record, len).map_err(err)?;
            file.sync_data().map_err(err)
        },
    )
}

/// The `shards-append` run of a limit, `imp`: `--threads` threads (64)
/// each take the next of `--shards` shards (10,000) in turn and call
/// `append(i, state)` for shard `i`, each call timed; `state` is each
/// thread's own (`new_state` makes it), for buffers reused across calls.
/// Each call appends one record of `record_len` bytes.
pub(crate) fn append_each_from_threads<S>(
    args: &Args,
    imp: &str,
    record_len: usize,
    new_state: impl Fn() -> S + Sync,
    append: impl Fn(u64, &mut S) -> Result<()> + Sync,
) -> Result<Measurement> {
    let shards: u64 = args.get("shards", 10_000u64)?;
    let threads: u64 = args.get("threads", 64u64)?.max(1);
    let next = AtomicU64::new(0);
    let started = Instant::now();
    let results: Vec<Result<Latencies>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> Result<Latencies> {
                    let mut latencies = Latencies::with_capacity((shards / threads + 1) as usize);
                    let mut state = new_state();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= shards {
                            return Ok(latencies);
                        }
                        let at = Instant::now();
                        append(i, &mut state)?;
                        latencies.push(at.elapsed());
                    }
                })
            })
            .collect();
        crate::join_appenders(workers)
    });
    let elapsed = started.elapsed();
    let latencies = Latencies::merged(results)?;
    let mut m = Measurement::new(
        "shards-append",
        imp,
        json!({"shards": shards, "threads": threads}),
    );
    m.records = shards;
    m.bytes = shards * record_len as u64;
    m.elapsed = elapsed;
    m.latencies = Some(latencies);
    Ok(m)
}

/// `shards-commit felix`: a fresh store of `--shards` shards (1,000),
/// then `--records` on-commit appends of one record from `--threads`
/// threads (64), thread `t`'s `k`-th append going to shard
/// `(t + 64 k) mod shards`, so the appends in flight are spread over the
/// shards. Reports the threads and resident memory at the end.
pub fn commit(args: &Args) -> Result<Measurement> {
    if !threads_form(args)? {
        return crate::shards_async::commit(args);
    }
    let shards: u64 = args.get("shards", 1_000u64)?;
    let threads: u64 = args.get("threads", 64u64)?.max(1);
    let records: u64 = args.get("records", 64_000u64)?;
    let nofile = raise_nofile();
    let root = root(args)?.with_file_name("commit-store");
    crate::fresh_dir(&root).map_err(err)?;
    let config = config(args)?;
    let store = Store::options(&root).config(config).open().map_err(err)?;
    let handles = (0..shards)
        .map(|i| store.create_shard(&key(i)).map_err(err))
        .collect::<Result<Vec<_>>>()?;
    let payload = bytes::Bytes::from(crate::data::xorshift_bytes(5, 128));
    let per_thread = records / threads;
    let peak_threads = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let cpu = CpuTime::now();
    let results: Vec<Result<Latencies>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (handles, payload, peak) =
                    (&handles, payload.clone(), Arc::clone(&peak_threads));
                scope.spawn(move || -> Result<Latencies> {
                    let mut latencies = Latencies::with_capacity(per_thread as usize);
                    for k in 0..per_thread {
                        let shard = &handles[((t + threads * k) % shards) as usize];
                        let at = Instant::now();
                        shard
                            .append(&[Record::new(k, payload.clone())])
                            .wait()
                            .map_err(err)?;
                        latencies.push(at.elapsed());
                        if t == 0 && k % 256 == 0 {
                            peak.fetch_max(thread_count(), Ordering::Relaxed);
                        }
                    }
                    Ok(latencies)
                })
            })
            .collect();
        crate::join_appenders(workers)
    });
    let elapsed = started.elapsed();
    let cpu_end = CpuTime::now();
    let (rss, fds) = (rss_bytes(), open_descriptors());
    let latencies = Latencies::merged(results)?;
    let syncs: u64 = handles.iter().map(|s| s.stats().syncs).sum();
    drop(handles);
    store.close().map_err(err)?;
    let _ = std::fs::remove_dir_all(&root);
    let mut m = Measurement::new(
        "shards-commit",
        "felix",
        json!({"shards": shards, "threads": threads}),
    );
    note_config(&config, &mut m);
    m.records = per_thread * threads;
    m.bytes = m.records * record_encoded_len(128);
    m.elapsed = elapsed;
    cpu.process_notes(cpu_end, m.records, &mut m);
    m.latencies = Some(latencies);
    m.appends_per_sync = Some(m.records as f64 / syncs.max(1) as f64);
    m.notes.insert("rss_bytes".into(), json!(rss));
    m.notes.insert(
        "threads".into(),
        json!(peak_threads.load(Ordering::Relaxed)),
    );
    m.notes.insert("open_descriptors".into(), json!(fds));
    m.notes.insert("rlimit_nofile".into(), json!(nofile));
    Ok(m)
}

/// `shards-commit limit`: `--threads` threads (64), each appending
/// `--records / threads` records of 156 bytes to a file of its own with
/// one `write` and one `fdatasync` each.
pub fn commit_limit(args: &Args) -> Result<Measurement> {
    let threads: u64 = args.get("threads", 64u64)?.max(1);
    let records: u64 = args.get("records", 64_000u64)?;
    let dir = args.dir()?.join("commit-limit");
    crate::fresh_dir(&dir).map_err(err)?;
    let record = vec![9u8; record_encoded_len(128) as usize];
    let per_thread = records / threads;
    let started = Instant::now();
    let cpu = CpuTime::now();
    let results: Vec<Result<Latencies>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (dir, record) = (&dir, &record);
                scope.spawn(move || -> Result<Latencies> {
                    let file = create(&dir.join(format!("{t:03}.log")))?;
                    let mut latencies = Latencies::with_capacity(per_thread as usize);
                    for k in 0..per_thread {
                        let at = Instant::now();
                        file.write_all_at(record, k * record.len() as u64)
                            .map_err(err)?;
                        file.sync_data().map_err(err)?;
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
    let latencies = Latencies::merged(results)?;
    let _ = std::fs::remove_dir_all(&dir);
    let mut m = Measurement::new("shards-commit", "limit", json!({"threads": threads}));
    m.records = per_thread * threads;
    cpu.process_notes(cpu_end, m.records, &mut m);
    m.bytes = m.records * record.len() as u64;
    m.elapsed = elapsed;
    m.latencies = Some(latencies);
    Ok(m)
}

fn create(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(err)
}
