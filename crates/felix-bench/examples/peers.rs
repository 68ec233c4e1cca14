//! The peer crates on felix-bench's scenarios: `commitlog` 0.2.0,
//! `raft-engine` 0.4.2 and `wal-db` 1.1.0, each used the way its
//! documentation shows, printing the same JSON line as `felix-bench`.
//!
//! ```text
//! cargo run --release -p felix-bench --example peers -- <scenario> <peer> --dir DIR [--key value]...
//! ```
//!
//! The peers are dev-dependencies of felix-bench, which only examples, tests
//! and benches can use; `cargo test` and `cargo clippy --all-targets` build
//! this file, so CI keeps the adapters compiling without running them.
//!
//! Scenarios: `append` (`--durability none|on_commit --batch --threads
//! --records --payload-bytes`), `prepare` (`--records`), `scan` (reopen the
//! prepared log: each peer's own recovery), `seq-read`, `random-read
//! --reads N`. What each peer does differently is printed in the line's
//! `notes` and summarised in `docs/performance.md`:
//!
//! * commitlog: `flush()` does not fsync the segment file, so on-commit
//!   durability is the harness's own `fdatasync` of the active segment after
//!   `flush()` (which msyncs the index); not thread-safe (`&mut self`), so
//!   threads share it behind a mutex; opening reads no record (no recovery
//!   scan, no checksum check).
//! * raft-engine: compression off; `Engine::sync()` does nothing in 0.4.2,
//!   so on-commit is `write(batch, true)`; entries are protobuf
//!   `BytesValue`s carrying the raft index in their first 8 bytes; each
//!   thread appends to its own raft group (region), as TiKV does.
//! * wal-db: no batch append (a batch is a loop of `append`, the last one
//!   `append_and_sync` on commit); no offset index (a record is found by its
//!   byte LSN, which the harness computes: records are all the same size).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use bytes::Bytes;
use felix_bench::data::payload_pool;
use felix_bench::felix::{AppendParams, random_offsets};
use felix_bench::{Args, Latencies, Measurement};
use protobuf::well_known_types::BytesValue;
use serde_json::{Value, json};

type Result<T> = std::result::Result<T, String>;

fn err(what: impl std::fmt::Debug) -> String {
    format!("{what:?}")
}

/// One peer's log, behind the operations the scenarios need.
trait Peer: Send + Sync {
    /// Appends a batch; returns once durable when `sync`.
    fn append(&self, thread: usize, batch: &[Bytes], sync: bool) -> Result<()>;
    /// Reads from record `from` about `max_bytes`; returns (records, bytes).
    fn read(&self, from: u64, max_bytes: usize) -> Result<(u64, u64)>;
    /// Reads one record by its number.
    fn read_one(&self, index: u64) -> Result<u64>;
    /// Records held (by thread 0 / region 1).
    fn records(&self) -> u64;
    /// What the peer does not do, for the line's notes.
    fn notes(&self) -> Value;
}

// ---------------------------------------------------------------- commitlog

struct CommitLog {
    dir: PathBuf,
    log: Mutex<commitlog::CommitLog>,
    /// The active segment, opened separately for `fdatasync`.
    segment: Mutex<Option<(PathBuf, std::fs::File)>>,
}

impl CommitLog {
    fn open(dir: &Path) -> Result<Self> {
        let mut options = commitlog::LogOptions::new(dir);
        options.segment_max_bytes(1 << 31);
        options.index_max_items(20_000_000);
        options.message_max_bytes(64 << 20);
        let log = commitlog::CommitLog::new(options).map_err(err)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            log: Mutex::new(log),
            segment: Mutex::new(None),
        })
    }

    /// `fdatasync` of the newest segment file: commitlog's `flush()` only
    /// flushes a userspace buffer (there is none) and msyncs the index.
    fn sync_segment(&self) -> Result<()> {
        let newest = newest_with_extension(&self.dir, "log")?;
        let mut cached = self.segment.lock().map_err(err)?;
        if cached.as_ref().is_none_or(|(path, _)| *path != newest) {
            let file = std::fs::File::open(&newest).map_err(err)?;
            *cached = Some((newest, file));
        }
        if let Some((_, file)) = cached.as_ref() {
            file.sync_data().map_err(err)?;
        }
        Ok(())
    }
}

