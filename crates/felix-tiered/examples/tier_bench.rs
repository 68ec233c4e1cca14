//! Tiered storage's figures against plain `object_store` calls, on a real
//! S3-protocol server on loopback (s3s-fs, in this process), alternating
//! the two sides round by round:
//!
//! - offload of the shard's sealed segments vs puts of the same files at
//!   the same part size and concurrency;
//! - a catch-up read of everything offloaded, every record checked against
//!   its payload, vs sequential ranged gets of the same objects in the
//!   tier's chunk size;
//! - a random read with a cold cache (a tier just opened: the segment's
//!   index and one chunk fetched) vs one ranged get of a chunk, and with a
//!   warm cache vs one local `pread` of a record;
//! - offload of many small segments (20 MiB in 64 KiB segments, where
//!   requests and not bytes set the pace) vs puts of the same files,
//!   `offload_concurrency` files at a time.
//!
//! `cargo xtask bench --tiered` builds and runs it; by hand:
//! `cargo run --release -p felix-tiered --example tier_bench -- DIR MIB ROUNDS [OFFLOAD_CONCURRENCY]`
//! (the last: `TierConfig::offload_concurrency`, its default when not
//! given). DIR is emptied and removed at the end.
#![allow(missing_docs, unreachable_pub)]

// The tests' server module: the bench starts only its plain server.
#[allow(dead_code)]
#[path = "../tests/common/s3.rs"]
mod s3;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};

use felix_format::ShardKey;
use felix_storage::{Preallocation, Record, Shard, StoreConfig};
use felix_tiered::{TierConfig, TierRetention, TierStore, TieredShard, stores};

const PAYLOAD: usize = 4096;
const SAMPLES: usize = 200;
/// The small-segment shard: this many MiB in segments of [`SMALL_SEGMENT`].
const SMALL_MIB: u64 = 20;
const SMALL_SEGMENT: u64 = 64 << 10;

fn payload(offset: u64) -> Vec<u8> {
    let mut p = vec![0u8; PAYLOAD];
    p[..8].copy_from_slice(&offset.to_le_bytes());
    for (i, b) in p.iter_mut().enumerate().skip(8) {
        *b = (offset as usize).wrapping_add(i) as u8;
    }
    p
}

fn key() -> ShardKey {
    ShardKey::new("bench", "default", "tiered", 0)
}

fn shard_config() -> StoreConfig {
    segments_of(64 << 20)
}

fn segments_of(segment_size_bytes: u64) -> StoreConfig {
    StoreConfig {
        segment_size_bytes,
        preallocate: Preallocation::Off,
        ..StoreConfig::default()
    }
}

fn tier_config(prefix: &str, offload_concurrency: Option<usize>) -> TierConfig {
    let default = TierConfig::default();
    TierConfig {
        prefix: prefix.to_owned(),
        // Everything sealed goes.
        local: TierRetention {
            max_bytes: Some(1),
            max_age: None,
        },
        offload_concurrency: offload_concurrency.unwrap_or(default.offload_concurrency),
        ..default
    }
}

/// A shard of about `mib` MiB of 4 KiB records, closed.
fn fill(dir: &Path, mib: u64) -> u64 {
    fill_with(dir, mib, shard_config())
}

/// A shard of about `mib` MiB of 4 KiB records appended in batches that
/// fit a segment of `config`'s size (a batch goes whole into one segment),
/// closed.
fn fill_with(dir: &Path, mib: u64, config: StoreConfig) -> u64 {
    let per_batch = (config.segment_size_bytes / (PAYLOAD as u64 + 64) / 2).clamp(1, 64);
    let shard = Shard::options(dir).config(config).open().unwrap();
    let records = (mib << 20) / (PAYLOAD as u64 + 64);
    let mut offset = 0;
    while offset < records {
        let batch: Vec<Record> = (offset..(offset + per_batch).min(records))
            .map(|o| Record::new(1_000 + o, payload(o)))
            .collect();
        offset += batch.len() as u64;
        shard.append(&batch).wait().unwrap();
    }
    shard.close().unwrap();
    records
}

