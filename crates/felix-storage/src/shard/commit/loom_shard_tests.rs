//! loom models of a real shard: [`Shard::append`] (the write-combining
//! queue and its leader), [`Append::submit`](crate::Append::submit) and
//! [`Append::then`](crate::Append::then) (an append written under [`WriterGuard`], or
//! queued for the pending sync), the sync pool's worker writing the queue
//! through [`QueuedWrites::write_queued`], and [`Shard::close`], all as a
//! shard runs them, on a simulated file system (`felix_io::sim`), whose
//! durable bytes are the truth each acknowledgement is checked against.
//! The writer lock, the queue, the commit state, the pool and the threads
//! are loom's here (`crate::loom`), so every interleaving of them (within
//! the preemption bound) runs, and a wait that nobody ends is a deadlock
//! loom reports.
//!
//! What each model asserts besides: an append acknowledged `Ok` has its
//! records in the file's durable bytes at that moment; each completion
//! runs exactly once; offsets are unique and contiguous; and every append
//! has completed when the threads are joined and the shard closed.
//!
//! The locks that stay `std`'s on these paths (the readers' view, the
//! simulated file system's state, the close's clean-shutdown record) are
//! held for a few steps with no loom operation inside, so no interleaving
//! finds one held. A read is another matter (it holds the view while it
//! loads the durable offset), so the models read nothing while others
//! write.
//!
//! [`WriterGuard`]: crate::shard::log::Log::lock_writer
//! [`QueuedWrites::write_queued`]: super::QueuedWrites::write_queued
#![expect(
    clippy::unwrap_used,
    reason = "a model's failure is a panic, which loom reports with its interleaving"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

use felix_format::record_encoded_len;
use felix_io::FileSystem;
use felix_io::sim::{CrashPlan, Fault, FaultEffect, FaultOp, SimFs};
use felix_segment::Record;
use loom::sync::atomic::AtomicUsize;

use super::loom_tests::model_bounded;
use crate::error::StorageError;
use crate::{AppendReceipt, Durability, Preallocation, Shard, StoreConfig};

/// A shard opened on a fresh simulated disk, on-commit, with one sync
/// worker, and what the checks need to know of its file.
struct Fixture {
    shard: Arc<Shard>,
    sim: SimFs,
    log: PathBuf,
    /// The log file's length before any record: its header.
    header_bytes: u64,
}

const DIR: &str = "/loom";

/// Every record's payload: one byte, so each record's encoded length is
/// the same and a length counts records.
const PAYLOAD: &str = "r";

impl Fixture {
    fn open() -> Self {
        let sim = SimFs::new();
        let config = StoreConfig {
            durability: Durability::OnCommit,
            preallocate: Preallocation::Off,
            sync_threads: 1,
            ..StoreConfig::default()
        };
        let shard = Shard::options(DIR)
            .file_system(FileSystem::new(sim.clone()))
            .config(config)
            .open()
            .unwrap();
        let log = Path::new(DIR).join(format!("{:020}.log", 0));
        let header_bytes = sim.read_file(&log).unwrap().len() as u64;
        Self {
            shard: Arc::new(shard),
            sim,
            log,
            header_bytes,
        }
    }

    /// How many records the log file holds durably: what a power loss now
    /// would leave.
    fn durable_records(&self) -> u64 {
        let disk = self.sim.crash(&CrashPlan::durable_only());
        let len = disk.read_file(&self.log).map_or(0, |b| b.len() as u64);
        len.saturating_sub(self.header_bytes) / record_encoded_len(PAYLOAD.len() as u32)
    }

    /// Checks an acknowledgement of `receipt`: its records are durable.
    fn check_acked(&self, receipt: &AppendReceipt) {
        let durable = self.durable_records();
        assert!(
            durable > receipt.last_offset,
            "offset {} acknowledged with {durable} records durable",
            receipt.last_offset
        );
    }

    /// Lowers the write-combining leader's rounds to one, so that a
    /// leader hands over whenever a batch queued during its write.
    fn hand_over_every_round(&self) {
        self.shard.core().log().set_max_lead_rounds(1);
    }
}

