//! Write combining for on-commit appends: concurrent batches share one
//! `write`, as they share one `fdatasync` in `commit/`; and the writer
//! lock's one way in, [`WriterGuard`].
//!
//! An on-commit appender does not take the writer lock. It takes the short
//! `queue` lock, is assigned its offsets there, copies its records (payloads
//! are `Bytes`, so a copy is a reference count) into the queue, and leaves.
//! The first appender to find no leader becomes the leader: it takes the
//! writer lock and writes whatever has queued, in one `write` per segment,
//! until the queue is empty or it has written [`MAX_LEAD_ROUNDS`] times;
//! then it hands the lead to the owner of the oldest queued batch, so no
//! appender leads forever under a steady stream of others. Everyone then
//! waits for durability as before, so an appender that is not the leader
//! parks once per append and never touches the writer lock or makes a
//! system call of its own.
//!
//! Offsets are assigned in the queue, so everything else that writes must
//! agree with it: [`WriterGuard`], the only way to the writer lock besides
//! the leader's, also locks the queue, writes what it holds first, and keeps
//! it locked while held, so a direct append, truncation or roll sees a
//! writer whose next offset is the queue's (asserted in debug builds).

use std::ops::{Deref, DerefMut};

use felix_format::record_encoded_len;
use felix_segment::Record;

use super::{Held, Log, Synced, WriterState};
use crate::error::{Result, StorageError};
use crate::loom::sync::{MutexGuard, TryMutexGuard};
use crate::loom::thread::{self, Thread};
use crate::shard::AppendReceipt;
use crate::stats::Counters;

/// Rounds of writes a leader makes before handing the lead over.
pub(crate) const MAX_LEAD_ROUNDS: usize = 4;

/// Batches assigned offsets but not yet written.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    /// Queued records, contiguous from `next - records.len()`.
    records: Vec<Record>,
    /// Where each batch ends in `records` (a batch is never split across
    /// segments, so rolls need the boundaries).
    ends: Vec<usize>,
    /// The appender of each queued batch, to hand the lead to; `None` for
    /// a batch queued by an append with a completion, whose caller never
    /// waits to be handed anything (the sync worker writes it).
    owners: Vec<Option<Thread>>,
    /// The offset the next queued record gets: the writer's next offset plus
    /// everything queued or being written by the leader.
    next: u64,
    /// Whether a leader is writing; it drains until the queue is empty.
    leading: bool,
}

impl Queue {
    pub(crate) fn new(next: u64) -> Self {
        Self {
            next,
            ..Self::default()
        }
    }
}

/// The leader's (or a guard's) spare buffers, swapped with the queue's so
/// neither allocates once warm.
#[derive(Debug, Default)]
pub(crate) struct Spare {
    records: Vec<Record>,
    ends: Vec<usize>,
}

/// The writer lock with the queue drained and held: see the module docs.
pub(crate) struct WriterGuard<'a> {
    /// Poisons the shard if a panic that began while the guard was held
    /// unwinds through it; first, so before the lock is let go.
    _unwinding: PoisonOnPanic<'a>,
    log: &'a Log,
    state: TryMutexGuard<'a, WriterState>,
    /// `None` on shards that never queue (durability other than on-commit):
    /// their appends skip a lock they do not need.
    queue: Option<MutexGuard<'a, Queue>>,
}

impl Deref for WriterGuard<'_> {
    type Target = WriterState;

    fn deref(&self) -> &WriterState {
        &self.state
    }
}

impl DerefMut for WriterGuard<'_> {
    fn deref_mut(&mut self) -> &mut WriterState {
        &mut self.state
    }
}

impl Drop for WriterGuard<'_> {
    /// Whatever the holder did (appended, truncated, reset), the queue
    /// continues from the writer's next offset. A holder that panicked
    /// poisons the shard (`_unwinding`, dropped after this, before the
    /// lock is let go; see the log's module docs).
    fn drop(&mut self) {
        let next = self.state.writer.next_offset();
        if let Some(queue) = &mut self.queue {
            queue.next = next;
        }
        self.log.commit.set_assigned(next);
    }
}

