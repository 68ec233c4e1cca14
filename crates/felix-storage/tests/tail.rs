//! Following the tail without polling: a wait returns when the append or
//! sync that makes records readable happens, at its timeout, or at once on
//! poison (a typed outcome) and close (an error).

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{config, open, records};
use felix_io::FileSystem;
use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_storage::{Durability, ReadBound, Shard, StorageError, Tail};

const LONG: Duration = Duration::from_secs(30);

#[test]
fn wait_readable_returns_at_once_when_records_are_readable() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
    shard.append(&records(0, 3, 10)).wait().unwrap();
    assert_eq!(
        shard
            .wait_readable(1, ReadBound::Committed)
            .wait_timeout(LONG)
            .unwrap(),
        Tail::Readable { end: 3 }
    );
    assert_eq!(
        shard
            .wait_readable(3, ReadBound::Committed)
            .wait_timeout(Duration::from_millis(20))
            .unwrap(),
        Tail::TimedOut { end: 3 }
    );
    assert_eq!(
        shard
            .wait_readable(2, ReadBound::Below(2))
            .wait_timeout(LONG)
            .unwrap(),
        Tail::BoundReached { bound: 2 }
    );
}

#[test]
fn wait_readable_is_woken_by_the_append_that_makes_a_record_readable() {
    for durability in [Durability::None, Durability::OnCommit] {
        let dir = tempfile::tempdir().unwrap();
        let shard = Arc::new(open(dir.path(), config(1 << 20, durability)));
        let producer = {
            let shard = Arc::clone(&shard);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                shard.append(&records(0, 2, 10)).wait().unwrap();
            })
        };
        let started = Instant::now();
        let tail = shard
            .wait_readable(0, ReadBound::Committed)
            .wait_timeout(LONG)
            .unwrap();
        assert_eq!(tail, Tail::Readable { end: 2 }, "{durability:?}");
        assert!(started.elapsed() < LONG / 2, "woken, not timed out");
        assert_eq!(
            shard.read(0, u64::MAX, ReadBound::Committed).unwrap().len(),
            2
        );
        producer.join().unwrap();
    }
}

/// Under OnCommit a committed wait ends with the sync, not the write: an
/// `Append::written` batch is written but not readable until `wait_durable`.
#[test]
fn wait_readable_on_commit_is_woken_by_the_sync_not_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let shard = Arc::new(open(dir.path(), config(1 << 20, Durability::OnCommit)));
    shard.append(&records(0, 1, 10)).written().unwrap();
    assert_eq!(
        shard
            .wait_readable(0, ReadBound::Committed)
            .wait_timeout(Duration::from_millis(30))
            .unwrap(),
        Tail::TimedOut { end: 0 }
    );
    // What is written is there for a leader serving followers.
    assert_eq!(
        shard
            .wait_readable(0, ReadBound::Written)
            .wait_timeout(LONG)
            .unwrap(),
        Tail::Readable { end: 1 }
    );
    let syncer = {
        let shard = Arc::clone(&shard);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            shard.wait_durable(1).wait().unwrap();
        })
    };
    assert_eq!(
        shard
            .wait_readable(0, ReadBound::Committed)
            .wait_timeout(LONG)
            .unwrap(),
        Tail::Readable { end: 1 }
    );
    syncer.join().unwrap();
}

