//! Appends and waits that return at once and report later: through a
//! future (any executor; no runtime needed) or a callback run on the sync
//! pool's dispatch thread. See `commit/` for how they complete.

use felix_segment::Record;

use std::future::IntoFuture;

use super::commit::{AppendFuture, Completion, DurableFuture, TailFuture};
use super::core::Core;
use super::log::Synced;
use super::requests::{Append, DurableWait, TailWait};
use super::{AppendReceipt, ReadBound, Shard, Tail};
use crate::error::Result;

impl Shard {
    /// Appends a batch and returns as soon as it has its offsets, with a
    /// future that resolves once it is acknowledged: under
    /// [`Durability::OnCommit`](crate::Durability::OnCommit), once an
    /// `fdatasync` covers it; otherwise at once. No thread waits for the
    /// sync: the shard's sync pool makes it and wakes the future, so one
    /// thread (or a runtime's few) can keep thousands of appends in flight.
    ///
    /// **When this returns, the batch has its offsets; under `OnCommit` it
    /// may not be written yet.** A batch appended while a sync of the shard
    /// is pending (queued or in flight: it covers what was written before
    /// it, so this batch waits for the next one anyway) is not written
    /// here: it is queued with its offsets, and the sync worker writes every
    /// batch queued meanwhile in one `write` just before the next sync,
    /// which saves a system call per batch. Until then it counts in no
    /// written offset ([`Shard::next_offset`], [`Offsets::written`],
    /// [`ReadBound::Written`]); the receipt says its offsets. A leader
    /// that serves [`ReadBound::Written`] to its followers waits for it
    /// with [`Shard::wait_readable`] (or [`Shard::wait_readable_async`])
    /// from the receipt's first offset, woken when the worker writes it;
    /// it is written, at the latest, when its future resolves `Ok`.
    /// With no sync pending, and under the other durabilities, the batch
    /// is in the file when this returns.
    ///
    /// [`Offsets::written`]: crate::Offsets::written
    ///
    /// Completions of one shard resolve in offset order. The error returned
    /// here means nothing was acknowledged (as [`Shard::append`]'s: an empty
    /// batch, the shard closed or poisoned, a failed write); a queued
    /// batch's failed write reaches its future instead, with the write's
    /// error. Dropping the future does not undo the write (see
    /// [`AppendFuture`]).
    ///
    /// Past [`StoreConfig::max_appends_in_flight`](crate::StoreConfig::max_appends_in_flight)
    /// appends whose future is pending, this blocks the calling thread
    /// until one completes; [`Shard::try_append_async`] fails instead.
    ///
    /// ```
    /// use felix_storage::{Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// let pending: Vec<_> = (0..8)
    ///     .map(|i| shard.append_async(&[Record::new(i, "event")]))
    ///     .collect::<Result<_, _>>()?;
    /// // Their offsets are known at once; durable once each resolves.
    /// assert_eq!(pending[7].receipt().first_offset, 7);
    /// # let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    /// # runtime.block_on(async {
    /// for append in pending {
    ///     append.await?;
    /// }
    /// # Ok::<(), felix_storage::StorageError>(())
    /// # })?;
    /// assert_eq!(shard.durable_offset(), 8);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append_async(&self, records: &[Record]) -> Result<AppendFuture> {
        Append::new(self, records).submit()
    }

    /// [`Shard::append_async`], failing with
    /// [`StorageError::InFlightFull`](crate::StorageError::InFlightFull),
    /// having written nothing, instead of waiting when the shard's appends
    /// in flight are at their bound: for a caller that must never block
    /// (await an earlier future, then try again).
    pub fn try_append_async(&self, records: &[Record]) -> Result<AppendFuture> {
        Append::new(self, records).fail_fast().submit()
    }

    /// Appends a batch and returns as soon as it has its offsets (written,
    /// or queued for the pending sync to write, as for
    /// [`Shard::append_async`]); `callback` runs once the batch is
    /// acknowledged (as for [`Shard::append_async`])
    /// with its receipt, or with the failure or the close that came first.
    ///
    /// Callbacks run on the sync pool's dispatch thread — one thread per
    /// [`Store`](crate::Store) (or per shard opened alone), started on the
    /// first callback — one at a time, each shard's in offset order. A slow
    /// callback delays the callbacks after it, never a sync; a callback
    /// that blocks for long should hand its work to another thread. A
    /// callback still pending when its pool stops (the store or shard
    /// closes or is dropped) runs before the close returns. When this
    /// returns an error, nothing was written and `callback` is dropped
    /// without running.
    ///
    /// Past the in-flight bound this waits; [`Shard::try_append_then`]
    /// fails instead.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use felix_storage::{Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// let (tx, rx) = mpsc::channel();
    /// shard.append_then(&[Record::new(1, "event")], move |outcome| {
    ///     let _ = tx.send(outcome);
    /// })?;
    /// let receipt = rx.recv()??;
    /// assert_eq!(receipt.first_offset, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append_then(
        &self,
        records: &[Record],
        callback: impl FnOnce(Result<AppendReceipt>) + Send + 'static,
    ) -> Result<AppendReceipt> {
        Append::new(self, records).then(callback)
    }

    /// [`Shard::append_then`], failing with
    /// [`StorageError::InFlightFull`](crate::StorageError::InFlightFull),
    /// having written nothing (and dropped `callback`), instead of waiting
    /// when the shard's appends in flight are at their bound.
    pub fn try_append_then(
        &self,
        records: &[Record],
        callback: impl FnOnce(Result<AppendReceipt>) + Send + 'static,
    ) -> Result<AppendReceipt> {
        Append::new(self, records).fail_fast().then(callback)
    }

    /// [`Shard::wait_durable`] as a future: resolves once every record
    /// below `offset` (clamped to what was appended) is durable, asking the
    /// sync pool for a sync if none covers it yet. Any policy: under
    /// [`Durability::None`](crate::Durability::None) too, it syncs.
    pub fn wait_durable_async(&self, offset: u64) -> DurableFuture {
        DurableWait::new(self, offset).into_future()
    }

    /// [`Shard::wait_durable`] with a callback, run on the dispatch thread
    /// (see [`Shard::append_then`]) once every record below `offset` is
    /// durable, or with the failure or close that came first.
    pub fn wait_durable_then(
        &self,
        offset: u64,
        callback: impl FnOnce(Result<()>) + Send + 'static,
    ) {
        DurableWait::new(self, offset).then(callback);
    }

    /// [`Shard::wait_readable`] as a future, without a timeout (bound it
    /// with the runtime's timer and drop it: dropping takes it off the
    /// shard's waiter list). Resolves with [`Tail::Readable`],
    /// [`Tail::BoundReached`] or [`Tail::Poisoned`] as the blocking wait
    /// does, never [`Tail::TimedOut`]; a close fails it with
    /// [`StorageError::Closed`](crate::StorageError::Closed).
    ///
    /// ```
    /// use felix_storage::{ReadBound, Record, Shard, Tail};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// let next = shard.wait_readable_async(0, ReadBound::Committed);
    /// shard.append(&[Record::now("first")])?;
    /// # let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    /// let tail = runtime.block_on(next)?;
    /// assert_eq!(tail, Tail::Readable { end: 1 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_readable_async(&self, from: u64, bound: ReadBound) -> TailFuture {
        TailWait::new(self, from, bound).into_future()
    }

    /// [`Shard::wait_readable`] with a callback, run on the dispatch thread
    /// (see [`Shard::append_then`]) once a record at `from` is readable
    /// under `bound` (or as [`Shard::wait_readable_async`] resolves). It
    /// stays registered until then: there is no timeout.
    pub fn wait_readable_then(
        &self,
        from: u64,
        bound: ReadBound,
        callback: impl FnOnce(Result<Tail>) + Send + 'static,
    ) {
        TailWait::new(self, from, bound).then(callback);
    }
}

