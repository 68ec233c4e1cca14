//! Group commit: a flusher thread that syncs back to back while appends
//! continue, waking exactly the appenders each sync covered.
//!
//! An `OnCommit` appender writes its batch (under the writer lock, as every
//! append does), registers the offset it needs durable and parks. The
//! flusher, started on the shard's first wait, takes the commit lock only to
//! read how far the log is written, releases it, runs one `fdatasync`, and
//! then unparks every waiter the sync covered. Appends that arrive while a
//! sync is in flight are covered by the next one, so a hundred concurrent
//! appenders cost a handful of syncs, and no appender ever waits on another
//! appender's turn at the disk.
//!
//! A failed sync is never retried: it poisons the shard, and every waiter
//! wakes to the original error.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::{JoinHandle, Thread};

use felix_segment::SyncHandle;

use crate::error::{Result, StorageError};

/// What group commit knows, under the commit lock.
#[derive(Debug)]
pub(crate) struct CommitState {
    /// One past the last offset a completed sync covers.
    pub(crate) durable: u64,
    /// Syncs the active segment.
    pub(crate) handle: SyncHandle,
    /// Appenders parked until `durable` reaches their target.
    waiters: Vec<(u64, Thread)>,
    /// Whether an `fdatasync` is in flight (the flusher's, or an idle
    /// shard's appender's own).
    syncing: bool,
    /// Whether the flusher is waiting on `work`: only then is it worth a
    /// `futex` wake (a condition variable's notify is a system call even
    /// when nobody waits, and appenders register by the dozen per sync).
    flusher_idle: bool,
    /// Bumped whenever the log is cut or replaced: a sync that began before
    /// may cover offsets that no longer hold the records it wrote, so its
    /// completion must not advance `durable`.
    log_epoch: u64,
    /// Set when the shard closes: the flusher exits.
    stop: bool,
    /// A background sync was asked for although nobody waits (see
    /// [`Commit::request_writeback`]).
    writeback: bool,
}

/// Group commit's shared half: the shard and its flusher thread both hold it.
#[derive(Debug)]
pub(crate) struct Commit {
    label: Arc<str>,
    /// One past the last offset written. Appenders publish it without the
    /// commit lock (they hold the writer lock, which orders them); it only
    /// moves backwards in `reset_log`, under the commit lock, so a reader
    /// holding the commit lock sees it consistent with `log_epoch`.
    written: AtomicU64,
    /// One past the last offset assigned: `written` plus on-commit batches
    /// queued for the combining leader (`combine.rs`). Waits are clamped to
    /// it, not to `written`, so a queued batch is waited for.
    assigned: AtomicU64,
    state: Mutex<CommitState>,
    /// Wakes the flusher when a waiter needs a sync, or at shutdown.
    work: Condvar,
    poison: OnceLock<Arc<StorageError>>,
    flusher: Mutex<Option<JoinHandle<()>>>,
    /// `fdatasync`s made for durability.
    pub(crate) syncs: AtomicU64,
    /// Waits that were satisfied.
    pub(crate) synced_appends: AtomicU64,
}

impl Commit {
    pub(crate) fn new(label: Arc<str>, next_offset: u64, handle: SyncHandle) -> Self {
        Self {
            label,
            written: AtomicU64::new(next_offset),
            assigned: AtomicU64::new(next_offset),
            state: Mutex::new(CommitState {
                durable: next_offset,
                handle,
                waiters: Vec::new(),
                syncing: false,
                flusher_idle: false,
                log_epoch: 0,
                stop: false,
                writeback: false,
            }),
            work: Condvar::new(),
            poison: OnceLock::new(),
            flusher: Mutex::new(None),
            syncs: AtomicU64::new(0),
            synced_appends: AtomicU64::new(0),
        }
    }