/// A consumer that waits and then reads never makes an empty read, across
/// many appends and segment rolls.
#[test]
fn a_tail_follower_reads_every_record_once_and_never_reads_nothing() {
    const RECORDS: u64 = 3_000;
    for durability in [Durability::None, Durability::OnCommit] {
        let dir = tempfile::tempdir().unwrap();
        let shard = Arc::new(open(dir.path(), config(8 * 1024, durability)));
        let producer = {
            let shard = Arc::clone(&shard);
            std::thread::spawn(move || {
                for i in 0..RECORDS {
                    shard.append(&records(i, 1, 30)).wait().unwrap();
                }
            })
        };
        let (mut next, mut waits) = (0u64, 0u64);
        while next < RECORDS {
            match shard
                .wait_readable(next, ReadBound::Committed)
                .wait_timeout(LONG)
                .unwrap()
            {
                Tail::Readable { end } => assert!(end > next),
                other => panic!("{durability:?}: {other:?}"),
            }
            waits += 1;
            let got = shard.read(next, 64 * 1024, ReadBound::Committed).unwrap();
            assert!(!got.is_empty(), "{durability:?}: an empty read at {next}");
            for r in got {
                assert_eq!(
                    (r.offset, r.payload.to_vec()),
                    (next, common::payload(next, 30))
                );
                next += 1;
            }
        }
        producer.join().unwrap();
        assert!(shard.segments().len() > 1, "{durability:?}");
        assert!(waits <= RECORDS, "{durability:?}: {waits} waits");
    }
}

#[test]
fn wait_readable_returns_at_once_on_poison_and_close() {
    let sim = SimFs::new();
    let shard = Arc::new(
        Shard::options(Path::new("/shard"))
            .file_system(FileSystem::new(sim.clone()))
            .config(config(1 << 20, Durability::OnCommit))
            .open()
            .unwrap(),
    );
    shard.append(&records(0, 1, 10)).wait().unwrap();
    let waiter = {
        let shard = Arc::clone(&shard);
        std::thread::spawn(move || {
            shard
                .wait_readable(1, ReadBound::Committed)
                .wait_timeout(LONG)
        })
    };
    std::thread::sleep(Duration::from_millis(30));
    sim.inject(Fault {
        op: FaultOp::SyncFile,
        path_contains: ".log".into(),
        skip: 0,
        effect: FaultEffect::SyncFailKeep(5),
    });
    let started = Instant::now();
    shard.append(&records(1, 1, 10)).wait().unwrap_err();
    // Nothing acknowledged past offset 1 will ever be readable: the waiter
    // is told at once, and so is a wait under any bound. (A wait for what is
    // written could have seen record 1 while it was written, before its
    // sync failed: that is what that bound is for.)
    assert_eq!(waiter.join().unwrap().unwrap(), Tail::Poisoned { end: 1 });
    assert!(started.elapsed() < LONG / 2);
    for bound in [ReadBound::Written, ReadBound::Below(9)] {
        assert_eq!(
            shard.wait_readable(1, bound).wait_timeout(LONG).unwrap(),
            Tail::Poisoned { end: 1 },
            "{bound:?}"
        );
    }
    assert_eq!(
        shard
            .wait_readable(0, ReadBound::Committed)
            .wait_timeout(LONG)
            .unwrap(),
        Tail::Readable { end: 1 }
    );
    assert_eq!(
        shard
            .wait_readable(1, ReadBound::Committed)
            .wait_timeout(LONG)
            .unwrap(),
        Tail::Poisoned { end: 1 }
    );

    let dir = tempfile::tempdir().unwrap();
    let shard = Arc::new(open(dir.path(), config(1 << 20, Durability::OnCommit)));
    let waiter = {
        let shard = Arc::clone(&shard);
        std::thread::spawn(move || {
            shard
                .wait_readable(0, ReadBound::Committed)
                .wait_timeout(LONG)
        })
    };
    std::thread::sleep(Duration::from_millis(30));
    let started = Instant::now();
    shard.close().unwrap();
    let err = waiter.join().unwrap().unwrap_err();
    assert!(matches!(err, StorageError::ShardClosed { .. }), "{err:?}");
    assert!(started.elapsed() < LONG / 2);
    let after = shard
        .wait_readable(0, ReadBound::Committed)
        .wait_timeout(LONG)
        .unwrap_err();
    assert!(
        matches!(after, StorageError::ShardClosed { .. }),
        "{after:?}"
    );
}