fn newest_with_extension(dir: &Path, ext: &str) -> Result<PathBuf> {
    std::fs::read_dir(dir)
        .map_err(err)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .max()
        .ok_or_else(|| format!("no *.{ext} in {}", dir.display()))
}

impl Peer for CommitLog {
    fn append(&self, _thread: usize, batch: &[Bytes], sync: bool) -> Result<()> {
        let mut buf: commitlog::message::MessageBuf = batch.iter().collect();
        {
            let mut log = self.log.lock().map_err(err)?;
            log.append(&mut buf).map_err(err)?;
            if sync {
                log.flush().map_err(err)?;
            }
        }
        if sync {
            self.sync_segment()?;
        }
        Ok(())
    }

    fn read(&self, from: u64, max_bytes: usize) -> Result<(u64, u64)> {
        use commitlog::message::MessageSet;
        let log = self.log.lock().map_err(err)?;
        let messages = log
            .read(from, commitlog::ReadLimit::max_bytes(max_bytes))
            .map_err(err)?;
        let bytes = messages.iter().map(|m| m.payload().len() as u64).sum();
        Ok((messages.len() as u64, bytes))
    }

    fn read_one(&self, index: u64) -> Result<u64> {
        use commitlog::message::MessageSet;
        let log = self.log.lock().map_err(err)?;
        let messages = log
            .read(index, commitlog::ReadLimit::max_bytes(256))
            .map_err(err)?;
        let first = messages.iter().next().ok_or("nothing read")?;
        if first.offset() != index {
            return Err(format!("asked {index}, got {}", first.offset()));
        }
        Ok(first.payload().len() as u64)
    }

    fn records(&self) -> u64 {
        self.log.lock().map_or(0, |l| l.next_offset())
    }

    fn notes(&self) -> Value {
        json!({"durability": "harness fdatasync of the active segment after flush()", "open": "no recovery scan or checksum check", "threads": "one mutex around the log"})
    }
}

// -------------------------------------------------------------- raft-engine

/// Entries are `BytesValue`s whose first 8 bytes are the raft index.
struct BenchEntries;

impl raft_engine::MessageExt for BenchEntries {
    type Entry = BytesValue;

    fn index(entry: &BytesValue) -> u64 {
        let mut raw = [0u8; 8];
        if let Some(prefix) = entry.value.get(..8) {
            raw.copy_from_slice(prefix);
        }
        u64::from_be_bytes(raw)
    }
}

struct RaftEngine {
    engine: raft_engine::Engine,
    /// Next raft index per thread (region `thread + 1`).
    next: Vec<std::sync::atomic::AtomicU64>,
}

impl RaftEngine {
    fn open(dir: &Path, threads: usize) -> Result<Self> {
        let config = raft_engine::Config {
            dir: dir.to_string_lossy().into_owned(),
            // 0 turns compression off: payloads are incompressible anyway.
            batch_compression_threshold: raft_engine::ReadableSize(0),
            ..raft_engine::Config::default()
        };
        let engine = raft_engine::Engine::open(config).map_err(err)?;
        let next = (0..threads.max(1))
            .map(|t| {
                let last = engine.last_index(t as u64 + 1).unwrap_or(0);
                std::sync::atomic::AtomicU64::new(last + 1)
            })
            .collect();
        Ok(Self { engine, next })
    }
}

