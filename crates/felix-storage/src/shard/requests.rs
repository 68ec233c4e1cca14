//! What [`Shard::append`], [`Shard::wait_durable`] and
//! [`Shard::wait_readable`] return: a request, made only when the caller
//! picks how to wait for it — blocking, `.await`, or a callback on the
//! sync pool's dispatch thread.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::{Duration, Instant};

use felix_segment::Record;

use super::commit::{AppendFuture, Commit, Completion, DurableFuture, TailFuture};
use super::core::Core;
use super::log::Synced;
use super::{AppendReceipt, ReadBound, Shard, Tail};
use crate::error::Result;
#[cfg(doc)]
use crate::error::StorageError;

/// An append of one batch, not made yet: [`Shard::append`]. Pick how to
/// wait for it with one of [`Append::wait`], [`Append::written`],
/// [`Append::submit`], [`Append::then`] or `.await`; before any of them
/// nothing happens.
///
/// Under [`Durability::OnCommit`](crate::Durability::OnCommit) an append
/// is acknowledged once an `fdatasync` covers it (concurrent appenders
/// share writes and syncs); otherwise once it is written. Either way the
/// batch is readable once it is acknowledged, and not before. An empty
/// batch or an oversized payload is refused before anything is written.
///
/// A failed write or sync stops the shard's writes for good: the append,
/// and every other append the failed write or sync covered, gets that
/// failure (with its operation and path); later calls get
/// [`StorageError::Poisoned`].
///
/// ```
/// use felix_storage::{Record, Shard};
///
/// let dir = tempfile::tempdir()?;
/// let shard = Shard::options(dir.path()).open()?;
/// // Block until acknowledged:
/// let receipt = shard.append(&[Record::new(1, "a"), Record::new(2, "b")]).wait()?;
/// assert_eq!((receipt.first_offset, receipt.last_offset), (0, 1));
/// // Or hold no thread: the offsets at once, the acknowledgement later.
/// let pending = shard.append(&[Record::new(3, "c")]).submit()?;
/// assert_eq!(pending.receipt().first_offset, 2);
/// # let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// # runtime.block_on(async {
/// pending.await?;
/// // `.await` on the append itself submits it.
/// let receipt = shard.append(&[Record::new(4, "d")]).await?;
/// assert_eq!(receipt.first_offset, 3);
/// # Ok::<(), felix_storage::StorageError>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "an append does nothing until it is waited for, submitted, awaited or given a callback"]
#[derive(Debug)]
pub struct Append<'a> {
    shard: &'a Shard,
    records: &'a [Record],
    /// Wait for a place in flight when the shard's are taken (else fail).
    wait_for_room: bool,
}

impl<'a> Append<'a> {
    pub(super) fn new(shard: &'a Shard, records: &'a [Record]) -> Self {
        Self {
            shard,
            records,
            wait_for_room: true,
        }
    }

