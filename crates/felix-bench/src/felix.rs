//! felix storage in every scenario, and the fixtures the read scenarios use.

use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::Instant;

use bytes::Bytes;
use felix_format::{RECORD_HEADER_LEN, SEGMENT_HEADER_LEN, record_encoded_len};
use felix_recovery::{ScanDepth, ScanStart, scan_segment};
use felix_segment::SegmentFile;
use felix_storage::{Durability, Preallocation, ReadBound, Record, Shard, StoreConfig};
use serde_json::json;

use crate::args::Args;
pub use crate::args::{durability, preallocation};
use crate::data::payload_pool;
use crate::nosync::NoSyncFs;
use crate::report::{CpuTime, Latencies, Measurement, rss_bytes};

/// The label every benchmark shard carries.
pub const SHARD_LABEL: &str = "bench";

/// An error as text: every run either prints its line or one message.
pub type Result<T> = std::result::Result<T, String>;

fn err(what: impl std::fmt::Display) -> String {
    what.to_string()
}

/// The shard directory a scenario uses under `--dir`.
pub fn shard_dir(root: &Path) -> PathBuf {
    root.join("shard")
}

/// Common append parameters.
#[derive(Debug, Clone, Copy)]
pub struct AppendParams {
    /// Payload bytes per record.
    pub payload_bytes: usize,
    /// Records per append call.
    pub batch: usize,
    /// Appending threads.
    pub threads: usize,
    /// Records measured, over all threads.
    pub records: u64,
    /// Whether each call is timed.
    pub timed: bool,
    /// Records appended untimed before the measured ones, over all
    /// threads (`--warmup`, 1,000): every implementation of a cell warms
    /// up alike, so none is measured cold beside a warm one.
    pub warmup: u64,
}

impl AppendParams {
    /// Reads `--payload-bytes`, `--batch`, `--threads`, `--records`.
    pub fn from_args(args: &Args) -> Result<Self> {
        let p = Self {
            payload_bytes: crate::data::payload_bytes(args)?,
            batch: args.get("batch", 1usize)?.max(1),
            threads: args.get("threads", 1usize)?.max(1),
            records: args.get("records", 100_000u64)?,
            timed: args.get("timed", true)?,
            warmup: args.get("warmup", 1_000u64)?,
        };
        Ok(p)
    }

    /// Thread `t`'s share of the records, the remainder to the first ones.
    pub fn share(&self, t: usize) -> u64 {
        let n = self.threads as u64;
        self.records / n + u64::from((t as u64) < self.records % n)
    }

    /// Thread `t`'s share of the warmup records, split as [`Self::share`]
    /// splits the measured ones.
    pub fn warm_share(&self, t: usize) -> u64 {
        let n = self.threads as u64;
        self.warmup / n + u64::from((t as u64) < self.warmup % n)
    }

    /// Encoded bytes of all records.
    pub fn bytes(&self) -> u64 {
        self.records * record_encoded_len(self.payload_bytes as u32)
    }

    /// The measurement of a run of these parameters: `scenario` by
    /// `implementation`, its parameters (`durability`, the payload size,
    /// the batch and `threads`, the threads that appended, then `extra`'s
    /// keys), its records and bytes, `elapsed` and the `latencies` kept.
    pub fn measurement(
        &self,
        (scenario, implementation): (&str, &str),
        durability: &str,
        threads: usize,
        extra: serde_json::Value,
        (elapsed, latencies): (std::time::Duration, Option<Latencies>),
    ) -> Measurement {
        let mut params = json!({
            "durability": durability,
            "payload_bytes": self.payload_bytes,
            "batch": self.batch,
            "threads": threads,
        });
        if let (Some(params), serde_json::Value::Object(extra)) = (params.as_object_mut(), extra) {
            params.extend(extra);
        }
        let mut m = Measurement::new(scenario, implementation, params);
        m.records = self.records;
        m.bytes = self.bytes();
        m.elapsed = elapsed;
        m.latencies = latencies;
        m
    }
}

