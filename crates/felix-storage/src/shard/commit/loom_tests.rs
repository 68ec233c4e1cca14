//! loom models of group commit on its own: appenders, the pool's queue,
//! its workers and the completions, against a fake file that records how
//! far it is written and synced. Every interleaving of the threads (within
//! loom's preemption bound) is run, and loom fails a model on any
//! deadlock, which is how a lost wake-up shows. The writer here is a loom
//! mutex over the log's end; the real one, with the write-combining queue,
//! `WriterGuard` and the worker's `write_queued`, is modelled in
//! `loom_shard_tests.rs`, on a real shard.
//!
//! What each model asserts besides: no completion is `Ok` before a sync
//! that covers it has returned (the fake file's durable length is checked
//! at the moment of completion), none completes twice (callbacks count
//! their runs), and none is left pending once the shard closes, stops or
//! fails (every one has completed when the threads are joined).
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p felix-storage --lib --release
//! --target-dir target/loom loom` (`.ci/run` runs it).
#![expect(
    clippy::unwrap_used,
    reason = "a model's failure is a panic, which loom reports with its interleaving"
)]

use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

use loom::sync::Mutex;
use loom::sync::atomic::{AtomicU64, AtomicUsize};

use super::{Commit, Completion, SyncData};
use crate::error::StorageError;
use crate::pool::SyncPool;

/// A file that remembers how far it is written and how far synced.
#[derive(Debug, Default)]
struct FakeFile {
    written: AtomicU64,
    durable: AtomicU64,
    /// Syncs that fail: the first `fail` calls.
    fail: AtomicUsize,
}

#[derive(Debug, Clone)]
struct FakeSync(Arc<FakeFile>);

impl SyncData for FakeSync {
    fn sync_data(&self) -> felix_segment::Result<()> {
        if self
            .0
            .fail
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(felix_segment::SegmentError::Io(felix_io::IoError::new(
                "fdatasync",
                std::path::Path::new("fake.log"),
                std::io::Error::from_raw_os_error(5),
            )));
        }
        self.0
            .durable
            .fetch_max(self.0.written.load(SeqCst), SeqCst);
        Ok(())
    }
}

#[derive(Debug)]
struct Shard {
    commit: Arc<Commit>,
    file: Arc<FakeFile>,
    /// The writer lock, over the log's end.
    writer: Mutex<u64>,
    pool: SyncPool,
}

impl Shard {
    fn new(fail_syncs: usize) -> Arc<Self> {
        let file = Arc::new(FakeFile::default());
        file.fail.store(fail_syncs, SeqCst);
        let pool = SyncPool::new("loom".into(), 1);
        let commit = Commit::new(
            "loom".into(),
            crate::Durability::OnCommit,
            0,
            FakeSync(Arc::clone(&file)),
            pool.clone(),
            8,
            Default::default(),
        );
        Arc::new(Self {
            commit,
            file,
            writer: Mutex::new(0),
            pool,
        })
    }

    /// Writes one record; returns the offset after it.
    fn write(&self) -> u64 {
        let mut next = self.writer.lock().unwrap();
        *next += 1;
        self.file.written.store(*next, SeqCst);
        self.commit.set_written(*next);
        *next
    }

    /// Waits on a future for everything below `end` to be durable, and
    /// checks what it reports.
    fn await_durable(&self, end: u64) -> Result<(), StorageError> {
        let (slot, done) = Commit::future_slot();
        self.commit.watch_durable(end, true, done, None);
        let outcome = loom::future::block_on(super::DurableFuture::new(slot));
        self.check_durable(end, &outcome);
        outcome
    }

    /// Checks a completion that reports records below `end` durable.
    fn check_durable(&self, end: u64, outcome: &Result<(), StorageError>) {
        if outcome.is_ok() {
            assert!(
                self.file.durable.load(SeqCst) >= end,
                "completed before a sync covered {end}"
            );
        }
    }
}

/// Runs `f` under every interleaving loom explores with up to
/// `PREEMPTIONS` preemptions (the bound loom's authors recommend: most
/// concurrency bugs need two or three), and prints how many it ran.
fn model(f: impl Fn() + Sync + Send + 'static) {
    const PREEMPTIONS: usize = 3;
    model_bounded(PREEMPTIONS, f);
}

