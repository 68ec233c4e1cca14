//! The limit of each scenario: the same bytes moved by the simplest code the
//! operating system allows, measured in the same run as felix.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use felix_format::{RECORD_HEADER_LEN, SEGMENT_HEADER_LEN, SegmentHeader, record_encoded_len};
use serde_json::json;

use crate::args::Args;
use crate::data::{framed_pool, payload_pool};
use crate::felix::{AppendParams, Result, random_offsets, segment_paths, shard_dir};
use crate::report::{Latencies, Measurement};

fn err(what: impl std::fmt::Display) -> String {
    what.to_string()
}

fn create(path: &Path) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(err)
}

/// `append limit-write | limit-bufwriter | limit-fdatasync | limit-fsync`
/// (and `limit-group`, [`crate::group_limit`]).
///
/// * `limit-write`: one `write` per batch of framed records (per record at
///   batch 1), nothing else.
/// * `limit-bufwriter`: every framed record through an 8 KiB `BufWriter`.
/// * `limit-fdatasync` (`limit-fsync`): one `write` of the batch, then one
///   `fdatasync` (`fsync`), one thread. `--growth` says how the file grows
///   ([`crate::sync_growth`]; every row's limit is the default, `grow`).
///
/// The records are framed before measuring starts, so the loop only moves
/// bytes. `--warmup` records (1,000, as felix's runs) go through the same
/// loop untimed first.
pub fn append(args: &Args) -> Result<Measurement> {
    if args.implementation == "limit-group" {
        return crate::group_limit::append(args);
    }
    let p = AppendParams::from_args(args)?;
    let dir = args.dir()?;
    crate::fresh_dir(&dir).map_err(err)?;
    let path = dir.join("limit.log");
    let framed = framed_pool(&payload_pool(0, p.payload_bytes));
    // A batch is the concatenation of consecutive framed records.
    let batches: Vec<Vec<u8>> = (0..framed.len())
        .map(|i| {
            (0..p.batch)
                .flat_map(|j| framed[(i + j) % framed.len()].iter().copied())
                .collect()
        })
        .collect();
    let mut file = create(&path)?;
    let appends = p.records.div_ceil(p.batch as u64);
    let timed = p.timed;
    let mut latencies = Latencies::with_capacity(if timed { appends as usize } else { 0 });
    let kind = args.implementation.as_str();
    let warm_appends = p.warmup.div_ceil(p.batch as u64) as usize;
    let growth = crate::sync_growth::Growth::from_args(args)?;
    let started = match kind {
        "limit-write" => {
            for batch in batches.iter().cycle().take(warm_appends) {
                file.write_all(batch).map_err(err)?;
            }
            let started = Instant::now();
            for i in 0..appends as usize {
                let t = Instant::now();
                file.write_all(&batches[i % batches.len()]).map_err(err)?;
                if timed {
                    latencies.push(t.elapsed());
                }
            }
            started
        }
        "limit-bufwriter" => {
            let mut out = BufWriter::new(&mut file);
            for record in framed.iter().cycle().take(p.warmup as usize) {
                out.write_all(record).map_err(err)?;
            }
            out.flush().map_err(err)?;
            let started = Instant::now();
            for i in 0..p.records as usize {
                out.write_all(&framed[i % framed.len()]).map_err(err)?;
            }
            out.flush().map_err(err)?;
            started
        }
        "limit-fdatasync" | "limit-fsync" => {
            let sync = |file: &File| {
                if kind == "limit-fsync" {
                    file.sync_all()
                } else {
                    file.sync_data()
                }
            };
            let batch_bytes = batches.first().map_or(0, Vec::len) as u64;
            let total = (warm_appends as u64 + appends) * batch_bytes;
            let mut grower = growth.start(&file, total)?;
            let mut at = 0u64;
            let mut append = |batch: &[u8]| -> Result<()> {
                grower.ahead(&file, at + batch.len() as u64)?;
                file.write_all_at(batch, at).map_err(err)?;
                at += batch.len() as u64;
                sync(&file).map_err(err)
            };
            for batch in batches.iter().cycle().take(warm_appends) {
                append(batch)?;
            }
            let started = Instant::now();
            for i in 0..appends as usize {
                let t = Instant::now();
                append(&batches[i % batches.len()])?;
                if timed {
                    latencies.push(t.elapsed());
                }
            }
            started
        }
        other => return Err(format!("unknown append limit {other:?}")),
    };
    let elapsed = started.elapsed();
    let durability = if kind.contains("sync") {
        "on_commit"
    } else {
        "none"
    };
    let extra = if kind.contains("sync") {
        json!({ "growth": growth.name() })
    } else {
        json!({})
    };
    let mut m = p.measurement(
        ("append", kind),
        durability,
        1,
        extra,
        (
            elapsed,
            (timed && kind != "limit-bufwriter").then_some(latencies),
        ),
    );
    if kind.contains("sync") {
        m.appends_per_sync = Some(1.0);
    }
    drop(file);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(m)
}

