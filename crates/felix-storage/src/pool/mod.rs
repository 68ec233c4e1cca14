//! The sync pool: the threads that make shards durable, shared by every
//! shard of a [`Store`](crate::Store) (a shard opened alone owns a small
//! one), and the one thread that runs completion callbacks.
//!
//! A shard that needs an `fdatasync` (an appender or a future waits for
//! records the last sync did not cover) queues itself here once; a worker
//! takes the oldest queued shard, runs one sync of it, wakes the waiters it
//! covered and, when more need a sync, queues it again at the back. So a
//! shard under load is synced back to back (alone in the queue, it is
//! taken again at once), and shards take turns, one sync each: no shard
//! waits for more than one sync of every other queued shard, however hot.
//! A worker whose shard's sync woke several appenders, with no other shard
//! queued, keeps the shard for its next turn rather than leave it to the
//! first of them to queue it again (`job.rs`): the same order, without a
//! hand-off between threads per sync.
//!
//! Workers start on demand, one at a time, up to the pool's size: a store
//! whose shards never wait for durability owns no sync thread. A job
//! starts no worker while an idle one will take it, nor while the worker
//! that ran the same job's last turn is still finishing it (waking its
//! waiters after the sync): that worker comes back to the queue within
//! microseconds, so a store with N shards each syncing one at a time runs
//! about N workers, not N plus one per hand-off. A worker idle for the
//! pool's keep-alive ([`StoreConfig::sync_thread_keep_alive`]) retires,
//! so the pool shrinks back to what the load needs, down to none.
//! Callbacks run on one dispatch thread (`dispatch.rs`), started on the
//! first, so a slow callback delays other callbacks but never a sync.
//!
//! [`StoreConfig::sync_thread_keep_alive`]: crate::StoreConfig::sync_thread_keep_alive
//!
//! Invariants: a queued shard is in the queue once, or kept by one worker
//! for its next turn, never both (`CommitState::queued` says so, under the
//! shard's commit lock); a stopped pool runs what was queued before it
//! stopped and nothing after.

mod dispatch;

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use crate::loom::lock;
use crate::loom::sync::{Condvar, Mutex, MutexGuard};
use crate::loom::thread::{self, JoinHandle};

pub(crate) use dispatch::Callback;
use dispatch::Dispatch;

/// What a worker runs: one turn of a shard's group commit (one sync, and
/// the completions it covered).
pub(crate) trait SyncJob: Send + Sync + fmt::Debug {
    /// Runs one turn. A job that needs another queues itself again
    /// ([`SyncPool::submit`]), at the back, or runs it at once when no
    /// other job is queued ([`SyncPool::has_queued`]).
    fn run(self: Arc<Self>, pool: &SyncPool);
}

/// A handle to a pool of sync workers; clones share the pool.
#[derive(Clone)]
pub(crate) struct SyncPool {
    inner: Arc<Inner>,
}

impl fmt::Debug for SyncPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncPool")
            .field("name", &self.inner.name)
            .field("size", &self.inner.size)
            .field("keep_alive", &self.inner.keep_alive)
            .finish_non_exhaustive()
    }
}

struct Inner {
    /// Threads are named `{name}-sync` and `{name}-callbacks`.
    name: String,
    /// At most this many workers.
    size: usize,
    /// A worker idle this long retires.
    keep_alive: Duration,
    state: Mutex<State>,
    /// How many jobs `state.queue` holds, for a worker deciding whether to
    /// keep its shard for the next turn ([`SyncPool::has_queued`]) without
    /// the pool's lock. A hint only, hence `std`'s even under loom: no
    /// outcome depends on it, only which worker runs a turn.
    queued: std::sync::atomic::AtomicUsize,
    /// Wakes an idle worker when a job is queued, or every one at shutdown.
    work: Condvar,
    dispatch: Dispatch,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Arc<dyn SyncJob>>,
    workers: Vec<JoinHandle<()>>,
    /// Workers waiting on `work`.
    idle: usize,
    /// Of those, how many were notified and have not woken yet: a second
    /// job then wakes a second worker instead of notifying the first again.
    notified: usize,
    /// The jobs workers run now: each one's address, its turn's number,
    /// and whether the job was submitted again since, which means its
    /// worker is past the sync and about to come back to the queue
    /// ([`SyncPool::submit`]).
    running: Vec<Running>,
    /// Numbers the turns, so that a worker takes out its own entry.
    turns: u64,
    stop: bool,
}

/// A turn a worker runs now.
struct Running {
    job: usize,
    turn: u64,
    returning: bool,
}

/// A job's identity while it runs: the address its `Arc` points at.
fn address(job: &Arc<dyn SyncJob>) -> usize {
    Arc::as_ptr(job).cast::<()>() as usize
}

impl SyncPool {
    /// A pool of at most `size` workers (at least one), none started yet,
    /// whose workers retire after the default keep-alive.
    #[cfg(test)]
    pub(crate) fn new(name: String, size: usize) -> Self {
        Self::with_keep_alive(name, size, crate::config::DEFAULT_SYNC_THREAD_KEEP_ALIVE)
    }