/// `append felix`: [`Shard::append`] from `--threads` threads.
pub fn append(args: &Args) -> Result<Measurement> {
    let p = AppendParams::from_args(args)?;
    let durability_name = args.text("durability", "none");
    let preallocate_name = args.text("preallocate", "stepped");
    let preallocate = preallocation(&preallocate_name)?;
    let dir = shard_dir(&args.dir()?);
    crate::fresh_dir(&dir).map_err(err)?;
    let config = StoreConfig {
        durability: durability(&durability_name)?,
        preallocate,
        segment_size_bytes: args.get("segment-bytes", 1u64 << 30)?,
        ..StoreConfig::default()
    };
    let shard = Shard::options(&dir)
        .config(config)
        .label(SHARD_LABEL)
        .open()
        .map_err(err)?;
    // Every thread's batches are built before any is appended: the
    // measured loop times the append, not the caller's allocation of its
    // records (the limits and the peers build theirs up front too).
    let per_thread: Vec<Vec<Vec<Record>>> = (0..p.threads)
        .map(|t| record_batches(&payload_pool(t, p.payload_bytes), p.batch))
        .collect();
    let warmed = Barrier::new(p.threads + 1);
    let go = Barrier::new(p.threads + 1);
    let (elapsed, before, results) = std::thread::scope(|scope| {
        let handles: Vec<_> = per_thread
            .iter()
            .enumerate()
            .map(|(t, batches)| {
                let (shard, warmed, go) = (&shard, &warmed, &go);
                let records = p.share(t);
                let warm = p.warm_share(t);
                scope.spawn(move || -> Result<Latencies> {
                    let warm = append_n(shard, batches, warm, None);
                    warmed.wait();
                    go.wait();
                    warm?;
                    let mut latencies = Latencies::with_capacity(if p.timed {
                        records as usize / p.batch + 1
                    } else {
                        0
                    });
                    append_n(shard, batches, records, p.timed.then_some(&mut latencies))?;
                    Ok(latencies)
                })
            })
            .collect();
        warmed.wait();
        let before = shard.stats();
        go.wait();
        let started = Instant::now();
        let cpu = CpuTime::now();
        let results = crate::join_appenders(handles);
        (started.elapsed(), (before, cpu, CpuTime::now()), results)
    });
    let (before, cpu, cpu_end) = before;
    let after = shard.stats();
    let latencies = Latencies::merged(results)?;
    let mut m = p.measurement(
        ("append", &args.implementation),
        &durability_name,
        p.threads,
        json!({"preallocate": preallocate_name}),
        (elapsed, p.timed.then_some(latencies)),
    );
    if config.durability == Durability::OnCommit {
        let syncs = after.syncs - before.syncs;
        let synced = after.synced_appends - before.synced_appends;
        m.appends_per_sync = Some(if syncs == 0 {
            0.0
        } else {
            synced as f64 / syncs as f64
        });
        m.notes.insert("syncs".into(), json!(syncs));
    }
    m.notes
        .insert("rolls".into(), json!(after.rolls - before.rolls));
    cpu.process_notes(cpu_end, p.records, &mut m);
    drop(shard);
    if !args.get("keep", false)? {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(m)
}

/// One batch of `batch` records per payload of `pool`, the `i`th starting
/// at the pool's `i`th payload: built before measuring, as the limits
/// frame their bytes before measuring.
pub fn record_batches(pool: &[Bytes], batch: usize) -> Vec<Vec<Record>> {
    (0..pool.len())
        .map(|i| {
            (0..batch)
                .map(|j| Record {
                    timestamp_micros: 1_700_000_000_000_000 + (i * batch + j) as u64,
                    payload: pool[(i + j) % pool.len()].clone(),
                })
                .collect()
        })
        .collect()
}

/// Appends `records` records from `batches` in turn (the last one cut
/// short), each call timed into `latencies` when given.
pub(crate) fn append_n(
    shard: &Shard,
    batches: &[Vec<Record>],
    records: u64,
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
                shard.append(records).wait().map_err(err)?;
                l.push(started.elapsed());
            }
            None => {
                shard.append(records).wait().map_err(err)?;
            }
        }
        remaining -= count as u64;
    }
    Ok(())
}

