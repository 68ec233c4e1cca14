//! Many appenders with OnCommit plus readers: every acknowledged record is
//! durable and readable, offsets unique and contiguous, and syncs are shared.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{config, open};
use felix_storage::{Durability, ReadBound, Record};

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
                let next = shard.offsets().written;
                if next > 0 {
                    // Reads never see a partial record: every payload names
                    // a thread and a sequence number in full.
                    for r in shard
                        .read(next.saturating_sub(5), 1 << 20, ReadBound::Committed)
                        .unwrap()
                    {
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
                    let receipt = shard
                        .append(&[Record::new(1, payload.clone())])
                        .wait()
                        .unwrap();
                    assert!(
                        shard.offsets().durable > receipt.last_offset,
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
            shard.read(*offset, 1, ReadBound::Committed).unwrap()[0].payload,
            payload.as_bytes()
        );
    }
    let stats = shard.stats();
    println!(
        "syncs {} for {} appends: {:.2} appends per sync; {} writes: {:.2} appends per write",
        stats.syncs,
        stats.synced_appends,
        stats.appends_per_sync(),
        stats.writes,
        stats.appends_per_write()
    );
    assert!(
        stats.appends_per_sync() > 1.0,
        "group commit shares syncs: {stats:?}"
    );
    assert!(
        stats.appends_per_write() > 1.0,
        "concurrent appends share writes: {stats:?}"
    );
    assert_eq!(stats.appends, (THREADS * PER_THREAD) as u64);
    drop(shard);

    let reopened = open(dir.path(), config(16 * 1024, Durability::OnCommit));
    for (offset, payload) in &acked {
        assert_eq!(
            reopened.read(*offset, 1, ReadBound::Committed).unwrap()[0].payload,
            payload.as_bytes()
        );
    }
}

/// Combined on-commit appends (`Append::wait`) racing direct ones
/// (`Append::written`, which write queued batches first) and syncs, on segments small enough to
/// roll every few batches: offsets stay unique and contiguous, no batch is
/// split across segments, and every record reads back, before and after a
/// reopen.
#[test]
fn combined_and_direct_appends_with_rolls_keep_batches_whole() {
    const COMBINED: usize = 8;
    const DIRECT: usize = 2;
    const PER_THREAD: usize = 30;
    let dir = tempfile::tempdir().unwrap();
    let cfg = || config(1024, Durability::OnCommit);
    let shard = Arc::new(open(dir.path(), cfg()));
    let stop = Arc::new(AtomicBool::new(false));
    let syncer = {
        let (shard, stop) = (Arc::clone(&shard), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                shard.sync().unwrap();
            }
        })
    };
    let writers: Vec<_> = (0..COMBINED + DIRECT)
        .map(|t| {
            let shard = Arc::clone(&shard);
            std::thread::spawn(move || {
                let mut batches = Vec::new();
                for i in 0..PER_THREAD {
                    let count = 1 + (t + i) % 4;
                    let payloads: Vec<String> =
                        (0..count).map(|k| format!("t{t}-{i}-{k}.")).collect();
                    let records: Vec<Record> =
                        payloads.iter().map(|p| Record::new(1, p.clone())).collect();
                    let receipt = if t < COMBINED {
                        shard.append(&records).wait().unwrap()
                    } else {
                        let receipt = shard.append(&records).written().unwrap();
                        shard.wait_durable(receipt.last_offset + 1).wait().unwrap();
                        receipt
                    };
                    assert_eq!(receipt.last_offset - receipt.first_offset + 1, count as u64);
                    assert!(shard.offsets().durable > receipt.last_offset);
                    batches.push((receipt.first_offset, payloads));
                }
                batches
            })
        })
        .collect();
    let batches: Vec<(u64, Vec<String>)> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    stop.store(true, Ordering::Relaxed);
    syncer.join().unwrap();

    let mut offsets: Vec<u64> = batches
        .iter()
        .flat_map(|(first, p)| *first..*first + p.len() as u64)
        .collect();
    offsets.sort_unstable();
    let total = offsets.len() as u64;
    assert_eq!(
        offsets,
        (0..total).collect::<Vec<_>>(),
        "unique and contiguous"
    );
    let segments = shard.segments();
    assert!(
        segments.len() > 5,
        "{} segments: rolls happened",
        segments.len()
    );
    let segment_of = |offset: u64| {
        segments
            .iter()
            .find(|s| s.extent.base_offset <= offset && offset < s.extent.next_offset)
            .map(|s| s.extent.id)
    };
    for (first, payloads) in &batches {
        let last = first + payloads.len() as u64 - 1;
        assert_eq!(
            segment_of(*first),
            segment_of(last),
            "batch at {first} split"
        );
    }
    let stats = shard.stats();
    assert!(stats.writes <= stats.appends, "{stats:?}");
    let check = |shard: &felix_storage::Shard| {
        for (first, payloads) in &batches {
            let got = shard.read(*first, u64::MAX, ReadBound::Committed).unwrap();
            for (k, p) in payloads.iter().enumerate() {
                assert_eq!(got[k].offset, first + k as u64);
                assert_eq!(got[k].payload, p.as_bytes());
            }
        }
    };
    check(&shard);
    drop(shard);
    check(&open(dir.path(), cfg()));
}