fn batch() -> [Record; 1] {
    [Record::new(0, PAYLOAD)]
}

/// A blocking append through the real path, checked on its return.
fn append(fixture: &Fixture) -> AppendReceipt {
    let receipt = fixture.shard.append(&batch()).wait().unwrap();
    fixture.check_acked(&receipt);
    receipt
}

/// An append with a future, awaited and checked when it resolves.
fn submit_and_await(fixture: &Fixture) -> AppendReceipt {
    let future = fixture.shard.append(&batch()).submit().unwrap();
    let receipt = loom::future::block_on(future).unwrap();
    fixture.check_acked(&receipt);
    receipt
}

/// Offsets handed out: unique, from 0 and contiguous.
fn assert_contiguous(mut firsts: Vec<u64>) {
    firsts.sort_unstable();
    assert_eq!(firsts, (0..firsts.len() as u64).collect::<Vec<_>>());
}

/// Two blocking appenders through the write-combining queue, each leader
/// handing over after one round: each returns once its records are durable
/// on the disk, at unique offsets. A batch queued with no leader to write
/// it, a hand-over to an owner that is not woken, or a worker waiting for
/// a sync nobody asked for is a deadlock loom reports.
#[test]
fn loom_shard_two_blocking_appends_combine_and_complete_durable() {
    model_bounded(3, || {
        let fixture = Arc::new(Fixture::open());
        fixture.hand_over_every_round();
        let other = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || append(&fixture).first_offset)
        };
        let mine = append(&fixture).first_offset;
        let theirs = other.join().unwrap();
        assert_contiguous(vec![mine, theirs]);
        fixture.shard.close().unwrap();
        assert_eq!(fixture.durable_records(), 2);
    });
}

/// Two appends with a future on two threads: the second may find the
/// first one's sync pending and queue its batch for the worker (which
/// writes it through `write_queued`, unless an append holding the writer
/// lock writes it first), or be written under `WriterGuard` by its own
/// thread. Both resolve once durable on the disk; a queued batch that
/// nobody writes or syncs is a deadlock loom reports.
#[test]
fn loom_shard_futures_queued_for_a_pending_sync_complete_durable() {
    model_bounded(2, || {
        let fixture = Arc::new(Fixture::open());
        let other = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || submit_and_await(&fixture).first_offset)
        };
        let mine = submit_and_await(&fixture).first_offset;
        let theirs = other.join().unwrap();
        assert_contiguous(vec![mine, theirs]);
        assert_eq!(fixture.shard.core().commit().durable(), 2);
        fixture.shard.close().unwrap();
    });
}

/// A blocking append (through the queue and its leader) and an append
/// with a future (queued for the worker, or written under `WriterGuard`)
/// at once: the guard writes what the queue holds before its own batch,
/// so offsets stay unique and both complete, durable.
#[test]
fn loom_shard_blocking_and_future_appends_share_the_queue() {
    model_bounded(2, || {
        let fixture = Arc::new(Fixture::open());
        let other = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || append(&fixture).first_offset)
        };
        let mine = submit_and_await(&fixture).first_offset;
        let theirs = other.join().unwrap();
        assert_contiguous(vec![mine, theirs]);
        fixture.shard.close().unwrap();
        assert_eq!(fixture.durable_records(), 2);
    });
}

/// Two appends with a future on one thread, the second made once the
/// first resolved, and one on another: the second may come while the other
/// thread's sync is pending (queued for the worker, which may be keeping
/// the shard for its next turn) or just after a sync finished (written
/// directly, then synced again). Every future resolves once, durable on
/// the disk, and each gives its place in flight back.
#[test]
fn loom_shard_a_future_appended_again_after_its_sync_completes_durable() {
    model_bounded(2, || {
        let fixture = Arc::new(Fixture::open());
        let other = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || submit_and_await(&fixture).first_offset)
        };
        let mut firsts = vec![submit_and_await(&fixture).first_offset];
        firsts.push(submit_and_await(&fixture).first_offset);
        firsts.push(other.join().unwrap());
        assert_contiguous(firsts);
        assert_eq!(fixture.shard.core().commit().durable(), 3);
        assert_eq!(fixture.shard.core().commit().in_flight.taken(), 0);
        fixture.shard.close().unwrap();
    });
}