    /// Fail with [`StorageError::InFlightFull`], having written nothing,
    /// instead of waiting when the shard's appends in flight
    /// ([`StoreConfig::max_appends_in_flight`](crate::StoreConfig::max_appends_in_flight))
    /// are at their bound: for a caller that must never block (await an
    /// earlier append, then try again). Applies to every terminal;
    /// [`Append::wait`] and [`Append::written`] hold their thread rather
    /// than a place in flight, so they never wait for one (nor fail for
    /// want of one).
    ///
    /// ```
    /// use felix_storage::{Record, Shard, StorageError, StoreConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let config = StoreConfig { max_appends_in_flight: 1, ..StoreConfig::default() };
    /// let shard = Shard::options(dir.path()).config(config).open()?;
    /// match shard.append(&[Record::now("event")]).fail_fast().submit() {
    ///     Ok(pending) => drop(pending),
    ///     Err(StorageError::InFlightFull { limit, .. }) => assert_eq!(limit, 1),
    ///     Err(other) => return Err(other.into()),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fail_fast(mut self) -> Self {
        self.wait_for_room = false;
        self
    }

    /// Appends the batch, assigning contiguous offsets, in one `write`,
    /// and blocks until it is acknowledged: under
    /// [`Durability::OnCommit`](crate::Durability::OnCommit) until an
    /// `fdatasync` covers it (concurrent appenders share a `write` as well
    /// as a sync), otherwise until it is written.
    ///
    /// ```
    /// use felix_storage::{Record, Shard, StorageError};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// let err = shard.append(&[]).wait().unwrap_err();
    /// assert!(matches!(err, StorageError::EmptyBatch { .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait(self) -> Result<AppendReceipt> {
        let core = &self.shard.core;
        core.check_open()?;
        if core.on_commit() {
            // Concurrent on-commit appends share a `write` as well as a sync
            // (see `log/combine.rs`).
            core.log()
                .check_batch(self.records.iter().map(|r| r.payload.len()))?;
            let started = crate::metrics::Timer::start();
            let receipt = core.log().append_combined(self.records)?;
            core.shared().metrics.append_durable(started);
            return Ok(receipt);
        }
        core.log().append_written(self.records, Synced::Later)
    }

    /// Appends the batch and returns once it is written, without waiting
    /// for durability, whatever the policy. Pair with
    /// [`Shard::wait_durable`] to sequence commits yourself. Under
    /// [`Durability::OnCommit`](crate::Durability::OnCommit) readers see the
    /// batch once it is durable.
    ///
    /// ```
    /// use felix_storage::{Durability, Offsets, Record, Shard, StoreConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let config = StoreConfig { durability: Durability::OnCommit, ..StoreConfig::default() };
    /// let shard = Shard::options(dir.path()).config(config).open()?;
    /// shard.append(&[Record::new(1, "not yet durable")]).written()?;
    /// assert_eq!(shard.offsets(), Offsets { base: 0, readable: 0, written: 1, durable: 0 });
    /// shard.wait_durable(1).wait()?;
    /// assert_eq!(shard.offsets().durable, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn written(self) -> Result<AppendReceipt> {
        // Nobody waits for a sync of it, whatever the policy: writeback
        // counts it.
        self.shard.core.check_open()?;
        self.shard
            .core
            .log()
            .append_written(self.records, Synced::Later)
    }

    /// Appends the batch and returns as soon as it has its offsets, with a
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
    /// written offset ([`Offsets::written`](crate::Offsets::written),
    /// [`ReadBound::Written`]); the receipt says its offsets. A leader
    /// that serves [`ReadBound::Written`] to its followers waits for it
    /// with [`Shard::wait_readable`] from the receipt's first offset,
    /// woken when the worker writes it; it is written, at the latest, when
    /// its future resolves `Ok`. With no sync pending, and under the other
    /// durabilities, the batch is in the file when this returns.
    ///
    /// Completions of one shard resolve in offset order. The error returned
    /// here means nothing was acknowledged (as [`Append::wait`]'s: an empty
    /// batch, the shard closed or poisoned, a failed write); a queued
    /// batch's failed write reaches its future instead, with the write's
    /// error. Dropping the future does not undo the write (see
    /// [`AppendFuture`]).
    ///
    /// Past [`StoreConfig::max_appends_in_flight`](crate::StoreConfig::max_appends_in_flight)
    /// appends whose future is pending, this blocks the calling thread
    /// until one completes; after [`Append::fail_fast`] it fails instead.
    ///
    /// ```
    /// use felix_storage::{Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// let pending: Vec<_> = (0..8)
    ///     .map(|i| shard.append(&[Record::new(i, "event")]).submit())
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
    /// assert_eq!(shard.offsets().durable, 8);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn submit(self) -> Result<AppendFuture> {
        let (slot, done) = Commit::future_slot();
        let receipt =
            self.shard
                .core
                .append_completion(self.records, self.wait_for_room, |_| done)?;
        Ok(AppendFuture::new(receipt, DurableFuture::new(slot)))
    }

    /// Appends the batch and returns as soon as it has its offsets (written,
    /// or queued for the pending sync to write, as for [`Append::submit`]);
    /// `callback` runs once the batch is acknowledged (as
    /// [`Append::submit`]'s future resolves) with its receipt, or with the
    /// failure or the close that came first.
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
    /// Past the in-flight bound this waits; after [`Append::fail_fast`] it
    /// fails instead.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use felix_storage::{Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// let (tx, rx) = mpsc::channel();
    /// shard.append(&[Record::new(1, "event")]).then(move |outcome| {
    ///     let _ = tx.send(outcome);
    /// })?;
    /// let receipt = rx.recv()??;
    /// assert_eq!(receipt.first_offset, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn then(
        self,
        callback: impl FnOnce(Result<AppendReceipt>) + Send + 'static,
    ) -> Result<AppendReceipt> {
        self.shard
            .core
            .append_completion(self.records, self.wait_for_room, move |receipt| {
                Completion::Callback(Box::new(move |outcome: Result<()>| {
                    callback(outcome.map(|()| receipt));
                }))
            })
    }
}

