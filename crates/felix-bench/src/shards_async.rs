//! The many-shards appends in the futures form (`--form futures`, the
//! default): one thread keeps `--in-flight` on-commit appends in flight
//! through [`felix_storage::Shard::append_async`], awaiting the oldest each
//! time, as a broker's event loop would.

use std::collections::VecDeque;
use std::time::Instant;

use felix_format::record_encoded_len;
use felix_storage::{AppendFuture, Record, Store};
use serde_json::json;

use crate::args::Args;
use crate::completions::block_on;
use crate::felix::Result;
use crate::report::{Latencies, Measurement, rss_bytes};
use crate::shards::{config, err, key, open_descriptors, raise_nofile, root, thread_count};

/// Appends go to `shard_of(k)` for the `k`-th, `in_flight` at a time from
/// this thread; the store is asked for the shard each time (and may reopen
/// it). Returns the latencies and the most descriptors and threads seen.
fn drive(
    store: &Store,
    appends: u64,
    in_flight: usize,
    shard_of: impl Fn(u64) -> u64,
) -> Result<(Latencies, u64, u64)> {
    let payload = bytes::Bytes::from(crate::data::xorshift_bytes(5, 128));
    let mut latencies = Latencies::with_capacity(appends as usize);
    let mut pending: VecDeque<(Instant, AppendFuture)> = VecDeque::with_capacity(in_flight);
    let (mut peak_fds, mut peak_threads) = (0, 0);
    let mut k = 0;
    while k < appends || !pending.is_empty() {
        while k < appends && pending.len() < in_flight {
            let at = Instant::now();
            let shard = store.open_shard(&key(shard_of(k))).map_err(err)?;
            let append = shard
                .append_async(&[Record::new(k, payload.clone())])
                .map_err(err)?;
            pending.push_back((at, append));
            if k % 256 == 0 {
                peak_fds = peak_fds.max(open_descriptors());
                peak_threads = peak_threads.max(thread_count());
            }
            k += 1;
        }
        if let Some((at, append)) = pending.pop_front() {
            block_on(append).map_err(err)?;
            latencies.push(at.elapsed());
        }
    }
    Ok((latencies, peak_fds, peak_threads))
}

/// `shards-append felix --form futures`: one on-commit append to each of
/// the prepared store's `--shards` shards (10,000), `--in-flight` (64) at
/// a time from one thread.
pub fn append(args: &Args) -> Result<Measurement> {
    let shards: u64 = args.get("shards", 10_000u64)?;
    let in_flight: usize = args.get("in-flight", 64usize)?.max(1);
    let nofile = raise_nofile();
    let root = root(args)?;
    let mut config = config(args)?;
    config.max_open_shards = args.get("max-open-shards", config.max_open_shards)?;
    crate::warm_page_cache(&root).map_err(err)?;
    let fds_before = open_descriptors();
    let store = Store::open(&root, config).map_err(err)?;
    let started = Instant::now();
    let (latencies, fds, threads) = drive(&store, shards, in_flight, |k| k)?;
    let elapsed = started.elapsed();
    let rss = rss_bytes();
    store.close().map_err(err)?;
    let mut m = Measurement::new(
        "shards-append",
        "felix",
        json!({"shards": shards, "in_flight": in_flight, "form": "futures",
               "max_open_shards": config.max_open_shards, "sync_threads": config.sync_threads}),
    );
    m.records = shards;
    m.bytes = shards * record_encoded_len(128);
    m.elapsed = elapsed;
    m.latencies = Some(latencies);
    m.notes.insert(
        "open_descriptors".into(),
        json!(fds.saturating_sub(fds_before)),
    );
    m.notes.insert("rss_bytes".into(), json!(rss));
    m.notes.insert("threads".into(), json!(threads));
    m.notes.insert("rlimit_nofile".into(), json!(nofile));
    Ok(m)
}

/// `shards-commit felix --form futures`: a fresh store of `--shards`
/// shards (1,000), then `--records` on-commit appends of one record,
/// `--in-flight` (64) at a time from one thread, the `k`-th to shard
/// `k mod shards`.
pub fn commit(args: &Args) -> Result<Measurement> {
    let shards: u64 = args.get("shards", 1_000u64)?;
    let in_flight: usize = args.get("in-flight", 64usize)?.max(1);
    let records: u64 = args.get("records", 64_000u64)?;
    let nofile = raise_nofile();
    let root = root(args)?.with_file_name("commit-store");
    crate::fresh_dir(&root).map_err(err)?;
    let config = config(args)?;
    let store = Store::open(&root, config).map_err(err)?;
    let handles = (0..shards)
        .map(|i| store.create_shard(&key(i)).map_err(err))
        .collect::<Result<Vec<_>>>()?;
    let before: u64 = handles.iter().map(|s| s.stats().syncs).sum();
    let started = Instant::now();
    let (latencies, fds, threads) = drive(&store, records, in_flight, |k| k % shards)?;
    let elapsed = started.elapsed();
    let rss = rss_bytes();
    let syncs: u64 = handles.iter().map(|s| s.stats().syncs).sum::<u64>() - before;
    drop(handles);
    store.close().map_err(err)?;
    let _ = std::fs::remove_dir_all(&root);
    let mut m = Measurement::new(
        "shards-commit",
        "felix",
        json!({"shards": shards, "in_flight": in_flight, "form": "futures",
               "sync_threads": config.sync_threads}),
    );
    m.records = records;
    m.bytes = records * record_encoded_len(128);
    m.elapsed = elapsed;
    m.latencies = Some(latencies);
    m.appends_per_sync = Some(records as f64 / syncs.max(1) as f64);
    m.notes.insert("rss_bytes".into(), json!(rss));
    m.notes.insert("threads".into(), json!(threads));
    m.notes
        .insert("sync_threads".into(), json!(config.sync_threads));
    m.notes.insert("open_descriptors".into(), json!(fds));
    m.notes.insert("rlimit_nofile".into(), json!(nofile));
    Ok(m)
}
