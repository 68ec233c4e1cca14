//! Completions: appends and waits that return at once and report later,
//! through a future (run here on tokio and on a minimal executor) or a
//! callback. Offset order, failures, the in-flight bound, which thread
//! runs callbacks, and that a close or a drop leaves none pending.

mod common;

use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use common::exec::{block_on, poll_once};
use common::gated::GatedFs;
use common::{config, read_all, records};
use felix_io::OsFs;
use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_storage::{
    AppendFuture, Durability, ReadBound, Shard, ShardKey, StorageError, Store, StoreConfig, Tail,
};

const EIO: i32 = 5;

fn on_commit() -> StoreConfig {
    config(1 << 20, Durability::OnCommit)
}

fn open_on(
    fs: &GatedFs<impl felix_io::Vfs + Clone + 'static>,
    dir: &std::path::Path,
    config: StoreConfig,
) -> Shard {
    Shard::options(dir)
        .config(config)
        .file_system(fs.handle())
        .label("test-shard")
        .open()
        .unwrap()
}

fn is_closed<T: std::fmt::Debug>(outcome: &Result<T, StorageError>) -> bool {
    matches!(outcome, Err(StorageError::ShardClosed { shard }) if &**shard == "test-shard")
}

/// Awaiting an `Append` submits it: its future resolves with the receipt
/// once durable, or with the error the submit met (nothing written), and
/// a submitted append can be waited for on a thread as well.
#[test]
fn awaiting_an_append_submits_it_and_resolves_with_its_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let shard = common::open(dir.path(), on_commit());
    let receipt = block_on(shard.append(&records(0, 2, 16)).into_future()).unwrap();
    assert_eq!((receipt.first_offset, receipt.last_offset), (0, 1));
    assert_eq!(shard.offsets().durable, 2);
    assert!(matches!(
        block_on(shard.append(&[]).into_future()),
        Err(StorageError::EmptyBatch { .. })
    ));
    let pending = shard.append(&records(2, 1, 16)).submit().unwrap();
    assert_eq!(pending.wait().unwrap().first_offset, 2);
    assert_eq!(shard.offsets().durable, 3);
    shard.close().unwrap();
    assert!(matches!(
        block_on(shard.append(&records(3, 1, 16)).into_future()),
        Err(StorageError::ShardClosed { .. })
    ));
    assert_eq!(shard.offsets().written, 3, "nothing written");
}

#[test]
fn submitted_append_resolves_durable_with_its_receipt_on_a_minimal_executor() {
    let dir = tempfile::tempdir().unwrap();
    let shard = common::open(dir.path(), on_commit());
    let pending: Vec<AppendFuture> = (0..100)
        .map(|i| shard.append(&records(i, 1, 16)).submit().unwrap())
        .collect();
    for (i, append) in pending.into_iter().enumerate() {
        assert_eq!(append.receipt().first_offset, i as u64);
        let receipt = block_on(append).unwrap();
        assert_eq!(
            (receipt.first_offset, receipt.last_offset),
            (i as u64, i as u64)
        );
        assert!(shard.offsets().durable > receipt.last_offset);
    }
    assert_eq!(read_all(&shard, 0).len(), 100);
}

/// Held at the gate, then released: whenever a future is seen ready, every
/// earlier one is ready too (polled after it, newest first).
#[test]
fn submitted_append_completions_become_ready_in_offset_order() {
    let dir = tempfile::tempdir().unwrap();
    let fs = GatedFs::new(OsFs);
    let shard = open_on(&fs, dir.path(), on_commit());
    fs.close_gate();
    let mut pending: Vec<Option<AppendFuture>> = (0..64)
        .map(|i| Some(shard.append(&records(i, 1, 16)).submit().unwrap()))
        .collect();
    fs.await_waiting(1);
    fs.open_gate();
    let mut done = vec![false; pending.len()];
    while done.iter().any(|d| !d) {
        let mut later_ready = false;
        for i in (0..pending.len()).rev() {
            if let Some(append) = &mut pending[i]
                && let Poll::Ready(outcome) = poll_once(append)
            {
                assert_eq!(outcome.unwrap().first_offset, i as u64);
                done[i] = true;
                pending[i] = None;
            }
            assert!(
                done[i] || !later_ready,
                "offset {i} pending after a later one was ready"
            );
            later_ready |= done[i];
        }
    }
}