impl Log {
    /// The writer lock and the queue (see [`Log::writer_state`]), for a
    /// change of the log: refused once the shard is closed or poisoned.
    /// Close marks the shard closed with both held, so nothing changes the
    /// log after it.
    pub(crate) fn lock_writer(&self) -> Result<WriterGuard<'_>> {
        let guard = self.writer_state();
        self.check_open()?;
        self.check_poison()?;
        Ok(guard)
    }

    /// Takes the writer lock and the queue, writing whatever is queued first.
    /// A failure to write poisons the shard, and so does finding that a
    /// panic interrupted the lock's last holder; holders check for that.
    pub(crate) fn writer_state(&self) -> WriterGuard<'_> {
        let state = self.whole(self.lock_state());
        self.guard_writer(state)
    }

    /// Writes what is queued if the writer lock is free now, and says
    /// whether it was (group commit's `QueuedWrites`, through the shard):
    /// taking the lock writes the queue, then pokes the pool for the
    /// waiters it covered. Someone holding the lock writes it instead.
    pub(crate) fn write_queued(&self) -> bool {
        self.try_writer_state().map(drop).is_some()
    }

    /// [`Log::writer_state`] if the writer lock is free now; `None` while
    /// someone holds it (who writes what is queued).
    fn try_writer_state(&self) -> Option<WriterGuard<'_>> {
        let state = self.whole(self.try_lock_state()?);
        Some(self.guard_writer(state))
    }

    /// The writer lock as taken, with the shard poisoned if a panic
    /// interrupted its previous holder: nothing is written after a write
    /// that was cut short.
    fn whole<'a>(&self, held: Held<'a>) -> TryMutexGuard<'a, WriterState> {
        match held {
            Held::Whole(state) => state,
            Held::Interrupted(state) => {
                self.poison_with(self.write_interrupted());
                state
            }
        }
    }

    /// Why the shard stops when a panic interrupts a write.
    fn write_interrupted(&self) -> StorageError {
        StorageError::WriteInterrupted {
            shard: std::sync::Arc::clone(&self.shared.label),
        }
    }

    /// The writer lock held as `state`, with the queue taken and drained.
    /// A panic while draining poisons the shard at once, failing the
    /// waiters of the batches taken from the queue: the thread draining may
    /// be the sync worker, which nothing would ask again.
    pub(super) fn guard_writer<'a>(
        &'a self,
        mut state: TryMutexGuard<'a, WriterState>,
    ) -> WriterGuard<'a> {
        let unwinding = PoisonOnPanic::new(self);
        if !self.commit.on_commit() {
            return WriterGuard {
                _unwinding: unwinding,
                log: self,
                state,
                queue: None,
            };
        }
        let mut queue = self.queue();
        if !queue.records.is_empty() {
            let mut spare = std::mem::take(&mut state.spare);
            std::mem::swap(&mut spare.records, &mut queue.records);
            std::mem::swap(&mut spare.ends, &mut queue.ends);
            queue.owners.clear();
            // An error has poisoned the shard, which the holder sees.
            let _ = self.write_batches(&mut state, &spare);
            spare.records.clear();
            spare.ends.clear();
            state.spare = spare;
            // Their appenders may be parked waiting for a sync of them.
            self.commit.poke();
        }
        debug_assert!(
            queue.records.is_empty() || self.check_poison().is_err(),
            "the queue is drained under the writer lock"
        );
        debug_assert!(
            queue.next == state.writer.next_offset() || self.check_poison().is_err(),
            "queue and writer agree on the next offset: {} vs {}",
            queue.next,
            state.writer.next_offset()
        );
        WriterGuard {
            _unwinding: unwinding,
            log: self,
            state,
            queue: Some(queue),
        }
    }

    /// Queues a validated batch, assigning its offsets: `owner` is the
    /// thread to hand the lead to, and when it is given, whether it must
    /// lead now (nobody does). Without one the batch waits for a leader or
    /// for the sync worker, which writes what is queued before it syncs.
    fn enqueue(&self, records: &[Record], owner: Option<Thread>) -> Result<(AppendReceipt, bool)> {
        let mut queue = self.queue();
        // Close marks the shard with the queue held: nothing is queued
        // after it.
        self.check_open()?;
        self.check_poison()?;
        let first_offset = queue.next;
        // Refused before the batch is queued: offsets assigned here are a
        // promise the leader must keep.
        let next = self.check_offsets(first_offset, records.len())?;
        queue.records.extend_from_slice(records);
        let end = queue.records.len();
        queue.ends.push(end);
        let lead = owner.is_some() && !std::mem::replace(&mut queue.leading, true);
        queue.owners.push(owner);
        queue.next = next;
        self.commit.set_assigned(queue.next);
        let receipt = AppendReceipt {
            first_offset,
            last_offset: queue.next - 1,
        };
        Ok((receipt, lead))
    }

    /// An on-commit append with a completion, queued for the sync already
    /// pending to write (`Commit::sync_pending`): its offsets are assigned
    /// and it is written, with whatever else queued, in one `write` before
    /// that sync (or by a combining leader first). The batch has been
    /// validated.
    pub(crate) fn append_queued(&self, records: &[Record]) -> Result<AppendReceipt> {
        Ok(self.enqueue(records, None)?.0)
    }

    /// An on-commit append through the queue (see the module docs). The
    /// batch has been validated.
    pub(crate) fn append_combined(&self, records: &[Record]) -> Result<AppendReceipt> {
        let (receipt, lead) = self.enqueue(records, Some(thread::current()))?;
        if lead {
            self.lead()?;
        }
        // A leader that hands over wakes the owner of the oldest queued
        // batch, which takes the lead from inside its wait. The batch has
        // its offsets: a failure from here on covered it.
        self.commit
            .wait_durable_with(receipt.last_offset + 1, true, &|| self.take_lead())?;
        Ok(receipt)
    }

    /// Leads if batches are queued and nobody leads (the previous leader
    /// handed over).
    fn take_lead(&self) -> Result<()> {
        {
            let mut queue = self.queue();
            if queue.leading || queue.records.is_empty() {
                return Ok(());
            }
            queue.leading = true;
        }
        self.lead()
    }

    /// Writes what is queued until the queue is empty, then gives up the
    /// lead. Appenders that queue meanwhile are written by the next round;
    /// after [`MAX_LEAD_ROUNDS`] rounds the lead passes on.
    fn lead(&self) -> Result<()> {
        let mut rounds = 0;
        let mut last;
        // A panic in a round poisons the shard, failing the waiters of the
        // batches it took from the queue.
        let _unwinding = PoisonOnPanic::new(self);
        loop {
            let mut state = self.whole(self.lock_state());
            let mut spare = std::mem::take(&mut state.spare);
            {
                let mut queue = self.queue();
                if queue.records.is_empty() {
                    queue.leading = false;
                    state.spare = spare;
                    return Ok(());
                }
                last = rounds >= self.max_lead_rounds();
                if last && let Some(next) = queue.owners.iter().flatten().next().cloned() {
                    // This appender's own batch went out in the first
                    // round; the oldest queued one's owner leads next.
                    queue.leading = false;
                    drop(queue);
                    state.spare = spare;
                    drop(state);
                    next.unpark();
                    Counters::add(&self.shared.counters.lead_handoffs, 1);
                    return Ok(());
                }
                // Past the rounds with only batches of appends with a
                // completion left (whose callers take no lead): one more
                // round writes them, then the lead ends. Handing over
                // without writing would leave them to a poke of the pool
                // that a worker about to find the writer lock taken could
                // miss.
                std::mem::swap(&mut spare.records, &mut queue.records);
                std::mem::swap(&mut spare.ends, &mut queue.ends);
                queue.owners.clear();
            }
            rounds += 1;
            // The queue is free again: appenders queue behind this write.
            let written = self.write_batches(&mut state, &spare);
            spare.records.clear();
            spare.ends.clear();
            state.spare = spare;
            drop(state);
            if let Err(err) = written {
                // Poisoned: nothing queued will ever be written, and every
                // waiter has been woken to the error.
                self.queue().leading = false;
                return Err(err);
            }
            // Every poke of the pool follows a write: a worker that found
            // the writer lock taken either sees what was written when it
            // looks again, or has stopped being queued by then, so the
            // poke queues it.
            self.commit.poke();
            if last {
                let next = {
                    let mut queue = self.queue();
                    queue.leading = false;
                    queue.owners.iter().flatten().next().cloned()
                };
                // An appender that queued during the last write leads next.
                if let Some(next) = next {
                    next.unpark();
                    Counters::add(&self.shared.counters.lead_handoffs, 1);
                }
                return Ok(());
            }
        }
    }

    /// Writes queued batches at the writer's end: consecutive batches that
    /// fit the active segment in one `write`, rolling between batches as
    /// single appends would.
    fn write_batches(&self, state: &mut WriterState, batches: &Spare) -> Result<()> {
        #[cfg(test)]
        if PANIC_IN_WRITE.get() {
            panic!("a write of queued batches cut short");
        }
        self.check_poison()?;
        debug_assert_eq!(
            batches.records.len(),
            batches.ends.last().copied().unwrap_or(0),
            "batch ends cover the queued records"
        );
        let limit = self.shared.config.segment_size_bytes;
        let mut run_start = 0;
        let mut run_bytes = 0u64;
        let mut run_batches = 0u64;
        let mut start = 0;
        for &end in &batches.ends {
            let batch = batches.records.get(start..end).unwrap_or_default();
            let bytes: u64 = batch
                .iter()
                .map(|r| record_encoded_len(r.payload.len() as u32))
                .sum();
            let nonempty = !state.writer.is_empty() || run_batches > 0;
            if nonempty && state.writer.len() + run_bytes + bytes > limit {
                if run_batches > 0 {
                    let run = batches.records.get(run_start..start).unwrap_or_default();
                    self.write_run(state, run, run_batches, run_bytes, Synced::ByCaller)?;
                }
                if !state.writer.is_empty() {
                    // Queued batches already have their offsets, so a roll
                    // refused here (no segment id left) cannot leave them
                    // unwritten and the shard going: it stops the shard, as
                    // a failed write does, and a reopen resumes.
                    self.roll(state).map_err(|e| match e {
                        e @ StorageError::SegmentIdsExhausted { .. } => self.poison_with(e),
                        other => other,
                    })?;
                }
                run_start = start;
                run_bytes = 0;
                run_batches = 0;
            }
            // Each batch is one append call for the batch-size histogram.
            self.shared.metrics.batch(batch.len());
            run_bytes += bytes;
            run_batches += 1;
            start = end;
        }
        if run_batches > 0 {
            let run = batches.records.get(run_start..start).unwrap_or_default();
            self.write_run(state, run, run_batches, run_bytes, Synced::ByCaller)?;
        }
        Ok(())
    }
}

/// Poisons the shard with `WriteInterrupted` if dropped by a panic that
/// began after it was made: like std's `Mutex`, a guard taken while the
/// thread was already unwinding (a close run by a destructor during a
/// panic) poisons nothing for that panic.
pub(super) struct PoisonOnPanic<'a> {
    log: &'a Log,
    /// Whether the thread was panicking when this was made.
    panicking: bool,
}

impl<'a> PoisonOnPanic<'a> {
    fn new(log: &'a Log) -> Self {
        Self {
            log,
            panicking: std::thread::panicking(),
        }
    }
}

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        if !self.panicking && std::thread::panicking() {
            self.log.poison_with(self.log.write_interrupted());
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Makes this thread's next writes of queued batches panic (tests of
    /// a panic under the writer lock).
    pub(super) static PANIC_IN_WRITE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