/// `prepare felix`: a shard of `--records` records of `--payload-bytes`
/// (or `--bytes` worth), in segments of `--segment-bytes`, written without
/// syncs, closed cleanly.
pub fn prepare(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    crate::fresh_dir(&dir).map_err(err)?;
    let payload_bytes: usize = crate::data::payload_bytes(args)?;
    let per_record = record_encoded_len(payload_bytes as u32);
    let records = match args.params.get("bytes") {
        Some(_) => {
            args.get("bytes", 0u64)?
                .saturating_sub(SEGMENT_HEADER_LEN as u64)
                / per_record
        }
        None => args.get("records", 1_000_000u64)?,
    };
    let segment_bytes = args.get("segment-bytes", 1u64 << 30)?;
    let batch: usize = args.get("batch", 256usize)?;
    let started = Instant::now();
    let written = fill(&dir, records, payload_bytes, segment_bytes, batch)?;
    let mut m = Measurement::new(
        "prepare",
        "felix",
        json!({"records": records, "payload_bytes": payload_bytes, "segment_bytes": segment_bytes}),
    );
    m.records = written.0;
    m.bytes = crate::dir_bytes(&dir).map_err(err)?;
    m.elapsed = started.elapsed();
    m.notes.insert("segments".into(), json!(written.1));
    Ok(m)
}

/// Appends `records` records to the shard in `dir` (creating it) with
/// segments of `segment_bytes`, through a file system that never syncs.
/// Returns records written and the shard's segment count.
pub fn fill(
    dir: &Path,
    records: u64,
    payload_bytes: usize,
    segment_bytes: u64,
    batch: usize,
) -> Result<(u64, usize)> {
    let config = StoreConfig {
        durability: Durability::None,
        preallocate: Preallocation::Off,
        segment_size_bytes: segment_bytes,
        ..StoreConfig::default()
    };
    let shard = Shard::options(dir)
        .config(config)
        .file_system(NoSyncFs::handle())
        .label(SHARD_LABEL)
        .open()
        .map_err(err)?;
    let batches = record_batches(&payload_pool(0, payload_bytes), batch.max(1));
    append_n(&shard, &batches, records, None)?;
    shard.sync().map_err(err)?;
    Ok((
        shard.offsets().written - shard.offsets().base,
        shard.segments().len(),
    ))
}

/// The segment files of the shard in `dir`, in id order.
pub fn segment_paths(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(err)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            matches!(
                felix_format::ShardFileName::parse(&name),
                felix_format::ShardFileName::Segment(_)
            )
        })
        .collect();
    logs.sort();
    Ok(logs)
}

/// `scan felix --depth full|headers`: `scan_segment` over the shard's
/// newest (here: only) segment, page cache warm.
pub fn scan(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    let depth_name = args.text("depth", "full");
    let depth = match depth_name.as_str() {
        "full" => ScanDepth::Full,
        "headers" => ScanDepth::Headers,
        other => return Err(format!("unknown depth {other:?} (full, headers)")),
    };
    let paths = segment_paths(&dir)?;
    let last = paths.last().ok_or("no segment to scan")?;
    let id = felix_format::parse_file_name(&last.file_name().unwrap_or_default().to_string_lossy())
        .map(|(id, _)| id)
        .ok_or("bad segment name")?;
    let (segment, len) = SegmentFile::open(
        &felix_io::FileSystem::os(),
        &dir,
        id,
        SHARD_LABEL.into(),
        felix_io::OpenMode::Read,
    )
    .map_err(err)?;
    crate::warm_page_cache(&dir).map_err(err)?;
    let started = Instant::now();
    let scan = scan_segment(
        &segment,
        len,
        ScanStart::first_record(&segment),
        depth,
        4096,
    )
    .map_err(err)?;
    let elapsed = started.elapsed();
    if scan.damage.is_some() {
        return Err(format!("scan met damage: {:?}", scan.damage));
    }
    let scenario = if depth == ScanDepth::Full {
        "scan"
    } else {
        "index-rebuild"
    };
    let mut m = Measurement::new(scenario, "felix", json!({"depth": depth_name}));
    m.records = scan.records;
    m.bytes = len;
    m.elapsed = elapsed;
    m.notes
        .insert("index_entries".into(), json!(scan.index.len()));
    Ok(m)
}

