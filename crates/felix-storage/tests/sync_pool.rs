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
                    in_flight.push_back(hot.append_async(&records(next, 1, 128)).unwrap());
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
            shard.append(&records(round, 1, 128)).unwrap();
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
