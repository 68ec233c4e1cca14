//! `Shard::close`: everything durable, the clean-shutdown file written, the
//! lock released; afterwards every call on any handle fails with
//! `ShardClosed`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{config, open, records};
use felix_storage::{Durability, ReadBound, StorageError};

fn is_closed<T: std::fmt::Debug>(result: Result<T, StorageError>) -> bool {
    match result {
        Err(StorageError::ShardClosed { shard }) => &*shard == "test-shard",
        other => panic!("{other:?}"),
    }
}

#[test]
fn close_makes_every_call_on_every_handle_fail_with_closed() {
    let dir = tempfile::tempdir().unwrap();
    let shard = Arc::new(open(dir.path(), config(1 << 20, Durability::None)));
    let other_handle = Arc::clone(&shard);
    shard.append(&records(0, 3, 10)).wait().unwrap();
    shard.close().unwrap();
    // Durable before the lock was released.
    assert_eq!(shard.offsets().durable, 3);
    let h = &other_handle;
    assert!(is_closed(h.append(&records(3, 1, 10)).wait()));
    assert!(is_closed(h.append(&records(3, 1, 10)).written()));
    assert!(is_closed(h.read(0, 100, ReadBound::Committed)));
    assert!(is_closed(h.read(0, 100, ReadBound::Written)));
    assert!(is_closed(h.read_replicated(0, 100, ReadBound::Written)));
    assert!(is_closed(
        h.wait_readable(0, ReadBound::Committed)
            .wait_timeout(Duration::ZERO)
    ));
    assert!(is_closed(h.wait_durable(3).wait()));
    assert!(is_closed(h.sync()));
    assert!(is_closed(h.close()));
    assert!(is_closed(h.apply_retention()));
    assert!(is_closed(h.truncate_to(1)));
    assert!(is_closed(h.reset_to(9)));
    assert!(is_closed(h.begin_generation(1)));
    assert!(is_closed(h.append_replicated(&[])));
}

/// The same directory opens again in the same process while handles to the
/// closed shard are still held (issue row 2, for a bare shard).
#[test]
fn close_releases_the_lock_so_the_directory_reopens_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
    shard.append(&records(0, 2, 10)).wait().unwrap();
    let locked = felix_storage::Shard::options(dir.path())
        .open()
        .unwrap_err();
    assert!(
        matches!(locked, StorageError::ShardLocked { .. }),
        "{locked:?}"
    );
    shard.close().unwrap();
    let reopened = open(dir.path(), config(1 << 20, Durability::OnCommit));
    assert_eq!(common::read_all(&reopened, 0).len(), 2);
    // The clean-shutdown file made the reopen trust the sealed segments.
    assert!(
        reopened
            .stats()
            .notes
            .iter()
            .any(|n| matches!(n, felix_storage::recovery::Note::CleanShutdownUsed { .. })),
        "{:?}",
        reopened.stats().notes
    );
    drop(shard);
    reopened.append(&records(2, 1, 10)).wait().unwrap();
}

/// Closing a poisoned shard reports the failure, and still closes it and
/// releases its lock, so the directory can be recovered at once.
#[test]
fn close_of_a_poisoned_shard_still_releases_it_and_reports_the_failure() {
    use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
    let sim = SimFs::new();
    let open_sim = || {
        felix_storage::Shard::options(std::path::Path::new("/shard"))
            .file_system(felix_storage::io::FileSystem::new(sim.clone()))
            .config(config(1 << 20, Durability::OnCommit))
            .label("test-shard")
            .open()
    };
    let shard = open_sim().unwrap();
    shard.append(&records(0, 1, 10)).wait().unwrap();
    sim.inject(Fault {
        op: FaultOp::SyncFile,
        path_contains: ".log".into(),
        skip: 0,
        effect: FaultEffect::SyncFailKeep(5),
    });
    shard.append(&records(1, 1, 10)).wait().unwrap_err();
    let err = shard.close().unwrap_err();
    assert!(matches!(err, StorageError::Poisoned { .. }), "{err:?}");
    assert!(is_closed(shard.read(0, 10, ReadBound::Committed)));
    // Released: a reopen (recovery) works while the old handle lives.
    let reopened = open_sim().unwrap();
    assert_eq!(common::read_all(&reopened, 0).first().map(|r| r.0), Some(0));
}

/// On-commit appends from four threads race a close, 40 times over: each
/// append returns its offsets or `ShardClosed`, and after the reopen the log
/// holds exactly the records of the appends that returned offsets. A close
/// syncs everything written before it marks the shard closed, so an append
/// it made durable is acknowledged, never told `ShardClosed` (whose caller would
/// append it again).
#[test]
fn an_append_racing_a_close_is_acknowledged_exactly_when_its_records_are_kept() {
    for round in 0..40 {
        let dir = tempfile::tempdir().unwrap();
        let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
        let acknowledged: Vec<Vec<u64>> = std::thread::scope(|scope| {
            let appenders: Vec<_> = (0..4u64)
                .map(|t| {
                    let shard = &shard;
                    scope.spawn(move || {
                        let mut acked = Vec::new();
                        for i in 0..1_000u64 {
                            let payload = (t * 1_000 + i).to_be_bytes().to_vec();
                            match shard
                                .append(&[felix_storage::Record::new(0, payload)])
                                .wait()
                            {
                                Ok(receipt) => acked.push(receipt.first_offset),
                                Err(StorageError::ShardClosed { .. }) => break,
                                Err(other) => panic!("round {round}: {other}"),
                            }
                        }
                        acked
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(2));
            shard.close().unwrap();
            appenders.into_iter().map(|a| a.join().unwrap()).collect()
        });
        let mut acked: Vec<u64> = acknowledged.concat();
        acked.sort_unstable();
        let reopened = open(dir.path(), config(1 << 20, Durability::OnCommit));
        let kept: Vec<u64> = common::read_all(&reopened, 0).iter().map(|r| r.0).collect();
        assert_eq!(kept, acked, "round {round}");
    }
}