/// Opens the prepared shard in `dir` for reading (recovery is not timed).
pub(crate) fn open_for_reads(dir: &Path) -> Result<Shard> {
    let config = StoreConfig {
        durability: Durability::None,
        ..StoreConfig::default()
    };
    Shard::options(dir)
        .config(config)
        .label(SHARD_LABEL)
        .open()
        .map_err(err)
}

/// `seq-read-runs felix`: [`Shard::read_runs`] (the run read) from offset 0
/// to the end in reads of `--max-bytes` (1 MiB), page cache warm, each
/// run's records walked (offset and payload length summed) as a broker
/// framing them for a socket would.
pub fn seq_read_runs(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    let max_bytes: u64 = args.get("max-bytes", 1u64 << 20)?;
    let shard = open_for_reads(&dir)?;
    crate::warm_page_cache(&dir).map_err(err)?;
    let end = shard.offsets().written;
    let started = Instant::now();
    let mut offset = shard.offsets().base;
    let (mut bytes, mut records, mut sink) = (0u64, 0u64, 0u64);
    while offset < end {
        let runs = shard
            .read_runs(offset, max_bytes, felix_storage::ReadBound::Committed)
            .map_err(err)?;
        let Some(last) = runs.last() else { break };
        offset = last.next_offset();
        for run in &runs {
            bytes += run.bytes().len() as u64;
            for record in run {
                records += 1;
                sink = sink.wrapping_add(record.offset ^ record.payload.len() as u64);
            }
        }
    }
    let elapsed = started.elapsed();
    let mut m = Measurement::new("seq-read-runs", "felix", json!({"max_bytes": max_bytes}));
    m.records = records;
    m.bytes = bytes;
    m.elapsed = elapsed;
    m.notes.insert("sink".into(), json!(sink));
    Ok(m)
}

/// `seq-read felix`: [`Shard::read`] from offset 0 to the end in reads of
/// `--max-bytes` (1 MiB), page cache warm.
pub fn seq_read(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    let max_bytes: u64 = args.get("max-bytes", 1u64 << 20)?;
    let shard = open_for_reads(&dir)?;
    crate::warm_page_cache(&dir).map_err(err)?;
    let end = shard.offsets().written;
    let started = Instant::now();
    let mut offset = shard.offsets().base;
    let mut bytes = 0u64;
    let mut records = 0u64;
    while offset < end {
        let batch = shard
            .read(offset, max_bytes, ReadBound::Committed)
            .map_err(err)?;
        let Some(last) = batch.last() else { break };
        offset = last.offset + 1;
        records += batch.len() as u64;
        bytes += batch
            .iter()
            .map(|r| RECORD_HEADER_LEN as u64 + r.payload.len() as u64)
            .sum::<u64>();
    }
    let elapsed = started.elapsed();
    let mut m = Measurement::new("seq-read", "felix", json!({"max_bytes": max_bytes}));
    m.records = records;
    m.bytes = bytes;
    m.elapsed = elapsed;
    Ok(m)
}

/// Deterministic pseudo-random offsets in `[base, end)`.
pub fn random_offsets(n: usize, base: u64, end: u64, seed: u64) -> Vec<u64> {
    let mut state = seed | 1;
    let span = end.saturating_sub(base).max(1);
    (0..n)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            base + state.wrapping_mul(0x2545_F491_4F6C_DD1D) % span
        })
        .collect()
}