/// [`model`] with `preemptions` at most: for a model with more steps, whose
/// runs at three would take CI tens of minutes.
pub(super) fn model_bounded(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.check(move || {
        counted.fetch_add(1, SeqCst);
        f();
    });
    println!(
        "{} interleavings ({preemptions} preemptions at most)",
        runs.load(SeqCst)
    );
}

/// Two blocking appenders and the pool's worker: both complete, durable.
/// A lost wake-up (an appender parked that nobody unparks, or a shard
/// queued that no worker takes) is a deadlock loom reports.
#[test]
fn loom_two_blocking_appenders_both_complete_durable() {
    model(|| {
        let shard = Shard::new(0);
        let other = {
            let shard = Arc::clone(&shard);
            loom::thread::spawn(move || {
                let end = shard.write();
                let outcome = shard.commit.wait_durable_with(end, true, &|| Ok(()));
                shard.check_durable(end, &outcome);
                outcome.unwrap();
            })
        };
        let end = shard.write();
        let outcome = shard.commit.wait_durable_with(end, true, &|| Ok(()));
        shard.check_durable(end, &outcome);
        outcome.unwrap();
        other.join().unwrap();
        shard.pool.shutdown();
    });
}

/// A future and a callback registered while the worker syncs: each
/// completes exactly once, after a sync covered it.
#[test]
fn loom_future_and_callback_complete_once_after_their_sync() {
    model(|| {
        let shard = Shard::new(0);
        let runs = Arc::new(AtomicUsize::new(0));
        let appender = {
            let shard = Arc::clone(&shard);
            loom::thread::spawn(move || {
                let end = shard.write();
                shard.await_durable(end).unwrap();
            })
        };
        let end = shard.write();
        let checked = Arc::clone(&shard);
        let counted = Arc::clone(&runs);
        let done = Completion::Callback(Box::new(move |outcome: Result<(), StorageError>| {
            checked.check_durable(end, &outcome);
            outcome.unwrap();
            counted.fetch_add(1, SeqCst);
        }));
        shard.commit.watch_durable(end, true, done, None);
        appender.join().unwrap();
        // The pool is shut down only once the callback ran (a store closes
        // its shards first; this shard is not closed).
        while runs.load(SeqCst) == 0 {
            loom::thread::yield_now();
        }
        shard.pool.shutdown();
        assert_eq!(runs.load(SeqCst), 1);
    });
}

/// A close while a future waits and a sync may be in flight: the future
/// completes (durable only once a sync covered it, or `ShardClosed`), never
/// hangs; a wait that is no append's, registered after the close,
/// completes once, with `ShardClosed`.
#[test]
fn loom_close_leaves_no_completion_pending() {
    model(|| {
        let shard = Shard::new(0);
        let appender = {
            let shard = Arc::clone(&shard);
            loom::thread::spawn(move || {
                let end = shard.write();
                let outcome = shard.await_durable(end);
                match outcome {
                    Ok(()) => assert!(shard.commit.durable() >= end, "durable before its sync"),
                    Err(StorageError::ShardClosed { .. }) => {}
                    Err(other) => panic!("{other:?}"),
                }
            })
        };
        shard.commit.close();
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&runs);
        let done = Completion::Callback(Box::new(move |outcome: Result<(), StorageError>| {
            assert!(matches!(outcome, Err(StorageError::ShardClosed { .. })));
            counted.fetch_add(1, SeqCst);
        }));
        shard.commit.watch_durable(1, false, done, None);
        appender.join().unwrap();
        shard.pool.shutdown();
        assert_eq!(runs.load(SeqCst), 1);
    });
}

/// A failed sync: both appenders complete with the failure itself (not
/// `Poisoned`), or `Ok` if a sync covered them first (only possible for
/// none here: the first sync fails), and the durable offset stays 0.
#[test]
fn loom_failed_sync_fails_every_waiter_it_covered() {
    model(|| {
        let shard = Shard::new(1);
        let other = {
            let shard = Arc::clone(&shard);
            loom::thread::spawn(move || {
                let end = shard.write();
                shard.commit.wait_durable_with(end, true, &|| Ok(()))
            })
        };
        let end = shard.write();
        let mine = shard.commit.wait_durable_with(end, true, &|| Ok(()));
        let theirs = other.join().unwrap();
        for outcome in [mine, theirs] {
            assert!(
                matches!(outcome, Err(StorageError::Segment { .. })),
                "{outcome:?}"
            );
        }
        assert_eq!(shard.commit.durable(), 0);
        shard.pool.shutdown();
    });
}