    /// A pool of at most `size` workers (at least one), none started yet,
    /// whose workers retire once idle for `keep_alive`.
    pub(crate) fn with_keep_alive(name: String, size: usize, keep_alive: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                dispatch: Dispatch::new(format!("{name}-callbacks")),
                name,
                size: size.max(1),
                keep_alive,
                state: Mutex::new(State::default()),
                queued: std::sync::atomic::AtomicUsize::new(0),
                work: Condvar::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.inner.state)
    }

    /// Queues `job` at the back and makes sure a worker will take it: an
    /// idle one is woken; or, while the workers already woken and those
    /// finishing a job that was submitted again (past their sync, since a
    /// shard is queued only with no sync of it in flight) are as many as
    /// the jobs queued, one of them will; or a new one is started while
    /// the pool is below its size. Fails only when
    /// the pool has stopped, or has no worker at all and cannot start one;
    /// the job is then not queued.
    pub(crate) fn submit(&self, job: Arc<dyn SyncJob>) -> std::io::Result<()> {
        let mut state = self.lock();
        if state.stop {
            return Err(std::io::Error::other("the sync pool has stopped"));
        }
        let job_address = address(&job);
        state.queue.push_back(job);
        self.count_queued(&state);
        // A worker still running this job is past its sync: a job is
        // submitted only with no sync of it in flight.
        for running in &mut state.running {
            running.returning |= running.job == job_address;
        }
        if state.idle > state.notified {
            state.notified += 1;
            drop(state);
            self.inner.work.notify_one();
            return Ok(());
        }
        // Workers woken and not up yet, and workers finishing a turn, come
        // back to the queue: while they are as many as the jobs queued,
        // one of them takes this one (the others' jobs may have been taken
        // by workers that came back first).
        let returning = state.running.iter().filter(|r| r.returning).count();
        if state.notified + returning >= state.queue.len() {
            return Ok(());
        }
        if state.workers.len() >= self.inner.size {
            // Every worker is busy: the first to finish takes it.
            return Ok(());
        }
        let pool = self.clone();
        let spawned = thread::Builder::new()
            .name(format!("{}-sync", self.inner.name))
            .spawn(move || pool.work());
        match spawned {
            Ok(handle) => {
                state.workers.push(handle);
                Ok(())
            }
            // Busy workers will take it.
            Err(_) if !state.workers.is_empty() => Ok(()),
            Err(err) => {
                state.queue.pop_back();
                self.count_queued(&state);
                Err(err)
            }
        }
    }

    fn count_queued(&self, state: &State) {
        self.inner.queued.store(state.queue.len(), Relaxed);
    }

    /// Whether another job waits for a worker (as of a moment ago): a
    /// worker keeps a shard for its next turn only when none does, so that
    /// shards still take turns.
    pub(crate) fn has_queued(&self) -> bool {
        self.inner.queued.load(Relaxed) > 0
    }

    /// A worker: runs queued jobs, oldest first, until the pool stops or
    /// it has been idle for the keep-alive.
    fn work(&self) {
        let mut state = self.lock();
        loop {
            if let Some(job) = state.queue.pop_front() {
                self.count_queued(&state);
                let turn = state.turns;
                state.turns = state.turns.wrapping_add(1);
                state.running.push(Running {
                    job: address(&job),
                    turn,
                    returning: false,
                });
                drop(state);
                job.run(self);
                state = self.lock();
                if let Some(i) = state.running.iter().position(|r| r.turn == turn) {
                    state.running.swap_remove(i);
                }
                continue;
            }
            if state.stop {
                return;
            }
            state.idle += 1;
            let (next, waited) = self
                .inner
                .work
                .wait_timeout(state, self.inner.keep_alive)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            state = next;
            state.idle -= 1;
            state.notified = state.notified.saturating_sub(1);
            // Retire only with nothing queued (checked under the lock a
            // submission takes), so that no job waits for a worker gone.
            if waited.timed_out() && state.queue.is_empty() && !state.stop {
                let me = thread::current().id();
                // Dropping its own handle detaches it: it exits now.
                state.workers.retain(|worker| worker.thread().id() != me);
                return;
            }
        }
    }

    /// Runs `callback` on the pool's dispatch thread, after every callback
    /// handed over before it. Returns it instead when the pool has stopped
    /// (or no dispatch thread can be started): the caller runs it, once it
    /// holds no lock.
    #[must_use = "a returned callback must be run by the caller"]
    pub(crate) fn dispatch(&self, callback: Callback) -> Option<Callback> {
        self.inner.dispatch.push(callback)
    }

    /// Stops the pool: workers finish what is queued and exit, the dispatch
    /// thread runs every callback handed to it and exits, and this waits
    /// for them (except for the calling thread itself, when a callback or a
    /// waker dropped the pool's last owner). Later submissions fail.
    pub(crate) fn shutdown(&self) {
        let workers = {
            let mut state = self.lock();
            state.stop = true;
            std::mem::take(&mut state.workers)
        };
        self.inner.work.notify_all();
        let me = thread::current().id();
        for worker in workers {
            if worker.thread().id() != me {
                let _ = worker.join();
            }
        }
        self.inner.dispatch.shutdown();
    }

    /// Sync workers running now (busy or idle).
    pub(crate) fn workers(&self) -> usize {
        self.lock().workers.len()
    }

    /// Threads the pool runs now: workers and the dispatch thread.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn threads(&self) -> usize {
        self.workers() + self.inner.dispatch.running()
    }
}

#[cfg(test)]
mod tests;