/// `random-read felix`: `--reads` reads of one record each at random
/// offsets ([`Shard::read`] with a 1-byte budget), each timed.
pub fn random_read(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    let reads: usize = args.get("reads", 100_000usize)?;
    let shard = open_for_reads(&dir)?;
    crate::warm_page_cache(&dir).map_err(err)?;
    let offsets = random_offsets(reads, shard.offsets().base, shard.offsets().written, 7);
    // Open every sealed segment's file and index before measuring: a first
    // touch is the open scenario's cost, not a read's.
    for s in shard.segments() {
        shard
            .read(s.extent.base_offset, 1, ReadBound::Committed)
            .map_err(err)?;
    }
    let mut latencies = Latencies::with_capacity(reads);
    let mut bytes = 0u64;
    let started = Instant::now();
    for &offset in &offsets {
        let t = Instant::now();
        let got = shard.read(offset, 1, ReadBound::Committed).map_err(err)?;
        latencies.push(t.elapsed());
        let record = got.first().ok_or("read returned nothing")?;
        if record.offset != offset {
            return Err(format!("asked {offset}, got {}", record.offset));
        }
        bytes += RECORD_HEADER_LEN as u64 + record.payload.len() as u64;
    }
    let elapsed = started.elapsed();
    let mut m = Measurement::new(
        "random-read",
        "felix",
        json!({"shard_records": shard.offsets().written}),
    );
    m.records = reads as u64;
    m.bytes = bytes;
    m.elapsed = elapsed;
    m.latencies = Some(latencies);
    Ok(m)
}

/// `prepare-sealed felix`: `--segments` sealed segments of `--records-per-segment`
/// records each, plus the active one, closed cleanly.
pub fn prepare_sealed(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    crate::fresh_dir(&dir).map_err(err)?;
    let segments: u64 = args.get("segments", 10_000u64)?;
    let per_segment: u64 = args.get("records-per-segment", 16u64)?;
    let payload_bytes: usize = crate::data::payload_bytes(args)?;
    // A batch fills a segment exactly, so every append after the first rolls.
    let segment_bytes =
        SEGMENT_HEADER_LEN as u64 + per_segment * record_encoded_len(payload_bytes as u32);
    let started = Instant::now();
    let (records, count) = fill(
        &dir,
        (segments + 1) * per_segment,
        payload_bytes,
        segment_bytes,
        per_segment as usize,
    )?;
    // Closed cleanly, as the open scenario promises: through the real file
    // system, so the clean-shutdown file is written and synced.
    open_for_reads(&dir)?.close().map_err(err)?;
    let mut m = Measurement::new("prepare-sealed", "felix", json!({"segments": segments}));
    m.records = records;
    m.bytes = crate::dir_bytes(&dir).map_err(err)?;
    m.elapsed = started.elapsed();
    m.notes.insert("segment_files".into(), json!(count));
    Ok(m)
}

/// `open felix`: [`ShardOptions::open`](felix_storage::ShardOptions::open) of a cleanly closed shard, timed, with the
/// resident memory after it.
pub fn open(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    let rss_before = rss_bytes();
    let started = Instant::now();
    let shard = open_for_reads(&dir)?;
    let elapsed = started.elapsed();
    let rss_after = rss_bytes();
    // Untimed: close cleanly again, so the next run opens the same state
    // (an open removes the clean-shutdown file before it returns).
    shard.close().map_err(err)?;
    let mut m = Measurement::new(
        "open",
        "felix",
        json!({"segments": shard.segments().len() - 1}),
    );
    m.records = shard.offsets().written - shard.offsets().base;
    m.elapsed = elapsed;
    m.notes
        .insert("rss_after_open_bytes".into(), json!(rss_after));
    m.notes
        .insert("rss_before_open_bytes".into(), json!(rss_before));
    m.notes
        .insert("segment_files".into(), json!(shard.segments().len()));
    Ok(m)
}

/// The largest segment a store accepts: a newest segment filled under it
/// never rolls.
const UNBOUNDED: u64 = felix_storage::limits::MAX_SEGMENT_SIZE_BYTES;