/// Walks the framed records of `buf` (a whole number of them, starting at
/// a record boundary), CRC-ing each record's two checksummed ranges exactly
/// as a verifying reader must: header bytes 0..20, then bytes 0..24 followed
/// by the payload. Returns the bytes consumed and the records whose
/// checksums did not match (always 0 for a clean file; counted so the
/// compiler cannot drop the work).
fn crc_records(buf: &[u8], records: &mut u64, bad: &mut u64) -> usize {
    let mut at = 0usize;
    while let Some(header) = buf.get(at..at + RECORD_HEADER_LEN) {
        let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let Some(record) = buf.get(at..at + RECORD_HEADER_LEN + len) else {
            break;
        };
        let header_crc = crc32fast::hash(&record[..20]);
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&record[..24]);
        hasher.update(&record[RECORD_HEADER_LEN..]);
        let crc = hasher.finalize();
        let stored_header = u32::from_be_bytes([record[20], record[21], record[22], record[23]]);
        let stored = u32::from_be_bytes([record[24], record[25], record[26], record[27]]);
        *bad += u64::from(header_crc != stored_header) + u64::from(crc != stored);
        *records += 1;
        at += RECORD_HEADER_LEN + len;
    }
    at
}

/// Reads the segment file at `path` in 1 MiB chunks, CRC-ing every
/// record's two checksummed ranges: the records, the checksum mismatches
/// and the bytes read.
fn crc_file(path: &Path) -> Result<(u64, u64, u64)> {
    let mut file = File::open(path).map_err(err)?;
    let mut buf = vec![0u8; 1 << 20];
    // Bytes carried over from the previous chunk (a record cut by the
    // chunk boundary) sit at the front of `buf`.
    let mut carried = 0usize;
    let mut records = 0u64;
    let mut bad = 0u64;
    let mut total = 0u64;
    let mut skip_header = SEGMENT_HEADER_LEN;
    loop {
        let n = file.read(&mut buf[carried..]).map_err(err)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        let filled = carried + n;
        let start = skip_header.min(filled);
        skip_header -= start;
        let used = start + crc_records(&buf[start..filled], &mut records, &mut bad);
        buf.copy_within(used..filled, 0);
        carried = filled - used;
    }
    Ok((records, bad, total))
}

/// `scan limit`: read the newest segment in 1 MiB chunks and CRC every
/// record's two checksummed ranges, nothing else checked or kept.
pub fn scan(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    let paths = segment_paths(&dir)?;
    let path = paths.last().ok_or("no segment")?;
    crate::warm_page_cache(&dir).map_err(err)?;
    let started = Instant::now();
    let (records, bad, total) = crc_file(path)?;
    let elapsed = started.elapsed();
    if bad != 0 {
        return Err(format!("{bad} checksum mismatches"));
    }
    let mut m = Measurement::new("scan", "limit", json!({"chunk_bytes": 1 << 20}));
    m.records = records;
    m.bytes = total;
    m.elapsed = elapsed;
    Ok(m)
}