impl Peer for RaftEngine {
    fn append(&self, thread: usize, batch: &[Bytes], sync: bool) -> Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        let next = self.next.get(thread).ok_or("thread out of range")?;
        let first = next.fetch_add(batch.len() as u64, Relaxed);
        let entries: Vec<BytesValue> = batch
            .iter()
            .enumerate()
            .map(|(i, payload)| {
                let mut value = Vec::with_capacity(8 + payload.len());
                value.extend_from_slice(&(first + i as u64).to_be_bytes());
                value.extend_from_slice(payload);
                let mut entry = BytesValue::new();
                entry.value = value;
                entry
            })
            .collect();
        let mut log_batch = raft_engine::LogBatch::with_capacity(batch.len());
        log_batch
            .add_entries::<BenchEntries>(thread as u64 + 1, &entries)
            .map_err(err)?;
        self.engine.write(&mut log_batch, sync).map_err(err)?;
        Ok(())
    }

    fn read(&self, from: u64, max_bytes: usize) -> Result<(u64, u64)> {
        let mut entries = Vec::new();
        let end = self.engine.last_index(1).unwrap_or(0) + 1;
        let first = from + 1;
        let n = self
            .engine
            .fetch_entries_to::<BenchEntries>(1, first, end, Some(max_bytes), &mut entries)
            .map_err(err)?;
        let bytes = entries.iter().map(|e| e.value.len() as u64 - 8).sum();
        Ok((n as u64, bytes))
    }

    fn read_one(&self, index: u64) -> Result<u64> {
        let entry = self
            .engine
            .get_entry::<BenchEntries>(1, index + 1)
            .map_err(err)?
            .ok_or("no entry")?;
        Ok(entry.value.len() as u64 - 8)
    }

    fn records(&self) -> u64 {
        self.engine.last_index(1).unwrap_or(0)
    }

    fn notes(&self) -> Value {
        json!({"durability": "write(batch, true)", "entries": "protobuf BytesValue, index in the first 8 bytes", "compression": "off", "threads": "one raft group per thread"})
    }
}

// ------------------------------------------------------------------- wal-db

struct WalDb {
    wal: wal_db::Wal,
}

impl WalDb {
    fn open(dir: &Path) -> Result<Self> {
        let wal = wal_db::Wal::open(dir.join("bench.wal")).map_err(err)?;
        Ok(Self { wal })
    }
}

/// wal-db frames a record as 4 bytes of CRC32C, 4 of length, then the
/// payload.
const WAL_DB_HEADER: u64 = 8;

impl Peer for WalDb {
    fn append(&self, _thread: usize, batch: &[Bytes], sync: bool) -> Result<()> {
        let (last, rest) = batch.split_last().ok_or("empty batch")?;
        for payload in rest {
            let _lsn = self.wal.append(payload).map_err(err)?;
        }
        if sync {
            let _lsn = self.wal.append_and_sync(last).map_err(err)?;
        } else {
            let _lsn = self.wal.append(last).map_err(err)?;
        }
        Ok(())
    }

    fn read(&self, from: u64, max_bytes: usize) -> Result<(u64, u64)> {
        // The iterator has no budget: read until `max_bytes` from `from`.
        let lsn = wal_db::Lsn::new(from * (WAL_DB_HEADER + 128));
        let mut records = 0u64;
        let mut bytes = 0u64;
        for entry in self.wal.iter_from(lsn).map_err(err)? {
            let entry = entry.map_err(err)?;
            records += 1;
            bytes += entry.len() as u64;
            if bytes + records * WAL_DB_HEADER >= max_bytes as u64 {
                break;
            }
        }
        Ok((records, bytes))
    }

    fn read_one(&self, index: u64) -> Result<u64> {
        let lsn = wal_db::Lsn::new(index * (WAL_DB_HEADER + 128));
        let entry = self
            .wal
            .iter_from(lsn)
            .map_err(err)?
            .next()
            .ok_or("nothing read")?
            .map_err(err)?;
        Ok(entry.len() as u64)
    }

    fn records(&self) -> u64 {
        self.wal.len() / (WAL_DB_HEADER + 128)
    }

    fn notes(&self) -> Value {
        json!({"batch": "no batch append: one append per record", "index": "none: reads by byte LSN computed by the harness", "durability": "append_and_sync (group commit)"})
    }
}

// ---------------------------------------------------------------- scenarios

fn open_peer(name: &str, dir: &Path, threads: usize) -> Result<Box<dyn Peer>> {
    std::fs::create_dir_all(dir).map_err(err)?;
    Ok(match name {
        "commitlog" => Box::new(CommitLog::open(dir)?),
        "raft-engine" => Box::new(RaftEngine::open(dir, threads)?),
        "wal-db" => Box::new(WalDb::open(dir)?),
        other => {
            return Err(format!(
                "unknown peer {other:?} (commitlog, raft-engine, wal-db)"
            ));
        }
    })
}