/// An append with a callback and a blocking one: the callback runs once,
/// on the dispatch thread, after a sync covered its records, and before
/// the close returns.
#[test]
fn loom_shard_callback_runs_once_after_its_sync() {
    model_bounded(2, || {
        let fixture = Arc::new(Fixture::open());
        let runs = Arc::new(AtomicUsize::new(0));
        let other = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || append(&fixture).first_offset)
        };
        let checked = Arc::clone(&fixture);
        let counted = Arc::clone(&runs);
        let mine = fixture
            .shard
            .append(&batch())
            .then(move |outcome| {
                checked.check_acked(&outcome.unwrap());
                counted.fetch_add(1, SeqCst);
            })
            .unwrap()
            .first_offset;
        let theirs = other.join().unwrap();
        assert_contiguous(vec![mine, theirs]);
        fixture.shard.close().unwrap();
        assert_eq!(runs.load(SeqCst), 1);
    });
}

/// A close (the writer lock and the queue held throughout: what is queued
/// written, a wait for everything to be durable, the clean-shutdown file,
/// then the commit closed) while a first future's sync may be pending and
/// a second append with a future is queued for the worker, written, or
/// refused as closed: the close returns `Ok`, and each future resolves
/// once, durable on the disk or `ShardClosed`. A worker that waited for the
/// writer lock to write the queue would never make the close's sync.
#[test]
fn loom_shard_close_with_a_future_queued_for_the_worker_returns() {
    model_bounded(3, || {
        let fixture = Arc::new(Fixture::open());
        let first = fixture.shard.append(&batch()).submit().unwrap();
        let appender = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || {
                let outcome = fixture
                    .shard
                    .append(&batch())
                    .submit()
                    .and_then(loom::future::block_on);
                match outcome {
                    Ok(receipt) => fixture.check_acked(&receipt),
                    Err(StorageError::ShardClosed { .. }) => {}
                    Err(other) => panic!("{other:?}"),
                }
            })
        };
        fixture.shard.close().unwrap();
        match loom::future::block_on(first) {
            Ok(receipt) => fixture.check_acked(&receipt),
            Err(StorageError::ShardClosed { .. }) => {}
            Err(other) => panic!("{other:?}"),
        }
        appender.join().unwrap();
    });
}

/// The first sync after the open fails: both blocking appenders fail with
/// that sync's own error (or, one that comes after the failure, with
/// `Poisoned`, naming it), none is acknowledged, and nothing past the
/// open's state is durable.
#[test]
fn loom_shard_failed_sync_fails_every_append_it_covered() {
    model_bounded(3, || {
        let fixture = Arc::new(Fixture::open());
        fixture.sim.inject(Fault {
            op: FaultOp::SyncFile,
            path_contains: ".log".into(),
            skip: 0,
            effect: FaultEffect::SyncFailKeep(5),
        });
        let other = {
            let fixture = Arc::clone(&fixture);
            loom::thread::spawn(move || fixture.shard.append(&batch()).wait())
        };
        let mine = fixture.shard.append(&batch()).wait();
        let theirs = other.join().unwrap();
        let failed = [&mine, &theirs]
            .iter()
            .filter(|o| matches!(o, Err(StorageError::Segment { .. })))
            .count();
        assert!(failed >= 1, "{mine:?} {theirs:?}");
        for outcome in [mine, theirs] {
            assert!(
                matches!(
                    outcome,
                    Err(StorageError::Segment { .. } | StorageError::Poisoned { .. })
                ),
                "{outcome:?}"
            );
        }
        assert_eq!(fixture.durable_records(), 0);
        assert_eq!(fixture.shard.core().commit().durable(), 0);
        let _ = fixture.shard.close();
    });
}