#[test]
fn append_callbacks_run_in_offset_order_on_the_dispatch_thread() {
    let dir = tempfile::tempdir().unwrap();
    let shard = common::open(dir.path(), on_commit());
    let seen = Arc::new(Mutex::new(Vec::new()));
    for i in 0..200 {
        let seen = Arc::clone(&seen);
        let receipt = shard
            .append(&records(i, 1, 16))
            .then(move |outcome| {
                let thread = std::thread::current().name().map(str::to_owned);
                seen.lock()
                    .unwrap()
                    .push((outcome.unwrap().first_offset, thread));
            })
            .unwrap();
        assert_eq!(receipt.first_offset, i);
    }
    // Pending callbacks run before the close returns.
    shard.close().unwrap();
    let seen = seen.lock().unwrap();
    let offsets: Vec<u64> = seen.iter().map(|s| s.0).collect();
    assert_eq!(offsets, (0..200).collect::<Vec<_>>());
    for (_, thread) in seen.iter() {
        let name = thread.as_deref().unwrap_or_default();
        assert!(name.ends_with("-callbacks"), "{name}");
    }
}

/// One shard's callback sleeps for a second on the store's dispatch
/// thread; another shard's appends, blocking and async, are synced
/// meanwhile as if it did not.
#[test]
fn slow_callback_delays_no_other_shards_sync() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path())
        .config(on_commit())
        .open()
        .unwrap();
    let slow = store
        .create_shard(&ShardKey::new("t", "d", "slow", 0))
        .unwrap();
    let fast = store
        .create_shard(&ShardKey::new("t", "d", "fast", 0))
        .unwrap();
    let ran = Arc::new(Mutex::new(None));
    let started = Instant::now();
    {
        let ran = Arc::clone(&ran);
        slow.append(&records(0, 1, 16))
            .then(move |outcome| {
                std::thread::sleep(Duration::from_secs(1));
                *ran.lock().unwrap() = Some(outcome.map(|r| r.first_offset));
            })
            .unwrap();
    }
    // Let the callback start sleeping.
    std::thread::sleep(Duration::from_millis(50));
    for i in 0..20 {
        fast.append(&records(i, 1, 16)).wait().unwrap();
    }
    let pending: Vec<_> = (20..40)
        .map(|i| fast.append(&records(i, 1, 16)).submit().unwrap())
        .collect();
    for append in pending {
        block_on(append).unwrap();
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(700),
        "the other shard's syncs waited for the callback: {took:?}"
    );
    assert!(
        ran.lock().unwrap().is_none(),
        "the callback is still sleeping"
    );
    // Closing the store runs the callback to its end first.
    store.close().unwrap();
    assert!(matches!(*ran.lock().unwrap(), Some(Ok(0))));
}

#[test]
fn dropping_an_append_future_keeps_the_write_and_it_becomes_durable() {
    let dir = tempfile::tempdir().unwrap();
    let shard = common::open(dir.path(), on_commit());
    let append = shard.append(&records(0, 3, 16)).submit().unwrap();
    assert_eq!(append.receipt().last_offset, 2);
    drop(append);
    // Nobody awaits it, yet the sync it asked for makes it readable.
    let tail = shard
        .wait_readable(0, ReadBound::Committed)
        .wait_timeout(Duration::from_secs(10))
        .unwrap();
    assert_eq!(tail, Tail::Readable { end: 3 });
    assert_eq!(shard.offsets().durable, 3);
    assert_eq!(read_all(&shard, 0).len(), 3);
}

