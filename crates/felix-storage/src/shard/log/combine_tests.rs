//! Write combining and the writer lock's guard, as a shard runs them:
//! the queue written by whoever holds the lock, leaders handing over, and
//! a panic under the lock poisoning the shard.

use std::sync::Arc;
use std::time::Duration;

use felix_segment::Record;

use crate::ReadBound;
use crate::shard::commit::QueuedWrites;
use crate::shard::log::Synced;
use crate::{Durability, Preallocation, Shard, StorageError, StoreConfig};

fn on_commit() -> StoreConfig {
    StoreConfig {
        durability: Durability::OnCommit,
        preallocate: Preallocation::Off,
        ..StoreConfig::default()
    }
}

/// A sync worker asked to write the queue while someone holds the
/// writer lock returns at once, saying so, instead of waiting (a close
/// holds it across the very sync the worker may owe it).
#[test]
fn writing_the_queue_never_waits_for_the_writer_lock() {
    let dir = tempfile::tempdir().unwrap();
    let shard = Shard::options(dir.path())
        .config(on_commit())
        .open()
        .unwrap();
    let core = shard.core();
    let held = core.log().writer_state();
    let (tx, rx) = std::sync::mpsc::channel();
    let answered = std::thread::scope(|scope| {
        scope.spawn(|| tx.send(core.write_queued()).unwrap());
        let answered = rx.recv_timeout(Duration::from_secs(10));
        // Released before the scope waits for the thread, so a call
        // that blocks fails the test instead of hanging it.
        drop(held);
        answered
    });
    assert_eq!(answered, Ok(false));
    assert!(core.write_queued());
}

/// A later write's outcome on a shard whose writer lock a panic
/// interrupted: refused, naming the panic as the cause.
fn assert_write_interrupted(shard: &Shard) {
    let core = shard.core();
    let err = core
        .log()
        .append_written(&[Record::new(0, "after")], Synced::Later)
        .unwrap_err();
    assert!(
        matches!(
            &err,
            StorageError::Poisoned { shard, original }
                if &**shard == "interrupted"
                    && matches!(&**original, StorageError::WriteInterrupted { shard } if &**shard == "interrupted")
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "shard interrupted accepts no more writes: a panic interrupted a write; \
         reopening the shard recovers what is durable"
    );
    // Nothing was written after the interrupted write: the record
    // before it is the last.
    assert_eq!(core.offsets().written, 1);
}

/// The shard is stopped already, by a panic under the writer lock, before
/// anyone takes the lock again (`why` says when it should have been).
fn assert_stopped_by_the_panic(shard: &Shard, why: &str) {
    assert!(
        matches!(
            shard.core().commit().check_poison(),
            Err(StorageError::Poisoned { original, .. })
                if matches!(*original, StorageError::WriteInterrupted { .. })
        ),
        "{why}"
    );
}

fn interrupted_shard(dir: &std::path::Path) -> Shard {
    let shard = Shard::options(dir)
        .label("interrupted")
        .config(on_commit())
        .open()
        .unwrap();
    shard
        .core()
        .log()
        .append_written(&[Record::new(0, "before")], Synced::Later)
        .unwrap();
    shard
}

/// A panic while a holder of the writer lock's guard writes poisons the
/// shard as it unwinds: later writes get `Poisoned`, caused by
/// `WriteInterrupted`.
#[test]
fn a_panic_holding_the_writer_lock_poisons_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    let shard = interrupted_shard(dir.path());
    let core = shard.core();
    let panicked = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let _held = core.log().writer_state();
                panic!("a write cut short");
            })
            .join()
    });
    assert!(panicked.is_err());
    assert_write_interrupted(&shard);
    // A close reports the shard stopped, and closes it.
    assert!(matches!(
        shard.core().close(),
        Err(StorageError::Poisoned { original, .. })
            if matches!(*original, StorageError::WriteInterrupted { .. })
    ));
}

/// A writer lock left poisoned by a holder outside the guard (a
/// combining leader's rounds hold the lock itself) is found by the next
/// holder, which poisons the shard before anything is written.
#[test]
fn a_poisoned_writer_lock_poisons_the_shard_at_its_next_holder() {
    let dir = tempfile::tempdir().unwrap();
    let shard = interrupted_shard(dir.path());
    let core = shard.core();
    let panicked = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let _held = core.log().writer.lock();
                panic!("a round cut short");
            })
            .join()
    });
    assert!(panicked.is_err());
    assert!(core.commit().check_poison().is_ok(), "not yet noticed");
    assert_write_interrupted(&shard);
}

