//! Many appenders with OnCommit plus readers: every acknowledged record is
//! durable and readable, offsets unique and contiguous, and syncs are shared.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{config, open};
use felix_storage::{Durability, Record};

#[test]
fn concurrent_on_commit_appenders_share_syncs_and_lose_nothing() {
    const THREADS: usize = 16;
    const PER_THREAD: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let shard = Arc::new(open(dir.path(), config(16 * 1024, Durability::OnCommit)));
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (shard, done) = (Arc::clone(&shard), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !done.load(Ordering::Relaxed) {
                let next = shard.next_offset();
                if next > 0 {
                    // Reads never see a partial record: every payload names
                    // a thread and a sequence number in full.
                    for r in shard.read(next.saturating_sub(5), 1 << 20).unwrap() {
                        assert!(
                            r.payload.starts_with(b"t") && r.payload.ends_with(b"."),
                            "{:?}",
                            r.payload
                        );
                    }
                    reads += 1;
                }
            }
            reads
        })
    };
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let shard = Arc::clone(&shard);
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                for i in 0..PER_THREAD {
                    let payload = format!("t{t}-{i}.");
                    let receipt = shard.append(&[Record::new(1, payload.clone())]).unwrap();
                    assert!(
                        shard.durable_offset() > receipt.last_offset,
                        "acknowledged before durable"
                    );
                    acked.push((receipt.first_offset, payload));
                }
                acked
            })
        })
        .collect();
    let acked: Vec<_> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    done.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);

    let offsets: HashSet<u64> = acked.iter().map(|a| a.0).collect();
    assert_eq!(offsets.len(), THREADS * PER_THREAD, "offsets are unique");
    assert_eq!(
        offsets,
        (0..(THREADS * PER_THREAD) as u64).collect(),
        "and contiguous"
    );
    for (offset, payload) in &acked {
        assert_eq!(
            shard.read(*offset, 1).unwrap()[0].payload,
            payload.as_bytes()
        );
    }
    let stats = shard.stats();
    println!(
        "syncs {} for {} appends: {:.2} appends per sync",
        stats.syncs,
        stats.synced_appends,
        stats.appends_per_sync()
    );
    assert!(
        stats.appends_per_sync() > 1.0,
        "group commit shares syncs: {stats:?}"
    );
    drop(shard);

    let reopened = open(dir.path(), config(16 * 1024, Durability::OnCommit));
    for (offset, payload) in &acked {
        assert_eq!(
            reopened.read(*offset, 1).unwrap()[0].payload,
            payload.as_bytes()
        );
    }
}
