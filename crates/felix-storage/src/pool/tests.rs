//! The pool alone: jobs in turn, workers started on demand, callbacks in
//! order on their own thread, and a shutdown that leaves nothing behind.

#![cfg(not(loom))]

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use super::{SyncJob, SyncPool};

/// Records its turns; asks for `turns` of them.
#[derive(Debug)]
struct Job {
    name: &'static str,
    turns: AtomicUsize,
    log: Arc<Mutex<Vec<&'static str>>>,
}

impl SyncJob for Job {
    fn run(self: Arc<Self>, pool: &SyncPool) {
        self.log.lock().unwrap().push(self.name);
        if self.turns.fetch_sub(1, SeqCst) > 1 {
            pool.submit(self.clone()).unwrap();
        }
    }
}

/// With one worker, two busy jobs and one that wants a single turn take
/// turns: the single one is not kept behind the others' backlog.
#[test]
fn submit_jobs_take_turns_one_run_each() {
    let pool = SyncPool::new("t".into(), 1);
    let log = Arc::new(Mutex::new(Vec::new()));
    let job = |name, turns| {
        Arc::new(Job {
            name,
            turns: AtomicUsize::new(turns),
            log: Arc::clone(&log),
        })
    };
    // Holds the worker until all three are queued.
    let (tx, rx) = mpsc::channel::<()>();
    #[derive(Debug)]
    struct Gate(Mutex<mpsc::Receiver<()>>);
    impl SyncJob for Gate {
        fn run(self: Arc<Self>, _: &SyncPool) {
            let _ = self.0.lock().unwrap().recv();
        }
    }
    pool.submit(Arc::new(Gate(Mutex::new(rx)))).unwrap();
    pool.submit(job("hot", 3)).unwrap();
    pool.submit(job("warm", 3)).unwrap();
    pool.submit(job("cold", 1)).unwrap();
    tx.send(()).unwrap();
    while log.lock().unwrap().len() < 7 {
        std::thread::sleep(Duration::from_millis(1));
    }
    pool.shutdown();
    assert_eq!(
        *log.lock().unwrap(),
        ["hot", "warm", "cold", "hot", "warm", "hot", "warm"]
    );
}

#[test]
fn submit_starts_workers_on_demand_up_to_the_size() {
    let pool = SyncPool::new("t".into(), 3);
    assert_eq!(pool.threads(), 0);
    #[derive(Debug)]
    struct Sleep;
    impl SyncJob for Sleep {
        fn run(self: Arc<Self>, _: &SyncPool) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for _ in 0..6 {
        pool.submit(Arc::new(Sleep)).unwrap();
    }
    assert_eq!(pool.threads(), 3);
    pool.shutdown();
    assert_eq!(pool.threads(), 0);
    assert!(pool.submit(Arc::new(Sleep)).is_err());
}

#[test]
fn dispatch_runs_callbacks_in_order_and_after_shutdown_hands_them_back() {
    let pool = SyncPool::new("t".into(), 1);
    let seen = Arc::new(Mutex::new(Vec::new()));
    for i in 0..100 {
        let seen = Arc::clone(&seen);
        let handed_back = pool.dispatch(Box::new(move || {
            // A panicking callback stops none after it.
            assert!(i != 50, "callback {i}");
            seen.lock().unwrap().push(i);
        }));
        assert!(handed_back.is_none());
    }
    pool.shutdown();
    let expected: Vec<_> = (0..100).filter(|&i| i != 50).collect();
    assert_eq!(*seen.lock().unwrap(), expected);
    assert!(pool.dispatch(Box::new(|| {})).is_some());
}

/// `has_queued` counts jobs waiting for a worker, not the one running: a
/// worker alone with its shard may keep it; with another waiting, it may
/// not.
#[test]
fn has_queued_counts_the_jobs_waiting_not_the_one_running() {
    #[derive(Debug)]
    struct Gate {
        started: mpsc::Sender<()>,
        go: Mutex<mpsc::Receiver<()>>,
    }
    impl SyncJob for Gate {
        fn run(self: Arc<Self>, _: &SyncPool) {
            self.started.send(()).unwrap();
            let _ = self.go.lock().unwrap().recv();
        }
    }
    let pool = SyncPool::new("t".into(), 1);
    let (started, on_start) = mpsc::channel();
    let (go, gate) = mpsc::channel();
    let job = Arc::new(Gate {
        started,
        go: Mutex::new(gate),
    });
    pool.submit(job.clone()).unwrap();
    on_start.recv().unwrap();
    assert!(!pool.has_queued());
    pool.submit(job).unwrap();
    assert!(pool.has_queued());
    go.send(()).unwrap();
    on_start.recv().unwrap();
    assert!(!pool.has_queued());
    go.send(()).unwrap();
    pool.shutdown();
}
