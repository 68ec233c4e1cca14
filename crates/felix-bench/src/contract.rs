//! Scenarios of the broker contract: a consumer following the tail, and
//! the disk many small shards occupy.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use felix_storage::{ReadBound, Record, Shard, StoreConfig, Tail};
use serde_json::json;

use crate::args::Args;
use crate::felix::{durability, preallocation};
use crate::report::{Latencies, Measurement};

type Result<T> = std::result::Result<T, String>;

fn err(what: impl std::fmt::Display) -> String {
    what.to_string()
}

/// `follow felix`: one producer appends `--records` records (`--batch` at a
/// time, `--durability`, optionally one every `--interval-us`), one
/// consumer follows the tail with `wait_readable` then `read`.
///
/// Reported: the consumer's empty reads (the contract says none), and the
/// latency of each wake-up — a wait during which the record it waited for
/// was acknowledged — from the instant the producer's append returned to
/// the instant the consumer's wait returned (a consumer woken before the
/// producer's call returned counts as 0).
pub fn follow(args: &Args) -> Result<Measurement> {
    let records: u64 = args.get("records", 1_000_000u64)?;
    let batch: u64 = args.get("batch", 1u64)?.max(1);
    let payload_bytes: usize = crate::data::payload_bytes(args)?;
    let interval = Duration::from_micros(args.get("interval-us", 0u64)?);
    let durability_name = args.text("durability", "none");
    let dir = args.dir()?.join("follow");
    crate::fresh_dir(&dir).map_err(err)?;
    let config = StoreConfig {
        durability: durability(&durability_name)?,
        preallocate: preallocation(&args.text("preallocate", "stepped"))?,
        ..StoreConfig::default()
    };
    let shard = Arc::new(
        Shard::options(&dir)
            .config(config)
            .label("follow")
            .open()
            .map_err(err)?,
    );
    let payload = Bytes::from(crate::data::xorshift_bytes(1, payload_bytes));
    // The instant (since `started`) each record's append returned.
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..records).map(|_| AtomicU64::new(0)).collect());
    let started = Instant::now();
    let producer = {
        let (shard, acked) = (Arc::clone(&shard), Arc::clone(&acked));
        std::thread::spawn(move || -> Result<()> {
            let mut next = 0u64;
            while next < records {
                let n = batch.min(records - next);
                let batch: Vec<Record> = (0..n)
                    .map(|i| Record::new(next + i, payload.clone()))
                    .collect();
                let due = Instant::now() + interval;
                shard.append(&batch).wait().map_err(err)?;
                let at = started.elapsed().as_nanos() as u64;
                for slot in acked.iter().skip(next as usize).take(n as usize) {
                    slot.store(at.max(1), Ordering::Release);
                }
                next += n;
                while Instant::now() < due {
                    std::hint::spin_loop();
                }
            }
            Ok(())
        })
    };
    let (mut next, mut reads, mut empty_reads, mut waits) = (0u64, 0u64, 0u64, 0u64);
    let mut wakeups = Latencies::with_capacity(1 << 16);
    let now = || started.elapsed().as_nanos() as u64;
    while next < records {
        if shard.offsets().readable <= next {
            waits += 1;
            let entered = now();
            match shard
                .wait_readable(next, ReadBound::Committed)
                .wait_timeout(Duration::from_secs(30))
                .map_err(err)?
            {
                Tail::Readable { .. } => {}
                other => return Err(format!("the wait at offset {next} saw {other:?}")),
            }
            let woke = now();
            // The producer stamps a record once its append has returned,
            // which may be after the consumer woke.
            let ack = loop {
                let at = acked[next as usize].load(Ordering::Acquire);
                if at != 0 || now() > woke + 1_000_000_000 {
                    break at;
                }
                std::hint::spin_loop();
            };
            // A wake-up is a wait the acknowledgement came during (one that
            // came before the wait began needed no waking); a consumer woken
            // before the producer's call returned counts as 0.
            if ack == 0 || ack >= entered {
                wakeups.push(Duration::from_nanos(woke.saturating_sub(ack)));
            }
        }
        let got = shard
            .read(next, 1 << 20, ReadBound::Committed)
            .map_err(err)?;
        reads += 1;
        if got.is_empty() {
            empty_reads += 1;
            continue;
        }
        for r in &got {
            if r.offset != next {
                return Err(format!("read offset {} where {next} was due", r.offset));
            }
            next += 1;
        }
    }
    let elapsed = started.elapsed();
    producer
        .join()
        .map_err(|_| "the producer panicked".to_string())??;
    let mut m = Measurement::new(
        "follow",
        "felix",
        json!({
            "durability": durability_name,
            "batch": batch,
            "payload_bytes": payload_bytes,
            "interval_us": interval.as_micros() as u64,
        }),
    );
    m.records = records;
    m.bytes = records * felix_format::record_encoded_len(payload_bytes as u32);
    m.elapsed = elapsed;
    m.notes.insert("reads".into(), json!(reads));
    m.notes.insert("empty_reads".into(), json!(empty_reads));
    m.notes.insert("waits".into(), json!(waits));
    m.notes.insert("wakeups".into(), json!(wakeups.len()));
    m.notes.insert("wakeup_us".into(), wakeups.summary());
    m.latencies = Some(wakeups);
    drop(shard);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(m)
}

/// `shards-du felix`: `--shards` shards (default 10,000), each holding one
/// record, closed; reports the bytes the file system allocated for all of
/// them (files and directories, as `du` counts), under `--preallocate`.
pub fn shards_du(args: &Args) -> Result<Measurement> {
    let shards: u64 = args.get("shards", 10_000u64)?;
    let preallocate_name = args.text("preallocate", "stepped");
    let root = args.dir()?.join("shards-du");
    crate::fresh_dir(&root).map_err(err)?;
    let config = StoreConfig {
        preallocate: preallocation(&preallocate_name)?,
        segment_size_bytes: args.get("segment-bytes", 1u64 << 30)?,
        ..StoreConfig::default()
    };
    let started = Instant::now();
    for i in 0..shards {
        let shard = Shard::options(root.join(format!("shard-{i:05}")))
            .config(config)
            .open()
            .map_err(err)?;
        shard
            .append(&[Record::now(format!("the one record of shard {i}"))])
            .wait()
            .map_err(err)?;
        shard.close().map_err(err)?;
    }
    let elapsed = started.elapsed();
    let allocated = allocated_bytes(&root).map_err(err)?;
    let mut m = Measurement::new(
        "shards-du",
        "felix",
        json!({
            "shards": shards,
            "preallocate": preallocate_name,
            "segment_bytes": config.segment_size_bytes,
        }),
    );
    m.records = shards;
    m.bytes = allocated;
    m.elapsed = elapsed;
    m.notes.insert("allocated_bytes".into(), json!(allocated));
    m.notes.insert(
        "allocated_bytes_per_shard".into(),
        json!(allocated / shards.max(1)),
    );
    if !args.get("keep", false)? {
        let _ = std::fs::remove_dir_all(&root);
    }
    Ok(m)
}

/// Bytes allocated under `dir`, itself included, as `du` counts them
/// (`st_blocks` of every entry, each inode once).
fn allocated_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = std::fs::symlink_metadata(dir)?.blocks() * 512;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            total += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    Ok(total)
}