/// Every kind of completion pending when the shard closes completes: the
/// appends durable (the close syncs them), the waits for what will never
/// come with `ShardClosed`; callbacks have run when `close` returns.
#[test]
fn close_completes_every_pending_completion() {
    let dir = tempfile::tempdir().unwrap();
    let fs = GatedFs::new(OsFs);
    let shard = Arc::new(open_on(&fs, dir.path(), on_commit()));
    fs.close_gate();
    let appends: Vec<_> = (0..5)
        .map(|i| shard.append(&records(i, 1, 16)).submit().unwrap())
        .collect();
    let tail = shard.wait_readable(100, ReadBound::Committed).into_future();
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    {
        let outcomes = Arc::clone(&outcomes);
        shard
            .wait_readable(100, ReadBound::Written)
            .then(move |outcome| {
                outcomes.lock().unwrap().push(format!("tail {outcome:?}"));
            });
    }
    {
        let outcomes = Arc::clone(&outcomes);
        shard.wait_durable(5).then(move |outcome| {
            outcomes
                .lock()
                .unwrap()
                .push(format!("durable {outcome:?}"));
        });
    }
    fs.await_waiting(1);
    let closer = {
        let shard = Arc::clone(&shard);
        std::thread::spawn(move || shard.close())
    };
    std::thread::sleep(Duration::from_millis(20));
    fs.open_gate();
    closer.join().unwrap().unwrap();
    let outcomes = outcomes.lock().unwrap().clone();
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert!(
        outcomes.contains(&"durable Ok(())".to_string()),
        "{outcomes:?}"
    );
    assert!(
        outcomes
            .iter()
            .any(|o| o.starts_with("tail Err(ShardClosed")),
        "{outcomes:?}"
    );
    for append in appends {
        assert!(block_on(append).is_ok());
    }
    assert!(is_closed(&block_on(tail)));
    // After the close, a new completion fails at once.
    assert!(is_closed(&block_on(shard.wait_durable(1).into_future())));
    assert!(is_closed(
        &shard.append(&records(5, 1, 16)).submit().map(drop)
    ));
}

/// A shard dropped with appends waiting for a sync (held at the gate) and
/// a consumer waiting: every completion fails with `ShardClosed` (nothing is
/// synced at a drop), before the sync in flight returns.
#[test]
fn drop_fails_every_pending_completion_with_closed() {
    let dir = tempfile::tempdir().unwrap();
    let fs = GatedFs::new(OsFs);
    let shard = open_on(&fs, dir.path(), on_commit());
    fs.close_gate();
    let appends: Vec<_> = (0..3)
        .map(|i| shard.append(&records(i, 1, 16)).submit().unwrap())
        .collect();
    let tail = shard.wait_readable(3, ReadBound::Committed).into_future();
    fs.await_waiting(1);
    // The drop waits for the sync in flight to return: on another thread.
    let dropper = std::thread::spawn(move || drop(shard));
    for append in appends {
        assert!(is_closed(&block_on(append)));
    }
    assert!(is_closed(&block_on(tail)));
    fs.open_gate();
    dropper.join().unwrap();
}

#[test]
fn append_past_the_in_flight_bound_fails_fast_or_waits_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let fs = GatedFs::new(OsFs);
    let config = StoreConfig {
        max_appends_in_flight: 4,
        ..on_commit()
    };
    let shard = Arc::new(open_on(&fs, dir.path(), config));
    fs.close_gate();
    let mut appends: Vec<_> = (0..4)
        .map(|i| shard.append(&records(i, 1, 16)).submit().unwrap())
        .collect();
    fs.await_waiting(1);
    let full = shard
        .append(&records(4, 1, 16))
        .fail_fast()
        .submit()
        .map(drop);
    assert!(
        matches!(&full, Err(StorageError::InFlightFull { shard, limit: 4 }) if &**shard == "test-shard"),
        "{full:?}"
    );
    let ran = Arc::new(Mutex::new(false));
    let flag = Arc::clone(&ran);
    let full = shard
        .append(&records(4, 1, 16))
        .fail_fast()
        .then(move |_| *flag.lock().unwrap() = true);
    assert!(
        matches!(full, Err(StorageError::InFlightFull { limit: 4, .. })),
        "{full:?}"
    );
    assert_eq!(shard.offsets().written, 4, "nothing was written");
    // A blocking append is not counted.
    let waiting = {
        let shard = Arc::clone(&shard);
        std::thread::spawn(move || block_on(shard.append(&records(4, 1, 16)).submit().unwrap()))
    };
    std::thread::sleep(Duration::from_millis(50));
    assert!(!waiting.is_finished(), "the fifth append waits for a place");
    assert_eq!(shard.offsets().written, 4);
    fs.open_gate();
    assert_eq!(waiting.join().unwrap().unwrap().first_offset, 4);
    for append in appends.drain(..) {
        block_on(append).unwrap();
    }
    assert!(!*ran.lock().unwrap(), "a refused callback never runs");
}

