//! Completions a caller awaits instead of blocking a thread: the futures
//! of [`Append`](crate::Append), [`DurableWait`](crate::DurableWait) and
//! [`TailWait`](crate::TailWait).
//!
//! Each is a slot on the shard's waiter list, filled under the commit lock
//! by whoever settles it and woken through the `Waker` it was last polled
//! with; they need no runtime (any executor polls them) and are
//! `Send + 'static`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use super::Commit;
use super::waiters::{Slot, Token};
use crate::error::Result;
use crate::loom::thread::{self, Thread};
use crate::shard::AppendReceipt;
use crate::shard::bounds::Tail;

/// Resolves once every record below an offset is durable:
/// [`Shard::wait_durable`](crate::Shard::wait_durable), awaited.
///
/// `Ok(())` once a sync covered the records (or they were durable when it
/// was made); the failure that stopped the shard if one did first, or
/// [`StorageError::ShardClosed`](crate::StorageError::ShardClosed) if the shard
/// closed or was dropped first. Dropping it changes nothing: the sync it
/// asked for still happens.
#[must_use = "futures do nothing unless polled; dropping it leaves the records as they are"]
#[derive(Debug)]
pub struct DurableFuture {
    slot: Arc<Slot<Result<()>>>,
}

impl DurableFuture {
    pub(crate) fn new(slot: Arc<Slot<Result<()>>>) -> Self {
        Self { slot }
    }
}

impl Future for DurableFuture {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        self.slot.poll(cx)
    }
}

impl Drop for DurableFuture {
    fn drop(&mut self) {
        self.slot.forget_waker();
    }
}

/// An append whose records have their offsets, resolving once they are
/// acknowledged: [`Append::submit`](crate::Append::submit).
///
/// Under [`Durability::OnCommit`](crate::Durability::OnCommit) the batch
/// may not be written yet when this is returned: appended while a sync of
/// the shard was pending, it is queued and written just before the next
/// sync (see [`Append::submit`](crate::Append::submit)). It is
/// written by the time this resolves `Ok`.
///
/// Under [`Durability::OnCommit`](crate::Durability::OnCommit) it resolves
/// once a sync covers the batch, with its receipt; otherwise at once (the
/// batch was acknowledged when written, as [`Shard::append`] returns). A
/// failed sync resolves it with that failure (and every later append with
/// [`StorageError::Poisoned`](crate::StorageError::Poisoned)); a close or
/// a drop of the shard first, with
/// [`StorageError::ShardClosed`](crate::StorageError::ShardClosed).
///
/// **Dropping it neither undoes nor blocks the write**: the records keep
/// their offsets, are synced as if it were awaited and become readable
/// once durable; only the notice is lost.
///
/// [`Shard::append`]: crate::Shard::append
#[must_use = "the batch is appended; dropping the future only loses the notice that it is durable"]
#[derive(Debug)]
pub struct AppendFuture {
    receipt: AppendReceipt,
    durable: DurableFuture,
}

impl AppendFuture {
    pub(crate) fn new(receipt: AppendReceipt, durable: DurableFuture) -> Self {
        Self { receipt, durable }
    }

    /// The offsets the batch was given. Under
    /// [`Durability::OnCommit`](crate::Durability::OnCommit) the batch may
    /// be queued rather than written yet: wait for
    /// [`ReadBound::Written`](crate::ReadBound::Written) to reach it with
    /// [`Shard::wait_readable`](crate::Shard::wait_readable) before serving
    /// it to followers.
    pub fn receipt(&self) -> AppendReceipt {
        self.receipt
    }

    /// Blocks the calling thread until the append is acknowledged, as
    /// awaiting it would resolve: for a producer that submits many appends
    /// and then waits for each on its own thread, no runtime needed.
    ///
    /// ```
    /// use felix_storage::{Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// let pending: Vec<_> = (0..4)
    ///     .map(|i| shard.append(&[Record::new(i, "event")]).submit())
    ///     .collect::<Result<_, _>>()?;
    /// for append in pending {
    ///     append.wait()?;
    /// }
    /// assert_eq!(shard.offsets().durable, 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait(mut self) -> Result<AppendReceipt> {
        let waker = thread_waker();
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(outcome) = Pin::new(&mut self).poll(&mut cx) {
                return outcome;
            }
            // Woken when the outcome is set; a spurious wake polls again.
            thread::park();
        }
    }
}

impl Future for AppendFuture {
    type Output = Result<AppendReceipt>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<AppendReceipt>> {
        let receipt = self.receipt;
        Pin::new(&mut self.get_mut().durable)
            .poll(cx)
            .map(|outcome| outcome.map(|()| receipt))
    }
}

/// Resolves once a record at an offset is readable under a bound:
/// [`Shard::wait_readable`](crate::Shard::wait_readable), awaited.
///
/// Never [`Tail::TimedOut`]: bound the wait with the runtime's timer (e.g.
/// `tokio::time::timeout`) and drop the future; dropping it takes it off
/// the shard's waiter list.
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct TailFuture {
    slot: Arc<Slot<Result<Tail>>>,
    /// The registration to forget on drop, while it may still be waiting.
    registered: Option<(Arc<Commit>, Token)>,
}

impl TailFuture {
    pub(crate) fn new(
        slot: Arc<Slot<Result<Tail>>>,
        registered: Option<(Arc<Commit>, Token)>,
    ) -> Self {
        Self { slot, registered }
    }
}

impl Future for TailFuture {
    type Output = Result<Tail>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Tail>> {
        let outcome = self.slot.poll(cx);
        if outcome.is_ready() {
            // Taken off the list by whoever completed it.
            self.get_mut().registered = None;
        }
        outcome
    }
}

impl Drop for TailFuture {
    fn drop(&mut self) {
        self.slot.forget_waker();
        if let Some((commit, token)) = self.registered.take() {
            // A consumer that gives up on a quiet shard leaves nothing on
            // its list (a timeout loop would otherwise grow it forever).
            commit.forget_tail(token);
        }
    }
}

/// Wakes a thread parked in a blocking wait.
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that unparks the calling thread: blocking waits share the slots
/// futures use.
pub(super) fn thread_waker() -> Waker {
    #[cfg(not(loom))]
    {
        thread_local! {
            static WAKER: Waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
        }
        WAKER.with(Waker::clone)
    }
    #[cfg(loom)]
    {
        Waker::from(Arc::new(ThreadWaker(thread::current())))
    }
}