impl Core {
    /// Writes a batch for an append that reports through a completion,
    /// made by `completion` from the batch's receipt once it is written,
    /// and registers it. Under on-commit durability the append first takes
    /// a place in flight (waiting for one when `wait`).
    pub(super) fn append_completion(
        &self,
        records: &[Record],
        wait: bool,
        completion: impl FnOnce(AppendReceipt) -> Completion<Result<()>>,
    ) -> Result<AppendReceipt> {
        self.check_open()?;
        self.check_batch(records.iter().map(|r| r.payload.len()))?;
        if !self.on_commit() {
            let receipt = self.append_nowait(records, Synced::Later)?;
            self.commit.deliver_now(completion(receipt), Ok(()));
            return Ok(receipt);
        }
        let admission = self.commit.admit(wait)?;
        // With a sync of the shard pending, the next one covers this batch
        // at the earliest: it is queued for the worker to write, with every
        // other batch queued meanwhile, in one `write` just before that
        // sync (no system call here, and no write into pages being written
        // back). Otherwise it is written under the writer lock by this
        // thread (not queued for a combining leader: nothing would hand
        // this caller the lead), and in the file when this returns.
        let receipt = if self.commit.sync_pending() {
            self.append_queued(records)?
        } else {
            let mut state = self.lock_writer()?;
            self.append_locked(&mut state, records, Synced::ByCaller)?
        };
        let done = completion(receipt);
        self.commit
            .watch_durable(receipt.last_offset + 1, true, done, Some(admission));
        Ok(receipt)
    }
}
