//! When `Append::submit` returns, the batch has its offsets; under
//! `OnCommit` with a sync of the shard pending it is only queued, not yet
//! written, and a leader serving `ReadBound::Written` waits for it with
//! `wait_readable`. It is written, at the latest, when its future resolves;
//! with no sync pending, and under the other durabilities, it is written
//! on return. These are the statements of `Append::submit`'s docs, the
//! README and docs/broker-contract.md.

mod common;

use std::time::Duration;

use common::exec::block_on;
use common::gated::GatedFs;
use common::{config, records};
use felix_io::OsFs;
use felix_storage::{Durability, ReadBound, Shard, Tail};

fn offsets_read(shard: &Shard, from: u64, bound: ReadBound) -> Vec<u64> {
    shard
        .read(from, u64::MAX, bound)
        .unwrap()
        .iter()
        .map(|r| r.offset)
        .collect()
}

#[test]
fn a_submitted_append_while_a_sync_is_pending_is_queued_until_the_next_sync() {
    let dir = tempfile::tempdir().unwrap();
    let fs = GatedFs::new(OsFs);
    let shard = Shard::options(dir.path())
        .config(config(1 << 20, Durability::OnCommit))
        .file_system(fs.handle())
        .open()
        .unwrap();
    fs.close_gate();
    // No sync pending: written by this call, then its sync holds at the gate.
    let first = shard.append(&records(0, 1, 10)).submit().unwrap();
    assert_eq!(shard.offsets().written, 1, "written on return");
    fs.await_waiting(1);
    // A sync pending: queued with its offsets, not written yet.
    let second = shard.append(&records(1, 2, 10)).submit().unwrap();
    let receipt = second.receipt();
    assert_eq!((receipt.first_offset, receipt.last_offset), (1, 2));
    assert_eq!(shard.offsets().written, 1, "queued, not written");
    assert_eq!(offsets_read(&shard, 0, ReadBound::Written), [0]);
    assert_eq!(
        shard
            .wait_readable(1, ReadBound::Written)
            .wait_timeout(Duration::from_millis(50))
            .unwrap(),
        Tail::TimedOut { end: 1 }
    );
    // The worker writes it just before the next sync, and wakes the wait.
    fs.open_gate();
    assert!(matches!(
        shard
            .wait_readable(1, ReadBound::Written)
            .wait_timeout(Duration::from_secs(10))
            .unwrap(),
        Tail::Readable { end: 3 }
    ));
    assert_eq!(offsets_read(&shard, 1, ReadBound::Written), [1, 2]);
    assert_eq!(block_on(first).unwrap().last_offset, 0);
    assert_eq!(block_on(second).unwrap(), receipt);
    let offsets = shard.offsets();
    assert_eq!((offsets.written, offsets.durable), (3, 3));
    shard.close().unwrap();
}

/// Many appends in flight under `OnCommit`: each future resolves only once
/// its batch is written (and durable).
#[test]
fn a_submitted_append_future_resolves_once_its_batch_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let shard = common::open(dir.path(), config(1 << 20, Durability::OnCommit));
    let mut pending = std::collections::VecDeque::new();
    for i in 0..2_000 {
        pending.push_back(shard.append(&records(i, 1, 16)).submit().unwrap());
        if pending.len() == 64 {
            let receipt = block_on(pending.pop_front().unwrap()).unwrap();
            let offsets = shard.offsets();
            assert!(offsets.written > receipt.last_offset, "{offsets:?}");
            assert!(offsets.durable > receipt.last_offset, "{offsets:?}");
        }
    }
    for append in pending {
        let receipt = block_on(append).unwrap();
        assert!(shard.offsets().written > receipt.last_offset);
    }
    assert_eq!(shard.offsets().written, 2_000);
    shard.close().unwrap();
}

/// Under `None` and `Periodic` the batch is in the file on return, always.
#[test]
fn a_submitted_append_without_on_commit_is_written_on_return() {
    for durability in [
        Durability::None,
        Durability::Periodic(Duration::from_millis(1)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let shard = common::open(dir.path(), config(1 << 20, durability));
        for i in 0..2_000 {
            let append = shard.append(&records(i, 1, 16)).submit().unwrap();
            assert_eq!(
                shard.offsets().written,
                append.receipt().last_offset + 1,
                "{durability:?}"
            );
            assert_eq!(
                offsets_read(&shard, i, ReadBound::Written),
                [i],
                "{durability:?}"
            );
        }
        shard.close().unwrap();
    }
}
