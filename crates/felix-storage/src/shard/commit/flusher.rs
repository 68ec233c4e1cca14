//! The flusher: the thread that syncs back to back while appenders wait,
//! started on a shard's first wait so that shards that never wait own no
//! thread.

use std::sync::Arc;

use super::Commit;
use crate::error::{Result, StorageError};

impl Commit {
    /// Starts the flusher thread on first use, so shards that never wait
    /// for durability never own a thread.
    pub(super) fn ensure_flusher(self: &Arc<Self>) -> Result<()> {
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
                source: felix_io::IoError::new(
                    "spawn flusher thread",
                    std::path::Path::new(&*self.label),
                    e,
                )
                .into(),
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
                && (std::mem::take(&mut state.writeback) || state.waiters.needs_sync(durable));
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
            let result = self.metrics.sync(|| handle.sync_data());
            if self.finish_sync(upto, epoch, result).is_err() {
                return;
            }
            state = self.lock();
        }
    }

    /// Asks the flusher for one sync although nobody waits: appends that are
    /// not synced as they go call this every so many bytes, so dirty data
    /// is written back as it accumulates and sealing a segment (which syncs
    /// it) waits for the last stretch only, not for a whole segment's
    /// worth. Only an optimisation: when no flusher can be started, the
    /// data is synced at the next seal or explicit sync as without it.
    pub(crate) fn request_writeback(self: &Arc<Self>) {
        if let Err(err) = self.ensure_flusher() {
            tracing::warn!(shard = %self.label, error = %err, "no background writeback");
            return;
        }
        let mut state = self.lock();
        state.writeback = true;
        if std::mem::take(&mut state.flusher_idle) {
            drop(state);
            self.work.notify_one();
        }
    }

    /// Stops the flusher (at close or drop) and waits for it.
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