    /// The commit state. A panic while holding the lock cannot leave it
    /// inconsistent (each update is a few assignments), so a poisoned lock
    /// is recovered rather than propagated.
    pub(crate) fn lock(&self) -> MutexGuard<'_, CommitState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The failure that stopped writes, if any.
    pub(crate) fn poisoned(&self) -> Option<&Arc<StorageError>> {
        self.poison.get()
    }

    pub(crate) fn check_poison(&self) -> Result<()> {
        match self.poison.get() {
            Some(original) => Err(StorageError::Poisoned {
                shard: Arc::clone(&self.label),
                original: Arc::clone(original),
            }),
            None => Ok(()),
        }
    }

    /// Stops writes for good, keeping the first failure as the reason, and
    /// wakes every waiter to see it. Returns the error for the caller: its
    /// own failure when it is the first (it is this call's error, not an
    /// earlier one), else `Poisoned` naming the first.
    pub(crate) fn poison_with(&self, err: StorageError) -> StorageError {
        let first = self.poison.set(Arc::new(err.clone())).is_ok();
        if first {
            tracing::error!(shard = %self.label, error = %err, "shard stopped accepting writes");
        }
        let waiters = std::mem::take(&mut self.lock().waiters);
        for (_, thread) in waiters {
            thread.unpark();
        }
        self.work.notify_all();
        if first {
            return err;
        }
        StorageError::Poisoned {
            shard: Arc::clone(&self.label),
            original: self.poison.get().map_or_else(|| Arc::new(err), Arc::clone),
        }
    }