/// With room for one append in flight, an append made as soon as the
/// previous one's future or callback reported it durable always finds the
/// place free: a completion gives its place back before it is seen.
#[test]
fn an_append_made_once_the_previous_completed_finds_its_place_free() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        max_appends_in_flight: 1,
        ..on_commit()
    };
    let shard = common::open(dir.path(), config);
    for i in 0..500 {
        let append = shard.append(&records(2 * i, 1, 16)).fail_fast().submit();
        let receipt = block_on(append.unwrap()).unwrap();
        assert_eq!(receipt.first_offset, 2 * i);
        let (sender, receiver) = std::sync::mpsc::channel();
        let appended = shard
            .append(&records(2 * i + 1, 1, 16))
            .fail_fast()
            .then(move |outcome| {
                sender
                    .send(outcome.map(|receipt| receipt.first_offset))
                    .unwrap();
            });
        assert_eq!(appended.unwrap().first_offset, 2 * i + 1);
        assert_eq!(receiver.recv().unwrap().unwrap(), 2 * i + 1);
    }
    assert_eq!(shard.offsets().durable, 1000);
}

/// While a sync of the shard is pending, futures' batches are queued with
/// their offsets, not written: the worker writes them all in one `write`
/// just before the next sync, which covers them.
#[test]
fn futures_appended_while_a_sync_is_pending_are_written_together_before_the_next_sync() {
    let dir = tempfile::tempdir().unwrap();
    let fs = GatedFs::new(OsFs);
    let shard = open_on(&fs, dir.path(), on_commit());
    fs.close_gate();
    let first = shard.append(&records(0, 1, 16)).submit().unwrap();
    fs.await_waiting(1);
    let before = shard.stats();
    assert_eq!((before.appends, before.writes), (1, 1));
    let rest: Vec<_> = (1..64)
        .map(|i| shard.append(&records(i, 1, 16)).submit().unwrap())
        .collect();
    for (i, append) in rest.iter().enumerate() {
        assert_eq!(append.receipt().first_offset, i as u64 + 1);
    }
    // Assigned, not yet in the file: nothing more is written or readable.
    let queued = shard.stats();
    assert_eq!((queued.appends, queued.writes), (1, 1));
    assert_eq!(shard.offsets().written, 1);
    assert!(read_all(&shard, 0).is_empty());
    fs.open_gate();
    block_on(first).unwrap();
    for append in rest {
        block_on(append).unwrap();
    }
    let after = shard.stats();
    assert_eq!((after.appends, after.writes, after.syncs), (64, 2, 2));
    assert_eq!(shard.offsets().durable, 64);
    let read = read_all(&shard, 0);
    assert_eq!(read.len(), 64);
    for (i, (offset, payload)) in read.iter().enumerate() {
        assert_eq!(*offset, i as u64);
        assert_eq!(payload[..], records(i as u64, 1, 16)[0].payload[..]);
    }
}

/// The write of batches queued for a pending sync fails: their futures get
/// the write's error, the shard stops, and the sync pending still makes
/// what was written before durable.
#[test]
fn a_failed_write_of_queued_batches_fails_their_futures_with_the_error() {
    let sim = SimFs::new();
    let fs = GatedFs::new(sim.clone());
    let shard = open_on(&fs, std::path::Path::new("/shard"), on_commit());
    fs.close_gate();
    let first = shard.append(&records(0, 1, 16)).submit().unwrap();
    fs.await_waiting(1);
    let queued: Vec<_> = (1..4)
        .map(|i| shard.append(&records(i, 1, 16)).submit().unwrap())
        .collect();
    sim.inject(Fault {
        op: FaultOp::Write,
        path_contains: ".log".into(),
        skip: 0,
        effect: FaultEffect::Errno(EIO),
    });
    fs.open_gate();
    assert_eq!(block_on(first).unwrap().first_offset, 0);
    for append in queued {
        let outcome = block_on(append).map(drop);
        assert!(
            matches!(&outcome, Err(StorageError::Segment { shard, source })
                if &**shard == "test-shard"
                    && format!("{source}").contains("Input/output error")),
            "{outcome:?}"
        );
    }
    assert!(matches!(
        shard.append(&records(4, 1, 16)).submit().map(drop),
        Err(StorageError::Poisoned { .. })
    ));
    assert_eq!(shard.offsets().durable, 1);
    assert_eq!(read_all(&shard, 0).len(), 1);
}

