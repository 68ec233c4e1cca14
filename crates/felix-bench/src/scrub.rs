//! `scrub-append felix`: on-commit batch-1 appends while a scrub reads the
//! shard's sealed segments at full speed from disk (`--scrub true`), or
//! with no scrub (`--scrub false`), so the two p50s compare. The control,
//! `--scrub read-crc`, reads the same files in 1 MiB `read`s and CRCs each
//! chunk, with no record walk: what any full-speed checksum pass over the
//! same bytes costs the appends, against which the scrub's own cost shows.
//!
//! Each run writes `--sealed-bytes` of sealed segments (through the real
//! write path, without syncs), flushes them to disk and drops the page
//! cache (`sync; echo 3 > /proc/sys/vm/drop_caches`, which needs root), so
//! the scrub reads uncached segments. The scrub loops until the appends are
//! done, evicting the sealed segments' pages before each pass
//! (`POSIX_FADV_DONTNEED` on those files alone: another system-wide `sync`
//! and cache drop would stall the appends' own syncs, which is not what a
//! scrub costs them).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use felix_storage::{Durability, Preallocation, Shard, StoreConfig};
use serde_json::json;

use crate::args::Args;
use crate::data::payload_pool;
use crate::felix::{Result, SHARD_LABEL, append_n, fill, record_batches, shard_dir};
use crate::report::{Latencies, Measurement};

fn err(what: impl std::fmt::Display) -> String {
    what.to_string()
}

/// Writes dirty pages back and empties the page cache.
fn drop_page_cache() -> Result<()> {
    rustix::fs::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| format!("drop the page cache (needs root): {e}"))
}

/// Evicts the clean pages of `paths` from the page cache.
fn evict(paths: &[std::path::PathBuf]) -> Result<()> {
    for path in paths {
        let file = std::fs::File::open(path).map_err(err)?;
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).map_err(err)?;
    }
    Ok(())
}

/// The control: every byte of `paths` read in 1 MiB chunks and CRC-ed,
/// until `done`. Returns the bytes read.
fn read_crc(paths: &[std::path::PathBuf], done: &AtomicBool) -> Result<u64> {
    use std::io::Read as _;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    let mut crc = 0u32;
    for path in paths {
        let mut file = std::fs::File::open(path).map_err(err)?;
        loop {
            let n = file.read(&mut buf).map_err(err)?;
            if n == 0 || done.load(Ordering::Relaxed) {
                break;
            }
            crc ^= crc32fast::hash(&buf[..n]);
            total += n as u64;
        }
    }
    std::hint::black_box(crc);
    Ok(total)
}

/// `scrub-append felix --sealed-bytes B --records N --scrub true|false|read-crc`.
pub fn scrub_append(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    crate::fresh_dir(&dir).map_err(err)?;
    let sealed_bytes: u64 = args.get("sealed-bytes", 1u64 << 30)?;
    let segment_bytes: u64 = args.get("segment-bytes", 64u64 << 20)?;
    let records: u64 = args.get("records", 3_000u64)?;
    let mode = args.text("scrub", "true");
    let (scrub, control) = match mode.as_str() {
        "true" => (true, false),
        "false" => (false, false),
        "read-crc" => (true, true),
        other => return Err(format!("--scrub {other}: expected true, false or read-crc")),
    };
    // The scrub thread's nice value: 0 (the default) runs it as the
    // appends run; 19 is how an operator would run a bulk verification.
    let nice: i32 = args.get("scrub-nice", 0)?;
    // The sealed data: 64 KiB records, as large values are what a scrub
    // spends its time reading.
    let big = 64 << 10;
    let per_record = felix_format::record_encoded_len(big as u32);
    fill(
        &dir,
        sealed_bytes / per_record + 1,
        big as usize,
        segment_bytes,
        16,
    )?;
    drop_page_cache()?;
    // All but the newest, which the open makes the active segment.
    let mut sealed = crate::felix::segment_paths(&dir)?;
    sealed.pop();
    let config = StoreConfig {
        durability: Durability::OnCommit,
        preallocate: Preallocation::Stepped,
        segment_size_bytes: segment_bytes,
        ..StoreConfig::default()
    };
    let shard = Shard::options(&dir)
        .config(config)
        .label(SHARD_LABEL)
        .open()
        .map_err(err)?;
    let batches = record_batches(&payload_pool(0, 128), 1);
    append_n(&shard, &batches, 200, None)?;
    let done = AtomicBool::new(false);
    let (scrubbed, passes) = (AtomicU64::new(0), AtomicU64::new(0));
    let mut latencies = Latencies::with_capacity(records as usize);
    let (elapsed, scrub_result) = std::thread::scope(|scope| {
        let scrubber = scrub.then(|| {
            scope.spawn(|| -> Result<()> {
                if nice != 0 {
                    let me = rustix::thread::gettid();
                    rustix::process::setpriority_process(Some(me), nice).map_err(err)?;
                }
                while !done.load(Ordering::Relaxed) {
                    evict(&sealed)?;
                    let bytes = if control {
                        read_crc(&sealed, &done)?
                    } else {
                        shard.scrub().map_err(err)?.bytes()
                    };
                    scrubbed.fetch_add(bytes, Ordering::Relaxed);
                    passes.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
        });
        // Let the scrub get going before the measured appends.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let started = Instant::now();
        let appended = append_n(&shard, &batches, records, Some(&mut latencies));
        let elapsed = started.elapsed();
        done.store(true, Ordering::Relaxed);
        let scrubbed = scrubber.map_or(Ok(()), |s| {
            s.join()
                .unwrap_or_else(|_| Err("scrub thread panicked".into()))
        });
        (elapsed, appended.and(scrubbed))
    });
    scrub_result?;
    let mut m = Measurement::new(
        "scrub-append",
        &args.implementation,
        json!({"scrub": mode, "scrub_nice": nice, "sealed_bytes": sealed_bytes, "records": records}),
    );
    m.records = records;
    m.bytes = records * felix_format::record_encoded_len(128);
    m.elapsed = elapsed;
    m.latencies = Some(latencies);
    let scrubbed = scrubbed.load(Ordering::Relaxed);
    m.notes.insert("scrubbed_bytes".into(), json!(scrubbed));
    m.notes
        .insert("scrub_passes".into(), json!(passes.load(Ordering::Relaxed)));
    drop(shard);
    if !args.get("keep", false)? {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(m)
}
