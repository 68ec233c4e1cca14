//! The many-shards appends in the futures form (`--form futures`, the
//! default): one thread keeps `--in-flight` on-commit appends in flight
//! through [`felix_storage::Append::submit`], polling whichever was
//! woken and refilling its place at once, as a broker's event loop would.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Instant;

use felix_format::{ShardKey, record_encoded_len};
use felix_storage::{AppendFuture, Record, Store};
use serde_json::json;

use crate::args::Args;
use crate::felix::Result;
use crate::report::{CpuTime, Latencies, Measurement, rss_bytes};
use crate::shards::{
    FD_SAMPLE_EVERY, config, err, key, keys, note_config, open_descriptors, raise_nofile, root,
    thread_count,
};

/// The executor's ready list: slots whose future was woken, and the
/// thread to unpark.
struct Ready {
    thread: Thread,
    woken: Mutex<Vec<usize>>,
}

/// The waker of one slot: marks it ready and unparks the driving thread.
struct SlotWaker {
    slot: usize,
    ready: Arc<Ready>,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.ready
            .woken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(self.slot);
        self.ready.thread.unpark();
    }
}

/// The `k`-th append goes to the shard of `keys[k mod keys.len()]`,
/// `in_flight` at a time from this thread; the store is asked for the shard
/// each time (and may reopen it), by a key built before the timed part, as
/// a broker holds the keys it serves. Each completion's place is refilled
/// at once, whichever it is, as an event loop polling its tasks would: appends to different shards complete
/// out of order, and awaiting the oldest each time leaves places empty
/// behind a slow sync, so fewer than `in_flight` would be in flight where
/// the limit keeps its threads busy. Descriptors are counted every
/// `fd_every` appends and at the end. Returns the latencies and the most
/// descriptors and threads seen.
fn drive(
    store: &Store,
    appends: u64,
    in_flight: usize,
    fd_every: u64,
    keys: &[ShardKey],
) -> Result<(Latencies, u64, u64)> {
    let payload = bytes::Bytes::from(crate::data::xorshift_bytes(5, 128));
    let mut latencies = Latencies::with_capacity(appends as usize);
    let ready = Arc::new(Ready {
        thread: std::thread::current(),
        woken: Mutex::new(Vec::with_capacity(in_flight)),
    });
    let wakers: Vec<Waker> = (0..in_flight)
        .map(|slot| {
            Waker::from(Arc::new(SlotWaker {
                slot,
                ready: Arc::clone(&ready),
            }))
        })
        .collect();
    let mut slots: Vec<Option<(Instant, AppendFuture)>> = (0..in_flight).map(|_| None).collect();
    let mut free: Vec<usize> = (0..in_flight).rev().collect();
    let mut woken = Vec::with_capacity(in_flight);
    let (mut peak_fds, mut peak_threads) = (0, 0);
    let (mut k, mut done) = (0, 0);
    // Polls the future in `slot`; frees the slot once it resolved.
    let mut poll = |slot: usize,
                    slots: &mut Vec<Option<(Instant, AppendFuture)>>,
                    free: &mut Vec<usize>|
     -> Result<bool> {
        let Some((at, append)) = slots[slot].as_mut() else {
            return Ok(false);
        };
        let mut cx = Context::from_waker(&wakers[slot]);
        match Pin::new(append).poll(&mut cx) {
            Poll::Ready(outcome) => {
                outcome.map_err(err)?;
                latencies.push(at.elapsed());
                slots[slot] = None;
                free.push(slot);
                Ok(true)
            }
            Poll::Pending => Ok(false),
        }
    };
    while done < appends {
        while k < appends
            && let Some(slot) = free.pop()
        {
            let at = Instant::now();
            let shard = store
                .open_shard(&keys[(k % keys.len() as u64) as usize])
                .map_err(err)?;
            let append = shard
                .append(&[Record::new(k, payload.clone())])
                .submit()
                .map_err(err)?;
            slots[slot] = Some((at, append));
            if k % 256 == 0 {
                peak_threads = peak_threads.max(thread_count());
            }
            if k % fd_every == 0 {
                peak_fds = peak_fds.max(open_descriptors());
            }
            k += 1;
            // The first poll registers the waker (or finds it done).
            done += u64::from(poll(slot, &mut slots, &mut free)?);
        }
        std::mem::swap(
            &mut woken,
            &mut *ready
                .woken
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if woken.is_empty() {
            std::thread::park();
            continue;
        }
        for slot in woken.drain(..) {
            done += u64::from(poll(slot, &mut slots, &mut free)?);
        }
    }
    peak_fds = peak_fds.max(open_descriptors());
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
    let store = Store::options(&root).config(config).open().map_err(err)?;
    let keys = keys(shards);
    let started = Instant::now();
    let (latencies, fds, threads) = drive(&store, shards, in_flight, FD_SAMPLE_EVERY, &keys)?;
    let elapsed = started.elapsed();
    let rss = rss_bytes();
    store.close().map_err(err)?;
    let mut m = Measurement::new(
        "shards-append",
        "felix",
        json!({"shards": shards, "in_flight": in_flight, "form": "futures",
               "max_open_shards": config.max_open_shards, "sync_threads": config.sync_threads}),
    );
    note_config(&config, &mut m);
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
    let store = Store::options(&root).config(config).open().map_err(err)?;
    let handles = (0..shards)
        .map(|i| store.create_shard(&key(i)).map_err(err))
        .collect::<Result<Vec<_>>>()?;
    let before: u64 = handles.iter().map(|s| s.stats().syncs).sum();
    let keys = keys(shards);
    let started = Instant::now();
    let cpu = CpuTime::now();
    // Every shard is open before the timed part, so the descriptors held
    // do not change: counted at its start and end only (a count lists
    // `/proc/self/fd`, 4,000 entries, on the driving thread).
    let (latencies, fds, threads) = drive(&store, records, in_flight, u64::MAX, &keys)?;
    let elapsed = started.elapsed();
    let cpu_end = CpuTime::now();
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
    note_config(&config, &mut m);
    m.records = records;
    m.bytes = records * record_encoded_len(128);
    m.elapsed = elapsed;
    m.latencies = Some(latencies);
    m.appends_per_sync = Some(records as f64 / syncs.max(1) as f64);
    cpu.per_record_notes(cpu_end, records, &mut m);
    m.notes.insert("rss_bytes".into(), json!(rss));
    m.notes.insert("threads".into(), json!(threads));
    m.notes.insert("open_descriptors".into(), json!(fds));
    m.notes.insert("rlimit_nofile".into(), json!(nofile));
    Ok(m)
}