impl IntoFuture for Append<'_> {
    type Output = Result<AppendReceipt>;
    /// The append made at once ([`Append::submit`]), resolving as its
    /// [`AppendFuture`] does, or with the error `submit` returned. It
    /// borrows nothing: `Send + 'static`.
    type IntoFuture = Pin<Box<dyn Future<Output = Result<AppendReceipt>> + Send + 'static>>;

    fn into_future(self) -> Self::IntoFuture {
        match self.submit() {
            Ok(pending) => Box::pin(pending),
            Err(err) => Box::pin(std::future::ready(Err(err))),
        }
    }
}

/// A wait for every record below an offset to be durable:
/// [`Shard::wait_durable`]. Pick [`DurableWait::wait`],
/// [`DurableWait::then`] or `.await` ([`DurableFuture`]).
///
/// Offsets beyond what was appended are clamped to it. Group commit: the
/// sync pool syncs the shard back to back while appends continue, and each
/// sync wakes every waiter it covered, so N concurrent appenders cost far
/// fewer than N syncs. Any policy: under
/// [`Durability::None`](crate::Durability::None) too, it syncs.
///
/// ```
/// use felix_storage::{Record, Shard};
///
/// let dir = tempfile::tempdir()?;
/// let shard = Shard::options(dir.path()).open()?;
/// let receipt = shard.append(&[Record::now("a")]).written()?;
/// shard.wait_durable(receipt.last_offset + 1).wait()?;
/// assert_eq!(shard.offsets().durable, 1);
/// # let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// runtime.block_on(async { shard.wait_durable(1).await })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a wait does nothing until it is waited for, awaited or given a callback"]
#[derive(Debug)]
pub struct DurableWait<'a> {
    shard: &'a Shard,
    offset: u64,
}

impl<'a> DurableWait<'a> {
    pub(super) fn new(shard: &'a Shard, offset: u64) -> Self {
        Self { shard, offset }
    }

    /// Blocks until every record below the offset is durable, or the
    /// failure or close that came first.
    pub fn wait(self) -> Result<()> {
        self.shard.core.check_open()?;
        self.shard.core.commit().wait_durable(self.offset)
    }

    /// Returns at once; `callback` runs on the dispatch thread (see
    /// [`Append::then`]) once every record below the offset is durable,
    /// or with the failure or close that came first.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use felix_storage::{Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// let receipt = shard.append(&[Record::now("a")]).written()?;
    /// let (tx, rx) = mpsc::channel();
    /// shard.wait_durable(receipt.last_offset + 1).then(move |outcome| {
    ///     let _ = tx.send(outcome);
    /// });
    /// rx.recv()??;
    /// assert_eq!(shard.offsets().durable, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn then(self, callback: impl FnOnce(Result<()>) + Send + 'static) {
        let done = Completion::Callback(Box::new(callback));
        self.shard
            .core
            .commit()
            .watch_durable(self.offset, false, done, None);
    }
}

impl IntoFuture for DurableWait<'_> {
    type Output = Result<()>;
    type IntoFuture = DurableFuture;

    /// Registers the wait (asking the sync pool for a sync if none covers
    /// the offset yet) and returns its future.
    fn into_future(self) -> DurableFuture {
        let (slot, done) = Commit::future_slot();
        self.shard
            .core
            .commit()
            .watch_durable(self.offset, false, done, None);
        DurableFuture::new(slot)
    }
}

/// A wait for a record at an offset (or past it) to be readable under a
/// bound: [`Shard::wait_readable`]. Pick [`TailWait::wait_timeout`],
/// [`TailWait::then`] or `.await` ([`TailFuture`]).
///
/// No polling: the append or sync that makes the record readable wakes
/// the wait, which answers at once when it already is. A consumer
/// following the tail waits at the offset after the last record it read,
/// then reads from there: the read returns at least one record whenever
/// the wait says [`Tail::Readable`].
///
/// A poisoned shard answers [`Tail::Poisoned`] once everything
/// acknowledged below the offset has been read; a close fails the wait
/// with [`StorageError::ShardClosed`]. Waiting does not make anything durable:
/// under [`Durability::OnCommit`](crate::Durability::OnCommit) a
/// [`ReadBound::Committed`] wait ends with the appender's sync.
///
/// ```
/// use std::time::Duration;
/// use felix_storage::{ReadBound, Record, Shard, Tail};
///
/// let dir = tempfile::tempdir()?;
/// let shard = std::sync::Arc::new(Shard::options(dir.path()).open()?);
/// let producer = {
///     let shard = shard.clone();
///     std::thread::spawn(move || shard.append(&[Record::now("first")]).wait())
/// };
/// let mut next = 0;
/// while next < 1 {
///     match shard.wait_readable(next, ReadBound::Committed).wait_timeout(Duration::from_secs(10))? {
///         Tail::Readable { .. } => {
///             for record in shard.read(next, 1 << 20, ReadBound::Committed)? {
///                 next = record.offset + 1;
///             }
///         }
///         Tail::TimedOut { .. } => continue,
///         other => panic!("{other:?}"),
///     }
/// }
/// producer.join().unwrap()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a wait does nothing until it is waited for, awaited or given a callback"]
#[derive(Debug)]
pub struct TailWait<'a> {
    shard: &'a Shard,
    from: u64,
    bound: ReadBound,
}

