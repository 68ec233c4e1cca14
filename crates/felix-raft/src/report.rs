//! Reporting an append durable to openraft from the sync that covered it,
//! on the thread that ran the sync.
//!
//! openraft 0.9 awaits each append's report before its next command
//! (`RaftCore::append_to_log`), so the report is on every commit's path,
//! and every thread it passes through is one more wake-up. The report is a
//! `Waker` of the shard's `DurableFuture`: the sync worker that settles
//! the future wakes it, and the wake polls the (now ready) future and calls
//! openraft's callback right there — one send on openraft's channel, never
//! blocking. No task, no dispatch thread, no runtime needed. The shard
//! wakes the completions of one shard in offset order, so reports reach
//! openraft in append order.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use felix_storage::DurableFuture;

/// A durability report waiting for its future; taken when it fires, so it
/// fires once.
pub(crate) struct Report<F> {
    pending: Mutex<Option<(DurableFuture, F)>>,
}

impl<F> Report<F>
where
    F: FnOnce(felix_storage::Result<()>) + Send + 'static,
{
    /// Calls `report` with `durable`'s outcome once it resolves: now, if it
    /// has, or from the thread that resolves it.
    pub(crate) fn spawn(durable: DurableFuture, report: F) {
        let this = Arc::new(Self {
            pending: Mutex::new(Some((durable, report))),
        });
        this.poll();
    }

    fn poll(self: &Arc<Self>) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((durable, _)) = pending.as_mut() else {
            return;
        };
        let waker = Waker::from(Arc::clone(self));
        let mut cx = Context::from_waker(&waker);
        if let Poll::Ready(outcome) = Pin::new(durable).poll(&mut cx)
            && let Some((_, report)) = pending.take()
        {
            drop(pending);
            report(outcome);
        }
    }
}

impl<F> Wake for Report<F>
where
    F: FnOnce(felix_storage::Result<()>) + Send + 'static,
{
    fn wake(self: Arc<Self>) {
        self.poll();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.poll();
    }
}