fn peer_dir(args: &Args) -> Result<PathBuf> {
    Ok(args.dir()?.join(&args.implementation))
}

fn append(args: &Args) -> Result<Measurement> {
    let p = AppendParams::from_args(args)?;
    let durability = args.text("durability", "none");
    let sync = match durability.as_str() {
        "none" => false,
        "on_commit" => true,
        other => return Err(format!("unknown durability {other:?}")),
    };
    let dir = peer_dir(args)?;
    felix_bench::fresh_dir(&dir).map_err(err)?;
    let peer = open_peer(&args.implementation, &dir, p.threads)?;
    let peer: Arc<dyn Peer> = Arc::from(peer);
    // Every thread's batches are built before measuring, as felix's and
    // the limits' are: the loop times the peer's append (and whatever its
    // API makes of the payloads), not the harness's batch building.
    let per_thread: Vec<Vec<Vec<Bytes>>> = (0..p.threads)
        .map(|t| payload_batches(&payload_pool(t, p.payload_bytes), p.batch))
        .collect();
    let go = Barrier::new(p.threads + 1);
    let (elapsed, results) = std::thread::scope(|scope| {
        let handles: Vec<_> = per_thread
            .iter()
            .enumerate()
            .map(|(t, batches)| {
                let (peer, go) = (&peer, &go);
                let records = p.share(t);
                let warm = p.warm_share(t);
                scope.spawn(move || -> Result<Latencies> {
                    // The same untimed warmup as felix's and the limits'.
                    let warm = append_n(&**peer, t, batches, warm, sync, None);
                    go.wait();
                    warm?;
                    let mut latencies = Latencies::with_capacity(if p.timed {
                        records as usize / p.batch + 1
                    } else {
                        0
                    });
                    append_n(
                        &**peer,
                        t,
                        batches,
                        records,
                        sync,
                        p.timed.then_some(&mut latencies),
                    )?;
                    Ok(latencies)
                })
            })
            .collect();
        go.wait();
        let started = Instant::now();
        let results = felix_bench::join_appenders(handles);
        (started.elapsed(), results)
    });
    let latencies = Latencies::merged(results)?;
    let mut m = p.measurement(
        ("append", &args.implementation),
        &durability,
        p.threads,
        json!({}),
        (elapsed, p.timed.then_some(latencies)),
    );
    if let Value::Object(notes) = peer.notes() {
        m.notes = notes;
    }
    drop(peer);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(m)
}

/// One batch of `batch` payloads per payload of `pool`, the `i`th starting
/// at the pool's `i`th: felix's batches, without the timestamps.
fn payload_batches(pool: &[Bytes], batch: usize) -> Vec<Vec<Bytes>> {
    (0..pool.len())
        .map(|i| {
            (0..batch)
                .map(|j| pool[(i + j) % pool.len()].clone())
                .collect()
        })
        .collect()
}

/// Appends `records` records from `batches` in turn (the last one cut
/// short) as thread `thread`, each call timed into `latencies` when given.
fn append_n(
    peer: &dyn Peer,
    thread: usize,
    batches: &[Vec<Bytes>],
    records: u64,
    sync: bool,
    mut latencies: Option<&mut Latencies>,
) -> Result<()> {
    let batch = batches.first().map_or(1, Vec::len).max(1);
    let mut remaining = records;
    let mut next = 0usize;
    while remaining > 0 {
        let count = remaining.min(batch as u64) as usize;
        next = (next + 1) % batches.len();
        let records = &batches[next][..count];
        match latencies.as_deref_mut() {
            Some(l) => {
                let started = Instant::now();
                peer.append(thread, records, sync)?;
                l.push(started.elapsed());
            }
            None => peer.append(thread, records, sync)?,
        }
        remaining -= count as u64;
    }
    Ok(())
}