/// `seq-read-runs limit`: the recovery scan's limit over every segment of
/// the shard, oldest first (1 MiB chunks, each record's two ranges
/// CRC-ed): what any reader that verifies every record it returns costs.
pub fn seq_read_scan(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    let paths = segment_paths(&dir)?;
    crate::warm_page_cache(&dir).map_err(err)?;
    let started = Instant::now();
    let (mut records, mut bad, mut total) = (0, 0, 0);
    for path in &paths {
        let (r, b, t) = crc_file(path)?;
        (records, bad, total) = (records + r, bad + b, total + t);
    }
    let elapsed = started.elapsed();
    if bad != 0 {
        return Err(format!("{bad} checksum mismatches"));
    }
    let mut m = Measurement::new("seq-read-runs", "limit", json!({"chunk_bytes": 1 << 20}));
    m.records = records;
    m.bytes = total;
    m.elapsed = elapsed;
    Ok(m)
}

/// `seq-read limit`: a `pread` loop in 1 MiB chunks over every segment file.
pub fn seq_read(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    let paths = segment_paths(&dir)?;
    crate::warm_page_cache(&dir).map_err(err)?;
    let mut buf = vec![0u8; 1 << 20];
    let started = Instant::now();
    let mut total = 0u64;
    let mut sink = 0u8;
    for path in &paths {
        let file = File::open(path).map_err(err)?;
        let mut position = 0u64;
        loop {
            let n = file.read_at(&mut buf, position).map_err(err)?;
            if n == 0 {
                break;
            }
            sink ^= buf[n - 1];
            position += n as u64;
        }
        total += position;
    }
    let elapsed = started.elapsed();
    let mut m = Measurement::new("seq-read", "limit", json!({"chunk_bytes": 1 << 20}));
    m.bytes = total;
    m.records = total / record_encoded_len(crate::data::payload_bytes(args)? as u32);
    m.elapsed = elapsed;
    m.notes.insert("sink".into(), json!(sink));
    Ok(m)
}

/// `random-read limit`: one `pread` of one record at its known position
/// (records are all the same size, so offset → position is arithmetic).
pub fn random_read(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    let reads: usize = args.get("reads", 100_000usize)?;
    let paths = segment_paths(&dir)?;
    crate::warm_page_cache(&dir).map_err(err)?;
    let record_len = record_encoded_len(crate::data::payload_bytes(args)? as u32);
    // (base offset, records, file) per segment.
    let mut segments = Vec::new();
    for path in &paths {
        let file = File::open(path).map_err(err)?;
        let mut raw = [0u8; SEGMENT_HEADER_LEN];
        file.read_exact_at(&mut raw, 0).map_err(err)?;
        let header = SegmentHeader::decode(&raw).map_err(err)?;
        let len = file.metadata().map_err(err)?.len();
        let count = (len - SEGMENT_HEADER_LEN as u64) / record_len;
        segments.push((header.base_offset, count, file));
    }
    let base = segments.first().map_or(0, |s| s.0);
    let end = segments.last().map_or(0, |s| s.0 + s.1);
    let offsets = random_offsets(reads, base, end, 7);
    let mut latencies = Latencies::with_capacity(reads);
    let mut buf = vec![0u8; record_len as usize];
    let mut sink = 0u8;
    let started = Instant::now();
    for &offset in &offsets {
        let t = Instant::now();
        let i = segments.partition_point(|s| s.0 <= offset) - 1;
        let (seg_base, _, file) = &segments[i];
        let position = SEGMENT_HEADER_LEN as u64 + (offset - seg_base) * record_len;
        file.read_exact_at(&mut buf, position).map_err(err)?;
        latencies.push(t.elapsed());
        sink ^= buf[0];
    }
    let elapsed = started.elapsed();
    let mut m = Measurement::new("random-read", "limit", json!({"shard_records": end}));
    m.records = reads as u64;
    m.bytes = reads as u64 * record_len;
    m.elapsed = elapsed;
    m.latencies = Some(latencies);
    m.notes.insert("sink".into(), json!(sink));
    Ok(m)
}

/// `open limit`: list the shard directory (names collected, nothing opened).
pub fn open(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    let started = Instant::now();
    let names: Vec<std::ffi::OsString> = std::fs::read_dir(&dir)
        .map_err(err)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<_>>()
        .map_err(err)?;
    let elapsed = started.elapsed();
    let mut m = Measurement::new("open", "limit", json!({}));
    m.elapsed = elapsed;
    m.notes.insert("entries".into(), json!(names.len()));
    Ok(m)
}