impl<'a> TailWait<'a> {
    pub(super) fn new(shard: &'a Shard, from: u64, bound: ReadBound) -> Self {
        Self { shard, from, bound }
    }

    /// Blocks until a record at the offset (or past it) is readable under
    /// the bound, at most `timeout` ([`Tail::TimedOut`] then).
    pub fn wait_timeout(self, timeout: Duration) -> Result<Tail> {
        self.shard.core.check_open()?;
        let deadline = Instant::now().checked_add(timeout);
        self.shard
            .core
            .commit()
            .wait_readable(self.from, self.bound, deadline)
    }

    /// Returns at once; `callback` runs on the dispatch thread (see
    /// [`Append::then`]) once a record at the offset is readable under the
    /// bound (or as the future resolves). It stays registered until then:
    /// there is no timeout.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use felix_storage::{ReadBound, Record, Shard, Tail};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// let (tx, rx) = mpsc::channel();
    /// shard.wait_readable(0, ReadBound::Committed).then(move |outcome| {
    ///     let _ = tx.send(outcome);
    /// });
    /// shard.append(&[Record::now("first")]).wait()?;
    /// assert_eq!(rx.recv()??, Tail::Readable { end: 1 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn then(self, callback: impl FnOnce(Result<Tail>) + Send + 'static) {
        let done = Completion::Callback(Box::new(callback));
        let _ = self
            .shard
            .core
            .commit()
            .watch_tail(self.from, self.bound, done);
    }
}

impl IntoFuture for TailWait<'_> {
    type Output = Result<Tail>;
    type IntoFuture = TailFuture;

    /// Registers the wait and returns its future, without a timeout (bound
    /// it with the runtime's timer and drop it: dropping takes it off the
    /// shard's waiter list). It resolves with [`Tail::Readable`],
    /// [`Tail::BoundReached`] or [`Tail::Poisoned`] as the blocking wait
    /// does, never [`Tail::TimedOut`]; a close fails it with
    /// [`StorageError::ShardClosed`].
    ///
    /// ```
    /// use felix_storage::{ReadBound, Record, Shard, Tail};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// let next = shard.wait_readable(0, ReadBound::Committed).into_future();
    /// shard.append(&[Record::now("first")]).wait()?;
    /// # let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    /// let tail = runtime.block_on(next)?;
    /// assert_eq!(tail, Tail::Readable { end: 1 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn into_future(self) -> TailFuture {
        let (slot, done) = Commit::future_slot();
        let commit = self.shard.core.commit();
        let registered = commit
            .watch_tail(self.from, self.bound, done)
            .map(|token| (std::sync::Arc::clone(commit), token));
        TailFuture::new(slot, registered)
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
        self.log()
            .check_batch(records.iter().map(|r| r.payload.len()))?;
        if !self.on_commit() {
            let receipt = self.log().append_written(records, Synced::Later)?;
            self.commit().deliver_now(completion(receipt), Ok(()));
            return Ok(receipt);
        }
        let admission = self.commit().admit(wait)?;
        // With a sync of the shard pending, the next one covers this batch
        // at the earliest: it is queued for the worker to write, with every
        // other batch queued meanwhile, in one `write` just before that
        // sync (no system call here, and no write into pages being written
        // back). Otherwise it is written under the writer lock by this
        // thread (not queued for a combining leader: nothing would hand
        // this caller the lead), and in the file when this returns.
        let receipt = if self.commit().sync_pending() {
            self.log().append_queued(records)?
        } else {
            self.log().append_written(records, Synced::ByCaller)?
        };
        let done = completion(receipt);
        self.commit()
            .watch_durable(receipt.last_offset + 1, true, done, Some(admission));
        Ok(receipt)
    }
}