fn prepare(args: &Args) -> Result<Measurement> {
    let records: u64 = args.get("records", 1_000_000u64)?;
    let dir = peer_dir(args)?;
    felix_bench::fresh_dir(&dir).map_err(err)?;
    let started = Instant::now();
    {
        let peer = open_peer(&args.implementation, &dir, 1)?;
        let pool = payload_pool(0, 128);
        let mut written = 0u64;
        while written < records {
            let n = (records - written).min(256) as usize;
            let batch: Vec<Bytes> = (0..n)
                .map(|i| pool[(written as usize + i) % pool.len()].clone())
                .collect();
            peer.append(0, &batch, false)?;
            written += n as u64;
        }
    }
    let mut m = Measurement::new("prepare", &args.implementation, json!({"records": records}));
    m.records = records;
    m.bytes = felix_bench::dir_bytes(&dir).map_err(err)?;
    m.elapsed = started.elapsed();
    Ok(m)
}

/// Reopening the prepared log: the peer's own recovery on open.
fn scan(args: &Args) -> Result<Measurement> {
    let dir = peer_dir(args)?;
    let bytes = felix_bench::dir_bytes(&dir).map_err(err)?;
    felix_bench::warm_page_cache(&dir).map_err(err)?;
    let started = Instant::now();
    let peer = open_peer(&args.implementation, &dir, 1)?;
    let elapsed = started.elapsed();
    let mut m = Measurement::new(
        "scan",
        &args.implementation,
        json!({"what": "open (recovery)"}),
    );
    m.records = peer.records();
    m.bytes = bytes;
    m.elapsed = elapsed;
    if let Value::Object(notes) = peer.notes() {
        m.notes = notes;
    }
    Ok(m)
}

fn seq_read(args: &Args) -> Result<Measurement> {
    let dir = peer_dir(args)?;
    let peer = open_peer(&args.implementation, &dir, 1)?;
    felix_bench::warm_page_cache(&dir).map_err(err)?;
    let end = peer.records();
    let started = Instant::now();
    let (mut offset, mut records, mut bytes) = (0u64, 0u64, 0u64);
    while offset < end {
        let (n, b) = peer.read(offset, 1 << 20)?;
        if n == 0 {
            break;
        }
        offset += n;
        records += n;
        bytes += b;
    }
    let elapsed = started.elapsed();
    let mut m = Measurement::new(
        "seq-read",
        &args.implementation,
        json!({"max_bytes": 1 << 20}),
    );
    m.records = records;
    // As felix counts it: 28 bytes of header per record plus the payload.
    m.bytes = bytes + 28 * records;
    m.elapsed = elapsed;
    m.notes.insert("payload_bytes".into(), json!(bytes));
    Ok(m)
}

fn random_read(args: &Args) -> Result<Measurement> {
    let dir = peer_dir(args)?;
    let reads: usize = args.get("reads", 100_000usize)?;
    let peer = open_peer(&args.implementation, &dir, 1)?;
    felix_bench::warm_page_cache(&dir).map_err(err)?;
    let offsets = random_offsets(reads, 0, peer.records(), 7);
    let mut latencies = Latencies::with_capacity(reads);
    let mut bytes = 0u64;
    let started = Instant::now();
    for &offset in &offsets {
        let t = Instant::now();
        bytes += peer.read_one(offset)?;
        latencies.push(t.elapsed());
    }
    let elapsed = started.elapsed();
    let mut m = Measurement::new(
        "random-read",
        &args.implementation,
        json!({"shard_records": peer.records()}),
    );
    m.records = reads as u64;
    m.bytes = bytes + 28 * reads as u64;
    m.elapsed = elapsed;
    m.latencies = Some(latencies);
    if let Value::Object(notes) = peer.notes() {
        m.notes = notes;
    }
    Ok(m)
}

fn main() -> std::process::ExitCode {
    let args = match Args::from_env() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("peers: {message}");
            return std::process::ExitCode::from(2);
        }
    };
    let outcome = match args.scenario.as_str() {
        "append" => append(&args),
        "prepare" => prepare(&args),
        "scan" => scan(&args),
        "seq-read" => seq_read(&args),
        "random-read" => random_read(&args),
        other => Err(format!("unknown scenario {other:?}")),
    };
    match outcome {
        Ok(m) => {
            m.print();
            std::process::ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("peers {} {}: {message}", args.scenario, args.implementation);
            std::process::ExitCode::FAILURE
        }
    }
}