/// A copy of the shard made of hard links: the offload's deletes unlink
/// the links, never the pristine files.
fn link_copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::hard_link(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// The sealed segments' files, as the baseline uploads them.
fn sealed_files(dir: &Path) -> Vec<PathBuf> {
    sealed_files_with(dir, shard_config())
}

fn sealed_files_with(dir: &Path, config: StoreConfig) -> Vec<PathBuf> {
    let shard = Shard::options(dir).config(config).open().unwrap();
    let mut out = Vec::new();
    for s in shard.segments().iter().filter(|s| !s.active) {
        for kind in [
            felix_format::FileKind::Segment,
            felix_format::FileKind::Index,
            felix_format::FileKind::TimeIndex,
        ] {
            let path = dir.join(felix_format::file_name(s.extent.id, kind).as_str());
            if path.exists() {
                out.push(path);
            }
        }
    }
    shard.close().unwrap();
    out
}

/// A put as the tier makes it: one put up to the part size, multipart
/// with the same concurrency above it.
async fn put_like_the_tier(
    store: &TierStore,
    path: &ObjectPath,
    bytes: Bytes,
    config: &TierConfig,
) {
    if bytes.len() as u64 <= config.part_bytes {
        store.put(path, PutPayload::from(bytes)).await.unwrap();
        return;
    }
    let upload = store.put_multipart(path).await.unwrap();
    let part = config.part_bytes as usize;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, part);
    let mut at = 0;
    while at < bytes.len() {
        let end = (at + part).min(bytes.len());
        writer
            .wait_for_capacity(config.upload_concurrency)
            .await
            .unwrap();
        writer.put(bytes.slice(at..end));
        at = end;
    }
    writer.finish().await.unwrap();
}

