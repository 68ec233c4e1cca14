//! loom models of the protocol between appenders, the pool's queue, its
//! workers and the completions: every interleaving of the threads (within
//! loom's preemption bound) is run, and loom fails a model on any deadlock,
//! which is how a lost wake-up shows.
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
use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

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
    /// The writer lock, a flag taken by compare-and-swap (waiters yield),
    /// so that the worker's `try_lock` is one attempt that never waits, as
    /// std's is (loom's own `try_lock` can leave the thread blocked on the
    /// mutex when another takes it meanwhile).
    writer_held: AtomicBool,
    /// The writer's end, read and written only while `writer_held` is ours.
    next: AtomicU64,
    /// The write-combining queue: one past the last offset assigned to a
    /// queued batch (the writer's end when nothing is queued).
    queue: Mutex<u64>,
    pool: SyncPool,
}

impl Shard {
    fn new(fail_syncs: usize) -> Arc<Self> {
        let file = Arc::new(FakeFile::default());
        file.fail.store(fail_syncs, SeqCst);
        let pool = SyncPool::new("loom".into(), 1);
        let commit = Commit::new(
            "loom".into(),
            true,
            0,
            FakeSync(Arc::clone(&file)),
            pool.clone(),
            8,
            Default::default(),
        );
        Arc::new(Self {
            commit,
            file,
            writer_held: AtomicBool::new(false),
            next: AtomicU64::new(0),
            queue: Mutex::new(0),
            pool,
        })
    }

    /// An append with a completion as the shard makes it: queued for the
    /// pending sync to write when one is pending, else written under the
    /// writer lock and the queue, with whatever is queued written first, as
    /// `WriterGuard` does: the queue stays locked until the writer is
    /// released, so no batch is queued behind a direct append. Returns the
    /// offset after it.
    fn append_completing(&self) -> u64 {
        if self.commit.sync_pending() {
            let mut assigned = self.queue.lock().unwrap();
            *assigned += 1;
            self.commit.set_assigned(*assigned);
            return *assigned;
        }
        self.lock_writer();
        let mut assigned = self.write_queue();
        *assigned += 1;
        let end = *assigned;
        self.publish(end);
        self.release_writer(assigned);
        end
    }

    /// The queue, taken with the writer lock held, after writing what it
    /// holds (and poking the pool for the waiters that covers).
    fn write_queue(&self) -> loom::sync::MutexGuard<'_, u64> {
        let assigned = self.queue.lock().unwrap();
        if *assigned > self.next.load(SeqCst) {
            self.publish(*assigned);
            self.commit.poke();
        }
        assigned
    }

    /// Releases the writer lock, then the queue, publishing the assignment
    /// first, as `WriterGuard`'s drop does.
    fn release_writer(&self, assigned: loom::sync::MutexGuard<'_, u64>) {
        self.commit.set_assigned(*assigned);
        self.unlock_writer();
        drop(assigned);
    }

    fn lock_writer(&self) {
        while !self.try_lock_writer() {
            loom::thread::yield_now();
        }
    }

    fn try_lock_writer(&self) -> bool {
        self.writer_held
            .compare_exchange(false, true, SeqCst, SeqCst)
            .is_ok()
    }

    fn unlock_writer(&self) {
        self.writer_held.store(false, SeqCst);
    }

    /// Records that the log is written up to `end` (writer lock held).
    fn publish(&self, end: u64) {
        self.next.store(end, SeqCst);
        self.file.written.store(end, SeqCst);
        self.commit.set_written(end);
    }
}

impl super::QueuedWrites for Shard {
    fn write_queued(&self) -> bool {
        if !self.try_lock_writer() {
            // The holder writes the queue (here: a direct append, a close).
            return false;
        }
        let assigned = self.write_queue();
        self.release_writer(assigned);
        true
    }
}

impl Shard {
    /// Writes one record; returns the offset after it.
    fn write(&self) -> u64 {
        self.lock_writer();
        let end = self.next.load(SeqCst) + 1;
        self.publish(end);
        self.unlock_writer();
        end
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
fn model_bounded(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
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
                let outcome = shard.commit.wait_durable_then(end, true, &|| Ok(()));
                shard.check_durable(end, &outcome);
                outcome.unwrap();
            })
        };
        let end = shard.write();
        let outcome = shard.commit.wait_durable_then(end, true, &|| Ok(()));
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

