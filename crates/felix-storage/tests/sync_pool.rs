//! The store's sync pool serves every shard in turn: a hot shard synced
//! back to back does not starve cold ones.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use common::gated::GatedFs;
use common::{config, records};
use felix_io::OsFs;
use felix_storage::{Durability, ShardKey, Store, StoreConfig};

fn p99(mut samples: Vec<Duration>) -> Duration {
    assert!(!samples.is_empty());
    samples.sort();
    samples[(samples.len() * 99 / 100).min(samples.len() - 1)]
}

/// One shard kept busy by 64 appends in flight from one thread, and 100
/// cold shards each given one append at a time: the cold appends' p99 (a
/// write, a wait for a worker, a sync of their own and a wake-up) stays
/// within twice the p99 of the hot shard's syncs.
#[test]
fn sync_pool_hot_shard_does_not_starve_cold_ones() {
    let root = tempfile::tempdir().unwrap();
    let fs = GatedFs::new(OsFs);
    let config = StoreConfig {
        preallocate: felix_storage::Preallocation::Stepped,
        ..config(64 << 20, Durability::OnCommit)
    };
    let store = Store::options(root.path())
        .config(config)
        .file_system(fs.handle())
        .open()
        .unwrap();
    let hot = store
        .create_shard(&ShardKey::new("t", "d", "hot", 0))
        .unwrap();
    let cold: Vec<_> = (0..100)
        .map(|i| {
            store
                .create_shard(&ShardKey::new("t", "d", "cold", i))
                .unwrap()
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (hot, stop) = (Arc::clone(&hot), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut in_flight = std::collections::VecDeque::new();
            let mut next = 0;
            while !stop.load(Relaxed) {
                while in_flight.len() < 64 {
                    in_flight.push_back(hot.append(&records(next, 1, 128)).submit().unwrap());
                    next += 1;
                }
                common::exec::block_on(in_flight.pop_front().unwrap()).unwrap();
            }
            for append in in_flight {
                common::exec::block_on(append).unwrap();
            }
            next
        })
    };
    // Let the hot shard reach its pace.
    std::thread::sleep(Duration::from_millis(200));
    let mut cold_latencies = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut round = 0;
    while Instant::now() < deadline || cold_latencies.len() < 300 {
        for shard in &cold {
            let started = Instant::now();
            shard.append(&records(round, 1, 128)).wait().unwrap();
            cold_latencies.push(started.elapsed());
        }
        round += 1;
    }
    stop.store(true, Relaxed);
    let hot_appends = producer.join().unwrap();
    let hot_syncs = fs.sync_durations(hot.dir());
    let (cold_p99, hot_sync_p99) = (p99(cold_latencies.clone()), p99(hot_syncs.clone()));
    println!(
        "hot: {hot_appends} appends, {} syncs, sync p99 {hot_sync_p99:?}; cold: {} appends, p99 {cold_p99:?}",
        hot_syncs.len(),
        cold_latencies.len()
    );
    assert!(
        hot_syncs.len() > 100,
        "the hot shard was synced back to back"
    );
    assert!(
        cold_p99 <= 2 * hot_sync_p99,
        "cold appends p99 {cold_p99:?} > 2 x the hot shard's sync p99 {hot_sync_p99:?}"
    );
    store.close().unwrap();
}

/// Drives `shards`, each from its own thread with one on-commit append in
/// flight at a time (a future, so the pool makes every sync), for `time`;
/// returns the most sync workers seen meanwhile and the appends made.
fn drive(store: &Store, shards: &[Arc<felix_storage::Shard>], time: Duration) -> (usize, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let drivers: Vec<_> = shards
        .iter()
        .map(|shard| {
            let (shard, stop) = (Arc::clone(shard), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut next = shard.offsets().written;
                while !stop.load(Relaxed) {
                    let append = shard.append(&records(next, 1, 64)).submit().unwrap();
                    common::exec::block_on(append).unwrap();
                    next += 1;
                }
                next
            })
        })
        .collect();
    let deadline = Instant::now() + time;
    let mut most = 0;
    while Instant::now() < deadline {
        most = most.max(store.sync_workers());
        std::thread::sleep(Duration::from_micros(200));
    }
    stop.store(true, Relaxed);
    let appends = drivers.into_iter().map(|d| d.join().unwrap()).sum();
    (most.max(store.sync_workers()), appends)
}

fn eight_shards(
    keep_alive: Duration,
) -> (tempfile::TempDir, Store, Vec<Arc<felix_storage::Shard>>) {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path())
        .config(StoreConfig {
            sync_threads: 64,
            sync_thread_keep_alive: keep_alive,
            ..config(64 << 20, Durability::OnCommit)
        })
        .open()
        .unwrap();
    let shards = (0..8)
        .map(|i| {
            store
                .create_shard(&ShardKey::new("t", "d", "s", i))
                .unwrap()
        })
        .collect();
    (root, store, shards)
}

/// Eight shards, each with one sync in flight at a time: the pool held 12
/// to 22 workers, as every shard queued again while the worker that had
/// just synced it was still waking its appender, and each time a new
/// worker started. That worker now takes the shard's next turn: the pool
/// holds about one worker per sync in flight. On a loaded machine (CI on
/// two cores, building beside the test) a waker can be slow enough that a
/// ninth to eleventh worker starts once and stays for the keep-alive: 11
/// was seen there, so the bound is three over, still below the 12 the
/// old pool started at its least.
#[test]
fn sync_pool_workers_stay_near_the_syncs_in_flight() {
    let (_root, store, shards) = eight_shards(Duration::from_secs(60));
    let (most, appends) = drive(&store, &shards, Duration::from_millis(1500));
    println!("{appends} appends, at most {most} sync workers");
    assert!(
        appends > 8 * 20,
        "the shards were synced: {appends} appends"
    );
    assert!(most <= 8 + 3, "{most} sync workers for 8 syncs in flight");
    store.close().unwrap();
}

/// Idle workers retire after the keep-alive, down to none, and start
/// again when syncs are needed.
#[test]
fn sync_pool_idle_workers_retire_after_the_keep_alive() {
    let keep_alive = Duration::from_millis(300);
    let (_root, store, shards) = eight_shards(keep_alive);
    let (most, _) = drive(&store, &shards, Duration::from_millis(300));
    assert!(most >= 1, "the pool ran workers");
    let stopped = Instant::now();
    assert!(
        store.sync_workers() >= 1,
        "kept while idle for less than the keep-alive"
    );
    while store.sync_workers() > 0 {
        assert!(
            stopped.elapsed() < Duration::from_secs(10),
            "{} workers never retired",
            store.sync_workers()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let retired = stopped.elapsed();
    assert!(
        retired >= keep_alive / 2,
        "retired after {retired:?}, keep-alive {keep_alive:?}"
    );
    // Syncs start a worker again.
    let shard = &shards[0];
    let append = shard
        .append(&records(shard.offsets().written, 1, 64))
        .submit()
        .unwrap();
    common::exec::block_on(append).unwrap();
    assert_eq!(store.sync_workers(), 1);
    store.close().unwrap();
}