    /// One past the last offset written.
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Acquire)
    }

    /// Publishes how far the log is written. Called with the writer lock
    /// held, after the bytes are in the file.
    pub(crate) fn set_written(&self, written: u64) {
        self.written.store(written, Release);
    }

    /// Publishes how far offsets are assigned (under the queue lock).
    pub(crate) fn set_assigned(&self, assigned: u64) {
        self.assigned.store(assigned, Release);
    }

    fn assigned(&self) -> u64 {
        self.assigned.load(Acquire)
    }

    /// Wakes an idle flusher when appenders are waiting: called after
    /// queued batches were written by someone who will not wait for them.
    pub(crate) fn poke(&self) {
        let mut state = self.lock();
        if state.flusher_idle && !state.waiters.is_empty() {
            state.flusher_idle = false;
            drop(state);
            self.work.notify_one();
        }
    }

    /// Takes every waiter the durable offset now covers, to be unparked
    /// with [`unpark_all`] once the commit lock is released: an unpark is a
    /// system call, and holding the lock across dozens of them stalls every
    /// appender that wants to register (64 appenders: 68 k → 118 k
    /// records/s).
    #[must_use = "the covered waiters must be unparked"]
    pub(crate) fn take_covered(state: &mut CommitState) -> Vec<Thread> {
        let durable = state.durable;
        let mut covered = Vec::new();
        state.waiters.retain(|(target, thread)| {
            let done = *target <= durable;
            if done {
                covered.push(thread.clone());
            }
            !done
        });
        covered
    }

    /// Points group commit at a log that was cut or replaced: what is written
    /// and durable, and the segment to sync. Waiters for offsets the cut
    /// removed are clamped to the new end, so none waits for records that
    /// no longer exist.
    pub(crate) fn reset_log(&self, written: u64, handle: SyncHandle) {
        let mut state = self.lock();
        state.log_epoch += 1;
        self.set_written(written);
        // The queue is drained and held by whoever cut the log.
        self.set_assigned(written);
        state.durable = state.durable.min(written);
        state.handle = handle;
        for (target, _) in &mut state.waiters {
            *target = (*target).min(written);
        }
        let covered = Self::take_covered(&mut state);
        drop(state);
        unpark_all(covered);
        self.work.notify_all();
    }

    /// Waits until every record below `offset` (clamped to what was written)
    /// is durable.
    pub(crate) fn wait_durable(self: &Arc<Self>, offset: u64) -> Result<()> {
        self.wait_durable_then(offset, &|| Ok(()))
    }

    /// [`Commit::wait_durable`], calling `on_wake` each time the waiter is
    /// woken before it is covered (write combining hands its lead over
    /// that way).
    pub(crate) fn wait_durable_then(
        self: &Arc<Self>,
        offset: u64,
        on_wake: &dyn Fn() -> Result<()>,
    ) -> Result<()> {
        let mut state = self.lock();
        loop {
            self.check_poison()?;
            // Clamped, so a target past the log end never keeps the flusher
            // syncing for records that do not exist (and re-clamped on every
            // check: a truncation may cut the log below `offset`).
            let target = offset.min(self.assigned());
            if state.durable >= target {
                self.synced_appends.fetch_add(1, Relaxed);
                return Ok(());
            }
            // Someone else is syncing or waiting, or the batch is still
            // queued for the combining leader: hand off to the flusher,
            // which the leader pokes once it has written.
            if state.syncing || !state.waiters.is_empty() || self.written() < target {
                break;
            }
            // Nobody else is waiting or syncing: sync here rather than hand
            // off to the flusher, which would cost two thread switches of
            // latency for a lone appender.
            let (upto, epoch, handle) = self.begin_sync(&mut state);
            drop(state);
            let result = handle.sync_data();
            self.finish_sync(upto, epoch, result)?;
            state = self.lock();
        }
        self.ensure_flusher()?;
        let target = offset.min(self.assigned());
        let me = std::thread::current();
        let my_id = me.id();
        state.waiters.push((target, me));
        if std::mem::take(&mut state.flusher_idle) {
            drop(state);
            self.work.notify_one();
            state = self.lock();
        }
        loop {
            drop(state);
            // Unparked by the flusher once covered, or by poisoning; a
            // spurious wake-up just checks again.
            std::thread::park();
            state = self.lock();
            self.check_poison()?;
            // Covered means taken off the list by whoever advanced `durable`
            // past the target registered above. Re-clamping the target to
            // what is assigned now would be wrong: appends since then may
            // have raised it, and a waiter that parked again after being
            // taken off the list would never be woken.
            if !state.waiters.iter().any(|(_, t)| t.id() == my_id) {
                self.synced_appends.fetch_add(1, Relaxed);
                return Ok(());
            }
            drop(state);
            if let Err(err) = on_wake() {
                self.lock().waiters.retain(|(_, t)| t.id() != my_id);
                return Err(err);
            }
            state = self.lock();
        }
    }

    /// Marks a sync as in flight and returns what it will cover: everything
    /// written so far, in the current log.
    fn begin_sync(&self, state: &mut CommitState) -> (u64, u64, SyncHandle) {
        state.syncing = true;
        (self.written(), state.log_epoch, state.handle.clone())
    }

    /// Records the outcome of a sync that covered everything below `upto`:
    /// wakes the waiters it covered and lets the flusher go on, or poisons
    /// the shard (a failed sync is never retried).
    fn finish_sync(&self, upto: u64, epoch: u64, result: felix_segment::Result<()>) -> Result<()> {
        match result {
            Ok(()) => {
                self.syncs.fetch_add(1, Relaxed);
                let mut state = self.lock();
                state.syncing = false;
                // A sync that began before the log was cut proves nothing
                // about what was written since; the next one will.
                if state.log_epoch == epoch {
                    state.durable = state.durable.max(upto);
                }
                let covered = Self::take_covered(&mut state);
                // An appender's own sync may leave waiters for the flusher.
                let wake_flusher = std::mem::take(&mut state.flusher_idle);
                drop(state);
                unpark_all(covered);
                if wake_flusher {
                    self.work.notify_one();
                }
                Ok(())
            }
            Err(source) => {
                self.lock().syncing = false;
                Err(self.poison_with(StorageError::Segment {
                    shard: Arc::clone(&self.label),
                    source,
                }))
            }
        }
    }

    /// Starts the flusher thread on first use, so shards that never wait
    /// for durability never own a thread.
    fn ensure_flusher(self: &Arc<Self>) -> Result<()> {
        let mut flusher = self
            .flusher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if flusher.is_some() {
            return Ok(());
        }
        let commit = Arc::clone(self);
        let handle = std::thread::Builder::new()
            .name(format!("felix-flush {}", self.label))
            .spawn(move || commit.flush_loop())
            .map_err(|e| StorageError::Segment {
                shard: Arc::clone(&self.label),
                source: felix_segment::SegmentError::io(
                    "spawn flusher thread",
                    std::path::Path::new(&*self.label),
                    e,
                ),
            })?;
        *flusher = Some(handle);
        Ok(())
    }

    /// Syncs back to back while any waiter needs it.
    fn flush_loop(&self) {
        let mut state = self.lock();
        loop {
            if state.stop || self.poison.get().is_some() {
                return;
            }
            let durable = state.durable;
            // Only a sync that covers something new helps a waiter: one
            // whose batch is still queued waits for the leader's poke.
            let needed = self.written() > durable
                && (std::mem::take(&mut state.writeback)
                    || state.waiters.iter().any(|(target, _)| *target > durable));
            if state.syncing || !needed {
                state.flusher_idle = true;
                state = self
                    .work
                    .wait(state)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                state.flusher_idle = false;
                continue;
            }
            let (upto, epoch, handle) = self.begin_sync(&mut state);
            drop(state);
            let result = handle.sync_data();
            if self.finish_sync(upto, epoch, result).is_err() {
                return;
            }
            state = self.lock();
        }
    }

    /// Asks the flusher for one sync although nobody waits: appends that are
    /// not synced as they go (`None`, `Periodic`) call this every so many
    /// bytes, so dirty data is written back as it accumulates and sealing a
    /// segment (which syncs it) waits for the last stretch only, not for a
    /// whole segment's worth.
    pub(crate) fn request_writeback(self: &Arc<Self>) -> Result<()> {
        self.ensure_flusher()?;
        let mut state = self.lock();
        state.writeback = true;
        if std::mem::take(&mut state.flusher_idle) {
            drop(state);
            self.work.notify_one();
        }
        Ok(())
    }

    /// Stops the flusher (at shard close) and waits for it.
    pub(crate) fn stop(&self) {
        self.lock().stop = true;
        self.work.notify_all();
        let handle = self
            .flusher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

/// Unparks waiters taken from the commit state, after its lock is released.
pub(crate) fn unpark_all(threads: Vec<Thread>) {
    for thread in threads {
        thread.unpark();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use felix_segment::{SegmentConfig, SegmentWriter};

    /// A sync that was in flight when the log was cut must not mark the
    /// offsets written after the cut as durable: its `fdatasync` covered
    /// what the file held before.
    #[test]
    fn finish_sync_begun_before_a_cut_does_not_advance_durable() {
        let dir = tempfile::tempdir().unwrap();
        let writer = SegmentWriter::create(
            &felix_io::FileSystem::os(),
            dir.path(),
            0,
            0,
            SegmentConfig::default(),
            "t".into(),
        )
        .unwrap();
        let commit = Commit::new("t".into(), 0, writer.sync_handle());
        commit.set_written(10);
        let (upto, epoch, _) = commit.begin_sync(&mut commit.lock());
        assert_eq!(upto, 10);
        commit.reset_log(5, writer.sync_handle());
        commit.finish_sync(upto, epoch, Ok(())).unwrap();
        let state = commit.lock();
        assert_eq!(
            (state.durable, commit.written(), state.syncing),
            (0, 5, false)
        );
        drop(state);

        // A sync begun after the cut counts.
        let (upto, epoch, _) = commit.begin_sync(&mut commit.lock());
        commit.finish_sync(upto, epoch, Ok(())).unwrap();
        assert_eq!(commit.lock().durable, 5);
    }
}