/// Two futures, the second appended while the first one's sync may be
/// pending (then queued, not written, for the worker to write before it
/// syncs): both complete exactly once, after a sync covered them; a
/// queued batch that nobody writes or syncs is a deadlock loom reports.
#[test]
fn loom_futures_queued_for_a_pending_sync_complete_durable() {
    model(|| {
        let shard = Shard::new(0);
        shard.commit.set_queued_writes(Arc::downgrade(&shard) as _);
        let appender = {
            let shard = Arc::clone(&shard);
            loom::thread::spawn(move || {
                let end = shard.append_completing();
                shard.await_durable(end).unwrap();
            })
        };
        let end = shard.append_completing();
        shard.await_durable(end).unwrap();
        appender.join().unwrap();
        assert_eq!(shard.commit.durable(), 2);
        shard.pool.shutdown();
    });
}

/// Two appends with a future and an admission on one thread, the second
/// made once the first one's future completed, and one on another: the
/// second may come while the other thread's sync is pending (queued for the
/// worker) or just after a sync finished (written directly, then synced
/// again). Every future completes once, after a sync covered it, and each
/// gives its place back before it is seen complete.
#[test]
fn loom_a_future_appended_again_after_its_sync_completes_durable() {
    fn rounds(shard: &Shard, n: usize) {
        for _ in 0..n {
            let admission = shard.commit.admit(true).unwrap();
            let end = shard.append_completing();
            let (slot, done) = Commit::future_slot();
            shard.commit.watch_durable(end, true, done, Some(admission));
            let outcome = loom::future::block_on(super::DurableFuture::new(slot));
            shard.check_durable(end, &outcome);
            outcome.unwrap();
        }
    }
    // Three appends and their syncs: two preemptions are 168 k interleavings
    // (13 s in release); three ran past 25 minutes.
    model_bounded(2, || {
        let shard = Shard::new(0);
        shard.commit.set_queued_writes(Arc::downgrade(&shard) as _);
        let other = {
            let shard = Arc::clone(&shard);
            loom::thread::spawn(move || rounds(&shard, 1))
        };
        rounds(&shard, 2);
        other.join().unwrap();
        assert_eq!(shard.commit.durable(), 3);
        assert_eq!(shard.commit.in_flight.taken(), 0);
        shard.pool.shutdown();
    });
}

/// A close as the shard makes one (the writer lock and the queue held
/// throughout: what is queued written, a wait for everything to be durable,
/// then the commit closed) while a first future's sync may be pending and
/// a second future's batch queued for the worker: the close returns and
/// both futures complete, durable or `Closed`. A worker that waited for the
/// writer lock to write the queue would never make the close's sync.
///
/// Main waits for the appender by a flag before joining: the close's
/// blocking wait may be unparked after it returned, and loom wakes a
/// thread blocked in `join` on such an unpark (std does not).
#[test]
fn loom_close_with_a_future_queued_for_the_worker_returns() {
    model(|| {
        let shard = Shard::new(0);
        shard.commit.set_queued_writes(Arc::downgrade(&shard) as _);
        let end = shard.append_completing();
        let (first, done) = Commit::future_slot();
        shard.commit.watch_durable(end, true, done, None);
        let finished = Arc::new(AtomicUsize::new(0));
        let appender = {
            let (shard, finished) = (Arc::clone(&shard), Arc::clone(&finished));
            loom::thread::spawn(move || {
                let end = shard.append_completing();
                let outcome = shard.await_durable(end);
                assert!(
                    matches!(outcome, Ok(()) | Err(StorageError::Closed { .. })),
                    "{outcome:?}"
                );
                finished.store(1, SeqCst);
            })
        };
        shard.lock_writer();
        let assigned = shard.write_queue();
        let outcome = shard.commit.wait_durable(u64::MAX);
        shard.check_durable(shard.next.load(SeqCst), &outcome);
        outcome.unwrap();
        shard.commit.close();
        shard.release_writer(assigned);
        while finished.load(SeqCst) == 0 {
            loom::thread::yield_now();
        }
        appender.join().unwrap();
        let outcome = first.get().expect("completed by its sync or the close");
        shard.check_durable(end, &outcome);
        assert!(
            matches!(outcome, Ok(()) | Err(StorageError::Closed { .. })),
            "{outcome:?}"
        );
        shard.pool.shutdown();
    });
}

/// A close while a future waits and a sync may be in flight: the future
/// completes (durable only once a sync covered it, or `Closed`), never
/// hangs; a wait that is no append's, registered after the close,
/// completes once, with `Closed`.
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
                    Err(StorageError::Closed { .. }) => {}
                    Err(other) => panic!("{other:?}"),
                }
            })
        };
        shard.commit.close();
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&runs);
        let done = Completion::Callback(Box::new(move |outcome: Result<(), StorageError>| {
            assert!(matches!(outcome, Err(StorageError::Closed { .. })));
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
                shard.commit.wait_durable_then(end, true, &|| Ok(()))
            })
        };
        let end = shard.write();
        let mine = shard.commit.wait_durable_then(end, true, &|| Ok(()));
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
