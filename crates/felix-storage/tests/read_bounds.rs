//! Reads end where the policy says records are acknowledged: the durable
//! offset under OnCommit, what is written otherwise; a read can ask for a
//! high watermark or for everything written, by name; `offsets()` is one
//! snapshot.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{config, open, records};
use felix_storage::{Durability, Offsets, ReadBound, Record};

/// Issue row 3: with OnCommit and another thread's append in flight, a read
/// returned records the durable offset did not cover yet (a consumer saw
/// 5,390 of 6,000 records before they were durable). Every record a read
/// returns must be below the durable offset read after it.
#[test]
fn read_on_commit_never_returns_a_record_past_the_durable_offset() {
    const APPENDERS: usize = 4;
    const PER_APPENDER: u64 = 150;
    let dir = tempfile::tempdir().unwrap();
    let shard = Arc::new(open(dir.path(), config(1 << 20, Durability::OnCommit)));
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (shard, done) = (Arc::clone(&shard), Arc::clone(&done));
        std::thread::spawn(move || {
            let (mut reads, mut seen) = (0u64, 0u64);
            while !done.load(Ordering::Relaxed) {
                let got = shard.read(0, u64::MAX, ReadBound::Committed).unwrap();
                let durable = shard.offsets().durable;
                if let Some(last) = got.last() {
                    assert!(
                        last.offset < durable,
                        "read offset {} with durable offset {durable}",
                        last.offset
                    );
                }
                seen = seen.max(got.len() as u64);
                reads += 1;
            }
            (reads, seen)
        })
    };
    let appenders: Vec<_> = (0..APPENDERS)
        .map(|t| {
            let shard = Arc::clone(&shard);
            std::thread::spawn(move || {
                for i in 0..PER_APPENDER {
                    shard
                        .append(&[Record::new(i, format!("{t}-{i}"))])
                        .wait()
                        .unwrap();
                }
            })
        })
        .collect();
    for a in appenders {
        a.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let (reads, _) = reader.join().unwrap();
    assert!(reads >= 1, "{reads} reads");
    let total = APPENDERS as u64 * PER_APPENDER;
    assert_eq!(
        shard.read(0, u64::MAX, ReadBound::Committed).unwrap().len() as u64,
        total
    );
}

#[test]
fn read_on_commit_sees_written_appends_once_durable_or_when_asked_for_written() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
    shard.append(&records(0, 2, 10)).wait().unwrap();
    shard.append(&records(2, 3, 10)).written().unwrap();
    assert_eq!(
        shard.offsets(),
        Offsets {
            base: 0,
            readable: 2,
            written: 5,
            durable: 2
        }
    );
    let offsets = |bound| {
        shard
            .read(0, u64::MAX, bound)
            .unwrap()
            .iter()
            .map(|r| r.offset)
            .collect::<Vec<_>>()
    };
    assert_eq!(offsets(ReadBound::Committed), [0, 1]);
    assert_eq!(shard.read(2, u64::MAX, ReadBound::Committed).unwrap(), []);
    // A leader serving followers before its own sync.
    assert_eq!(offsets(ReadBound::Written), [0, 1, 2, 3, 4]);
    // A high watermark, at most what is written.
    assert_eq!(offsets(ReadBound::Below(3)), [0, 1, 2]);
    assert_eq!(offsets(ReadBound::Below(99)), [0, 1, 2, 3, 4]);
    assert_eq!(offsets(ReadBound::Below(0)), Vec::<u64>::new());
    shard.wait_durable(5).wait().unwrap();
    assert_eq!(offsets(ReadBound::Committed), [0, 1, 2, 3, 4]);
    assert_eq!(
        shard.offsets(),
        Offsets {
            base: 0,
            readable: 5,
            written: 5,
            durable: 5
        }
    );
}

#[test]
fn read_without_on_commit_ends_at_what_appends_returned_for() {
    for durability in [
        Durability::None,
        Durability::Periodic(std::time::Duration::from_secs(3600)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let shard = open(dir.path(), config(1 << 20, durability));
        shard.append(&records(0, 3, 10)).wait().unwrap();
        assert_eq!(
            shard.offsets(),
            Offsets {
                base: 0,
                readable: 3,
                written: 3,
                durable: 0
            },
            "{durability:?}"
        );
        assert_eq!(
            shard.read(0, u64::MAX, ReadBound::Committed).unwrap().len(),
            3,
            "{durability:?}"
        );
    }
}

/// A bound below the end stops a read across segments at exactly that
/// offset, however the segments fall.
#[test]
fn read_below_a_high_watermark_stops_there_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    // 68-byte records, eight to a 600-byte segment.
    let shard = open(dir.path(), config(600, Durability::None));
    for i in 0..40 {
        shard.append(&records(i, 1, 40)).wait().unwrap();
    }
    assert!(shard.segments().len() >= 4, "{}", shard.segments().len());
    for hw in [1, 7, 8, 9, 23, 39, 40] {
        let got = shard.read(0, u64::MAX, ReadBound::Below(hw)).unwrap();
        assert_eq!(
            got.iter().map(|r| r.offset).collect::<Vec<_>>(),
            (0..hw).collect::<Vec<_>>(),
            "hw {hw}"
        );
        let from_middle = shard.read(hw / 2, u64::MAX, ReadBound::Below(hw)).unwrap();
        assert_eq!(from_middle.len() as u64, hw - hw / 2, "hw {hw}");
    }
}