async fn delete_prefix(store: &TierStore, prefix: &str) {
    let prefix = ObjectPath::from(prefix);
    let objects: Vec<_> = store.list(Some(&prefix)).try_collect().await.unwrap();
    for o in objects {
        store.delete(&o.location).await.unwrap();
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A small xorshift for the random offsets (seeded, so runs compare).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

#[derive(Default)]
struct Round {
    offload_mib_s: f64,
    puts_mib_s: f64,
    catch_up_mib_s: f64,
    gets_mib_s: f64,
    cold_p50_us: f64,
    ranged_get_p50_us: f64,
    warm_p50_us: f64,
    pread_p50_us: f64,
    small_offload_mib_s: f64,
    small_puts_mib_s: f64,
}

fn mib_s(bytes: u64, took: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / took.as_secs_f64()
}

fn p50(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

/// The sealed segments' bytes the tier's manifest lists.
fn listed_bytes(tiered: &TieredShard) -> u64 {
    tiered
        .manifest()
        .segments
        .iter()
        .map(|s| s.extent.len + s.index_len + s.time_index_len)
        .sum()
}

/// Offload of the small-segment shard vs puts of the same files,
/// `offload_concurrency` at a time, alternating which goes first.
async fn small_round(
    r: usize,
    dir: &Path,
    pristine: &Path,
    store: &TierStore,
    concurrency: Option<usize>,
) -> (f64, f64) {
    use futures::StreamExt;
    let tier_prefix = format!("st{r}");
    let base_prefix = format!("sb{r}");
    let config = tier_config(&tier_prefix, concurrency);
    let work = dir.join(format!("small{r}"));
    link_copy(pristine, &work);
    let files: Vec<PathBuf> = sealed_files_with(&work, segments_of(SMALL_SEGMENT))
        .iter()
        .map(|f| pristine.join(f.file_name().unwrap()))
        .collect();
    let offload = async {
        let shard = Shard::options(&work)
            .config(segments_of(SMALL_SEGMENT))
            .open()
            .unwrap();
        let tiered = TieredShard::open(Arc::new(shard), key(), store.clone(), config.clone())
            .await
            .unwrap();
        let start = Instant::now();
        let outcome = tiered.offload().await.unwrap();
        let took = start.elapsed();
        assert!(outcome.uploaded.len() > 100, "{}", outcome.uploaded.len());
        mib_s(listed_bytes(&tiered), took)
    };
    let puts = async {
        let start = Instant::now();
        let base_prefix = &base_prefix;
        let bytes: u64 = futures::stream::iter(&files)
            .map(move |f| async move {
                let data = Bytes::from(std::fs::read(f).unwrap());
                let len = data.len() as u64;
                let name = format!("{base_prefix}/{}", f.file_name().unwrap().to_string_lossy());
                store
                    .put(&ObjectPath::from(name), PutPayload::from(data))
                    .await
                    .unwrap();
                len
            })
            .buffer_unordered(config.offload_concurrency)
            .fold(0, |sum, n| async move { sum + n })
            .await;
        mib_s(bytes, start.elapsed())
    };
    let figures = if r.is_multiple_of(2) {
        let o = offload.await;
        (o, puts.await)
    } else {
        let p = puts.await;
        (offload.await, p)
    };
    delete_prefix(store, &tier_prefix).await;
    delete_prefix(store, &base_prefix).await;
    std::fs::remove_dir_all(&work).unwrap();
    figures
}

async fn round(
    r: usize,
    dir: &Path,
    pristine: &Path,
    store: &TierStore,
    records: u64,
    concurrency: Option<usize>,
) -> Round {
    let mut out = Round::default();
    let tier_prefix = format!("t{r}");
    let base_prefix = format!("b{r}");
    let config = tier_config(&tier_prefix, concurrency);
    let work = dir.join(format!("work{r}"));
    link_copy(pristine, &work);
    // The pristine copies: the offload unlinks the work copy's.
    let files: Vec<PathBuf> = sealed_files(&work)
        .iter()
        .map(|f| pristine.join(f.file_name().unwrap()))
        .collect();
    let tiered_first = r.is_multiple_of(2);

    // Offload vs puts of the same files.
    let offload = async {
        let shard = Arc::new(Shard::options(&work).config(shard_config()).open().unwrap());
        let tiered = TieredShard::open(shard, key(), store.clone(), config.clone())
            .await
            .unwrap();
        let start = Instant::now();
        let outcome = tiered.offload().await.unwrap();
        let took = start.elapsed();
        assert!(!outcome.uploaded.is_empty());
        let bytes = listed_bytes(&tiered);
        (tiered, mib_s(bytes, took))
    };
    let puts = async {
        let start = Instant::now();
        let mut bytes = 0u64;
        for f in &files {
            let data = Bytes::from(std::fs::read(f).unwrap());
            bytes += data.len() as u64;
            let name = format!("{base_prefix}/{}", f.file_name().unwrap().to_string_lossy());
            put_like_the_tier(store, &ObjectPath::from(name), data, &config).await;
        }
        mib_s(bytes, start.elapsed())
    };
    let tiered = if tiered_first {
        let (t, a) = offload.await;
        out.offload_mib_s = a;
        out.puts_mib_s = puts.await;
        t
    } else {
        out.puts_mib_s = puts.await;
        let (t, a) = offload.await;
        out.offload_mib_s = a;
        t
    };
    let remote_end = tiered.remote_range().end;

    // Catch-up read vs sequential ranged gets.
    let catch_up = async {
        let start = Instant::now();
        let mut at = 0;
        let mut bytes = 0u64;
        while at < remote_end {
            let batch = tiered.read(at, 1 << 20).await.unwrap();
            for rec in &batch {
                assert_eq!(rec.offset, at);
                assert_eq!(&rec.payload[..], &payload(at)[..], "offset {at}");
                bytes += rec.payload.len() as u64;
                at += 1;
            }
        }
        mib_s(bytes, start.elapsed())
    };
    let logs: Vec<ObjectPath> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "log"))
        .map(|f| {
            ObjectPath::from(format!(
                "{base_prefix}/{}",
                f.file_name().unwrap().to_string_lossy()
            ))
        })
        .collect();
    let gets = async {
        let start = Instant::now();
        let mut bytes = 0u64;
        for path in &logs {
            let size = store.head(path).await.unwrap().size;
            let mut at = 0;
            while at < size {
                let end = (at + config.chunk_bytes).min(size);
                let got = store.get_range(path, at..end).await.unwrap();
                bytes += got.len() as u64;
                at = end;
            }
        }
        mib_s(bytes, start.elapsed())
    };
    if tiered_first {
        out.catch_up_mib_s = catch_up.await;
        out.gets_mib_s = gets.await;
    } else {
        out.gets_mib_s = gets.await;
        out.catch_up_mib_s = catch_up.await;
    }

    // Random reads: cold (a tier just opened), warm (the same read again),
    // one ranged get of a chunk, one local pread of a record.
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ r as u64);
    let (mut cold, mut warm, mut ranged, mut pread) = (vec![], vec![], vec![], vec![]);
    let local_logs: Vec<std::fs::File> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "log"))
        .map(|f| std::fs::File::open(f).unwrap())
        .collect();
    let local = Arc::clone(tiered.local());
    for _ in 0..SAMPLES {
        let offset = rng.below(remote_end.min(records));
        let fresh = TieredShard::open(Arc::clone(&local), key(), store.clone(), config.clone())
            .await
            .unwrap();
        let start = Instant::now();
        let got = fresh.read(offset, 1).await.unwrap();
        cold.push(start.elapsed());
        assert_eq!(&got[0].payload[..], &payload(offset)[..]);
        let start = Instant::now();
        let again = fresh.read(offset, 1).await.unwrap();
        warm.push(start.elapsed());
        assert_eq!(again[0].offset, offset);

        let path = &logs[rng.below(logs.len() as u64) as usize];
        let size = store.head(path).await.unwrap().size;
        let at = rng.below(size.saturating_sub(config.chunk_bytes));
        let start = Instant::now();
        let chunk = store
            .get_range(path, at..at + config.chunk_bytes.min(size))
            .await
            .unwrap();
        ranged.push(start.elapsed());
        assert!(!chunk.is_empty());

        let file = &local_logs[rng.below(local_logs.len() as u64) as usize];
        let len = file.metadata().unwrap().len();
        let at = rng.below(len.saturating_sub(PAYLOAD as u64));
        let mut buf = vec![0u8; PAYLOAD + 64];
        let start = Instant::now();
        let _ = file.read_at(&mut buf, at).unwrap();
        pread.push(start.elapsed());
    }
    out.cold_p50_us = p50(cold);
    out.warm_p50_us = p50(warm);
    out.ranged_get_p50_us = p50(ranged);
    out.pread_p50_us = p50(pread);

    drop(tiered);
    delete_prefix(store, &tier_prefix).await;
    delete_prefix(store, &base_prefix).await;
    std::fs::remove_dir_all(&work).unwrap();
    out
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(
        args.get(1)
            .map_or("target/bench/tmp/tiered", String::as_str),
    );
    let mib: u64 = args.get(2).map_or(1024, |a| a.parse().unwrap());
    let rounds: usize = args.get(3).map_or(3, |a| a.parse().unwrap());
    let concurrency: Option<usize> = args.get(4).map(|a| a.parse().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pristine = dir.join("pristine");
    let start = Instant::now();
    let records = fill(&pristine, mib);
    eprintln!(
        "filled {records} records of {PAYLOAD} bytes ({mib} MiB) in {:.1?}",
        start.elapsed()
    );
    let small = dir.join("pristine-small");
    fill_with(&small, SMALL_MIB, segments_of(SMALL_SEGMENT));
    let server = s3::start(&dir.join("s3")).await;
    let store = stores::s3(&server.endpoint).unwrap();
    let mut all = Vec::new();
    for r in 0..rounds {
        let mut figures = round(r, &dir, &pristine, &store, records, concurrency).await;
        (figures.small_offload_mib_s, figures.small_puts_mib_s) =
            small_round(r, &dir, &small, &store, concurrency).await;
        println!(
            "{{\"round\":{r},\"offload_mib_s\":{:.1},\"puts_mib_s\":{:.1},\"catch_up_mib_s\":{:.1},\"gets_mib_s\":{:.1},\"cold_p50_us\":{:.0},\"ranged_get_p50_us\":{:.0},\"warm_p50_us\":{:.1},\"pread_p50_us\":{:.1},\"small_offload_mib_s\":{:.1},\"small_puts_mib_s\":{:.1}}}",
            figures.offload_mib_s,
            figures.puts_mib_s,
            figures.catch_up_mib_s,
            figures.gets_mib_s,
            figures.cold_p50_us,
            figures.ranged_get_p50_us,
            figures.warm_p50_us,
            figures.pread_p50_us,
            figures.small_offload_mib_s,
            figures.small_puts_mib_s
        );
        all.push(figures);
    }
    let med = |f: fn(&Round) -> f64| median(&mut all.iter().map(f).collect::<Vec<_>>());
    let offload = med(|r| r.offload_mib_s / r.puts_mib_s);
    let catch_up = med(|r| r.catch_up_mib_s / r.gets_mib_s);
    let cold = med(|r| r.cold_p50_us / r.ranged_get_p50_us);
    let warm = med(|r| r.warm_p50_us / r.pread_p50_us);
    let small = med(|r| r.small_offload_mib_s / r.small_puts_mib_s);
    println!(
        "| figure ({mib} MiB, {rounds} rounds, medians) | tiered | object_store / local | ratio | target |"
    );
    println!("|---|---|---|---|---|");
    println!(
        "| offload vs puts, MiB/s | {:.1} | {:.1} | {:.2}x | >= 0.8x |",
        med(|r| r.offload_mib_s),
        med(|r| r.puts_mib_s),
        offload
    );
    println!(
        "| catch-up read (every record checked) vs ranged gets, MiB/s | {:.1} | {:.1} | {:.2}x | >= 0.7x |",
        med(|r| r.catch_up_mib_s),
        med(|r| r.gets_mib_s),
        catch_up
    );
    println!(
        "| random read, cold cache vs one ranged get, p50 µs | {:.0} | {:.0} | {:.2}x | <= 2x |",
        med(|r| r.cold_p50_us),
        med(|r| r.ranged_get_p50_us),
        cold
    );
    println!(
        "| random read, warm cache vs one local pread, p50 µs | {:.1} | {:.1} | {:.2}x | <= 2x |",
        med(|r| r.warm_p50_us),
        med(|r| r.pread_p50_us),
        warm
    );
    println!(
        "| offload of {SMALL_MIB} MiB in {} KiB segments vs puts {} at a time, MiB/s | {:.1} | {:.1} | {:.2}x | none |",
        SMALL_SEGMENT >> 10,
        tier_config("", concurrency).offload_concurrency,
        med(|r| r.small_offload_mib_s),
        med(|r| r.small_puts_mib_s),
        small
    );
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}