/// The sync held at the gate fails when released: every completion pending
/// then gets the I/O error itself; every one asked for afterwards gets
/// `Poisoned`, and a consumer is told the shard stopped.
#[test]
fn failed_sync_fails_pending_completions_with_the_error_and_later_ones_poisoned() {
    let sim = SimFs::new();
    let fs = GatedFs::new(sim.clone());
    let shard = open_on(&fs, std::path::Path::new("/shard"), on_commit());
    fs.close_gate();
    let appends: Vec<_> = (0..3)
        .map(|i| shard.append(&records(i, 1, 16)).submit().unwrap())
        .collect();
    let (tx, rx) = std::sync::mpsc::channel();
    shard
        .wait_durable(3)
        .then(move |outcome| tx.send(outcome).unwrap());
    fs.await_waiting(1);
    sim.inject(Fault {
        op: FaultOp::SyncFile,
        path_contains: ".log".into(),
        skip: 0,
        effect: FaultEffect::SyncFailKeep(EIO),
    });
    fs.open_gate();
    let is_eio = |outcome: &Result<(), StorageError>| match outcome {
        Err(StorageError::Segment { source, .. }) => {
            source.io_kind().is_some() && format!("{source}").contains("Input/output error")
        }
        _ => false,
    };
    for append in appends {
        let outcome = block_on(append).map(drop);
        assert!(is_eio(&outcome), "{outcome:?}");
    }
    let outcome = rx.recv().unwrap();
    assert!(is_eio(&outcome), "{outcome:?}");
    assert!(matches!(
        shard.append(&records(3, 1, 16)).submit().map(drop),
        Err(StorageError::Poisoned { .. })
    ));
    assert!(matches!(
        block_on(shard.wait_durable(3).into_future()),
        Err(StorageError::Poisoned { .. })
    ));
    assert_eq!(
        block_on(shard.wait_readable(0, ReadBound::Committed).into_future()).unwrap(),
        Tail::Poisoned { end: 0 }
    );
    assert_eq!(shard.offsets().durable, 0);
}

/// Under a policy that does not sync appends, an append's future resolves
/// at once, and an awaited `wait_durable` syncs.
#[test]
fn awaited_wait_durable_syncs_under_durability_none() {
    let dir = tempfile::tempdir().unwrap();
    let shard = common::open(dir.path(), config(1 << 20, Durability::None));
    let append = shard.append(&records(0, 4, 16)).submit().unwrap();
    assert!(matches!(poll_once(&mut { append }), Poll::Ready(Ok(_))));
    assert_eq!(shard.offsets().durable, 0);
    block_on(shard.wait_durable(4).into_future()).unwrap();
    assert_eq!(shard.offsets().durable, 4);
}

/// A broker's shape on tokio: 100 producer tasks append through futures
/// while a consumer task follows the tail, all on two runtime threads.
#[test]
fn futures_on_tokio_produce_and_follow_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let shard = Arc::new(common::open(dir.path(), on_commit()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let consumed = runtime.block_on(async {
        let producers: Vec<_> = (0..100)
            .map(|p| {
                let shard = Arc::clone(&shard);
                tokio::spawn(async move {
                    for i in 0..10 {
                        shard
                            .append(&records(p * 10 + i, 1, 16))
                            .submit()
                            .unwrap()
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        let consumer = {
            let shard = Arc::clone(&shard);
            tokio::spawn(async move {
                let mut next = 0;
                let mut empty_reads = 0;
                while next < 1000 {
                    // A timeout drops the future, which leaves the list.
                    let wait = shard
                        .wait_readable(next, ReadBound::Committed)
                        .into_future();
                    match tokio::time::timeout(Duration::from_millis(100), wait).await {
                        Err(_elapsed) => continue,
                        Ok(tail) => assert!(matches!(tail.unwrap(), Tail::Readable { .. })),
                    }
                    let batch = shard.read(next, 1 << 20, ReadBound::Committed).unwrap();
                    empty_reads += usize::from(batch.is_empty());
                    for record in batch {
                        assert_eq!(record.offset, next);
                        next += 1;
                    }
                }
                (next, empty_reads)
            })
        };
        for producer in producers {
            producer.await.unwrap();
        }
        consumer.await.unwrap()
    });
    assert_eq!(consumed, (1000, 0));
}