/// Blocking appenders and futures share the queue, with the lead handed
/// over after every round: a lead left with only futures' batches
/// (whose callers take no lead) pokes the worker, which writes them.
/// Every append completes, durable, at a unique offset.
#[cfg(not(loom))]
#[test]
fn futures_queued_behind_leaders_that_hand_over_all_complete() {
    const THREADS: u64 = 8;
    const PER_THREAD: u64 = 40;
    let dir = tempfile::tempdir().unwrap();
    let shard = Arc::new(
        Shard::options(dir.path())
            .config(on_commit())
            .open()
            .unwrap(),
    );
    shard.core().log().set_max_lead_rounds(1);
    let blocking: Vec<_> = (0..THREADS)
        .map(|_| {
            let shard = Arc::clone(&shard);
            std::thread::spawn(move || {
                (0..PER_THREAD)
                    .map(|_| {
                        shard
                            .append(&[Record::new(0, "b")])
                            .wait()
                            .unwrap()
                            .first_offset
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let futures: Vec<_> = (0..THREADS * PER_THREAD)
        .map(|_| shard.append(&[Record::new(0, "f")]).submit().unwrap())
        .collect();
    let mut offsets: Vec<u64> = futures.iter().map(|f| f.receipt().first_offset).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for append in futures {
        runtime.block_on(append).unwrap();
    }
    for thread in blocking {
        offsets.extend(thread.join().unwrap());
    }
    offsets.sort_unstable();
    assert_eq!(offsets, (0..2 * THREADS * PER_THREAD).collect::<Vec<_>>());
    assert_eq!(shard.offsets().durable, 2 * THREADS * PER_THREAD);
}

/// With one round per leader, leads are handed over constantly; every
/// append still completes, durable, at a unique offset.
#[test]
fn leaders_hand_over_and_every_append_completes() {
    const THREADS: u64 = 32;
    const PER_THREAD: u64 = 30;
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        durability: Durability::OnCommit,
        preallocate: Preallocation::Off,
        ..StoreConfig::default()
    };
    let shard = Arc::new(Shard::options(dir.path()).config(config).open().unwrap());
    shard.core().log().set_max_lead_rounds(1);
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let shard = Arc::clone(&shard);
            std::thread::spawn(move || {
                (0..PER_THREAD)
                    .map(|i| {
                        let payload = format!("{t}-{i}");
                        let receipt = shard
                            .append(&[Record::new(0, payload.clone())])
                            .wait()
                            .unwrap();
                        assert!(shard.offsets().durable > receipt.first_offset);
                        (receipt.first_offset, payload)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut acked: Vec<(u64, String)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    acked.sort();
    assert_eq!(
        acked.iter().map(|a| a.0).collect::<Vec<_>>(),
        (0..THREADS * PER_THREAD).collect::<Vec<_>>()
    );
    for (offset, payload) in &acked {
        assert_eq!(
            shard.read(*offset, 1, ReadBound::Committed).unwrap()[0].payload,
            payload.as_bytes()
        );
    }
    let stats = shard.stats();
    println!(
        "{} lead handoffs, {} writes for {} appends",
        stats.lead_handoffs, stats.writes, stats.appends
    );
    assert!(stats.lead_handoffs > 0, "{stats:?}");
}

/// A leader whose round panics while writing the queued batches poisons
/// the shard as the panic leaves the round, before anyone takes the lock
/// again: the waiters of the batches it took learn of it from the poison.
#[test]
fn a_panic_in_a_leaders_round_poisons_the_shard_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let shard = interrupted_shard(dir.path());
    let panicked = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                super::combine::PANIC_IN_WRITE.set(true);
                let _ = shard.append(&[Record::new(0, "cut short")]).wait();
            })
            .join()
    });
    assert_eq!(
        panicked.unwrap_err().downcast_ref::<&str>(),
        Some(&"a write of queued batches cut short")
    );
    assert_stopped_by_the_panic(
        &shard,
        "poisoned by the round, not left for the next holder",
    );
    assert_write_interrupted(&shard);
}

/// Taking the writer lock writes what is queued first; a panic in that
/// write poisons the shard at once: the thread draining may be the sync
/// worker, and the appender of a queued batch waits for a sync of it.
#[test]
fn a_panic_draining_the_queue_poisons_the_shard_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let shard = interrupted_shard(dir.path());
    let core = shard.core();
    let panicked = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // The lock is held from before the batch is queued, so
                // nobody else (the sync worker) can drain it first.
                let state = core.log().writer.lock().unwrap();
                // Queued without a leader, as an append with a completion
                // is while a sync is pending.
                core.log()
                    .append_queued(&[Record::new(0, "queued")])
                    .unwrap();
                super::combine::PANIC_IN_WRITE.set(true);
                drop(core.log().guard_writer(state));
            })
            .join()
    });
    let payload = panicked.unwrap_err();
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"a write of queued batches cut short")
    );
    assert_stopped_by_the_panic(&shard, "poisoned as the panic left the guard");
}

/// A guard taken while the thread is already unwinding (a close run by a
/// destructor during a panic) and let go normally poisons nothing: that
/// panic did not interrupt a write under the lock.
#[test]
fn a_guard_taken_while_already_unwinding_poisons_nothing() {
    struct TakesTheLockOnDrop<'a>(&'a Shard);
    impl Drop for TakesTheLockOnDrop<'_> {
        fn drop(&mut self) {
            assert!(std::thread::panicking());
            drop(self.0.core().log().writer_state());
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let shard = interrupted_shard(dir.path());
    let panicked = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let _on_drop = TakesTheLockOnDrop(&shard);
                panic!("elsewhere, not under the lock");
            })
            .join()
    });
    assert!(panicked.is_err());
    assert!(shard.core().commit().check_poison().is_ok());
    let receipt = shard.append(&[Record::new(0, "after")]).wait().unwrap();
    assert_eq!(receipt.first_offset, 1);
}