/// `prepare-crash felix`: `--sealed` sealed segments of about
/// `--segment-bytes` each, then a newest segment of `--newest-bytes`.
pub fn prepare_crash(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    crate::fresh_dir(&dir).map_err(err)?;
    let sealed: u64 = args.get("sealed", 0u64)?;
    let segment_bytes: u64 = args.get("segment-bytes", 64u64 << 20)?;
    let newest_bytes: u64 = args.get("newest-bytes", 16u64 << 20)?;
    let payload_bytes = crate::data::payload_bytes(args)?;
    let batch = 256usize;
    let per_record = record_encoded_len(payload_bytes as u32);
    // Sealed segments hold a whole number of batches, so they fill exactly.
    let per_segment =
        (segment_bytes - SEGMENT_HEADER_LEN as u64) / per_record / batch as u64 * batch as u64;
    let seg_bytes = SEGMENT_HEADER_LEN as u64 + per_segment * per_record;
    let newest_records = newest_bytes.saturating_sub(SEGMENT_HEADER_LEN as u64) / per_record;
    let started = Instant::now();
    if sealed > 0 {
        fill(&dir, sealed * per_segment, payload_bytes, seg_bytes, batch)?;
        // The last of them is full: the next batch rolls to the newest.
        let first = newest_records.min(batch as u64);
        fill(&dir, first, payload_bytes, seg_bytes, batch)?;
        fill(
            &dir,
            newest_records - first,
            payload_bytes,
            UNBOUNDED,
            batch,
        )?;
    } else {
        fill(&dir, newest_records, payload_bytes, UNBOUNDED, batch)?;
    }
    let mut m = Measurement::new(
        "prepare-crash",
        "felix",
        json!({"sealed": sealed, "segment_bytes": seg_bytes, "newest_bytes": newest_bytes}),
    );
    m.bytes = crate::dir_bytes(&dir).map_err(err)?;
    m.elapsed = started.elapsed();
    m.notes
        .insert("segments".into(), json!(segment_paths(&dir)?.len()));
    Ok(m)
}

/// `crash-open felix`: leaves a torn record at the end of the newest
/// segment (what a crash mid-write leaves), then times [`ShardOptions::open`](felix_storage::ShardOptions::open),
/// which scans the newest segment in full and truncates the torn tail.
pub fn crash_open(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    let paths = segment_paths(&dir)?;
    let newest = paths.last().ok_or("no segment")?;
    let newest_len = std::fs::metadata(newest).map_err(err)?.len();
    let id =
        felix_format::parse_file_name(&newest.file_name().unwrap_or_default().to_string_lossy())
            .map(|(id, _)| id)
            .ok_or("bad segment name")?;
    let (segment, _) = SegmentFile::open(
        &felix_io::FileSystem::os(),
        &dir,
        id,
        SHARD_LABEL.into(),
        felix_io::OpenMode::Read,
    )
    .map_err(err)?;
    // Every prepared record has a payload of the run's size, so the next
    // offset follows from the length.
    let payload_bytes = crate::data::payload_bytes(args)?;
    let next_offset = segment.base_offset()
        + (newest_len - SEGMENT_HEADER_LEN as u64) / record_encoded_len(payload_bytes as u32);
    tear_tail(newest, next_offset, payload_bytes)?;
    let total = crate::dir_bytes(&dir).map_err(err)?;
    crate::warm_page_cache(&dir).map_err(err)?;
    let started = Instant::now();
    let shard = open_for_reads(&dir)?;
    let elapsed = started.elapsed();
    let actions = shard.stats().recovery_actions.len();
    let mut m = Measurement::new(
        "crash-open",
        "felix",
        json!({"newest_bytes": newest_len, "shard_bytes": total, "segments": paths.len()}),
    );
    m.records = shard.offsets().written - shard.offsets().base;
    m.bytes = newest_len;
    m.elapsed = elapsed;
    m.notes.insert("recovery_actions".into(), json!(actions));
    Ok(m)
}

/// Appends the first 100 bytes (all but the last, for a shorter record) of
/// a valid record with a `payload_bytes` payload to `path`: a write the
/// crash cut short.
fn tear_tail(path: &Path, next_offset: u64, payload_bytes: usize) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(err)?;
    let len = file.metadata().map_err(err)?.len();
    let payload = crate::data::xorshift_bytes(9, payload_bytes);
    let header = felix_format::encode_record_header(next_offset, 1, &payload).map_err(err)?;
    let mut torn = header.to_vec();
    torn.extend_from_slice(&payload);
    torn.truncate(100.min(torn.len() - 1));
    file.write_all_at(&torn, len).map_err(err)?;
    Ok(())
}
