//! Waiting for the tail: a consumer parks until records past its offset
//! become readable, woken by the append or sync that makes them so.
//!
//! A consumer whose reads end at the durable offset waits on the sync that
//! moves it; one whose reads end at what is written waits on the append
//! that writes. Appends take the commit lock to wake someone only while a
//! consumer watches the written offset (`Commit::tail_written`): the
//! consumer registers before it looks at the offset, and the append
//! publishes the offset before it looks for consumers, both sequentially
//! consistent, so one of the two always sees the other and no wake-up is
//! lost.

use std::sync::atomic::Ordering::SeqCst;
use std::time::Instant;

use super::{Commit, Wake, Watch};
use crate::error::Result;
use crate::shard::bounds::{ReadBound, Tail, readable_end};

impl Commit {
    /// Waits until a record at or past `from` is readable under `bound`,
    /// until `deadline`, and says what it saw. Returns at once when it
    /// already is, when nothing can become readable under `bound`, or when
    /// the shard is poisoned and everything acknowledged lies below `from`;
    /// a close fails the wait with [`crate::StorageError::Closed`].
    pub(crate) fn wait_readable(
        &self,
        from: u64,
        bound: ReadBound,
        deadline: Option<Instant>,
    ) -> Result<Tail> {
        if let ReadBound::Below(offset) = bound
            && offset <= from
        {
            return Ok(Tail::BoundReached { bound: offset });
        }
        let watch = match bound {
            ReadBound::Committed if self.on_commit => Watch::TailDurable,
            _ => Watch::TailWritten,
        };
        let target = from.saturating_add(1);
        let mut token = None;
        let mut state = self.lock();
        let outcome = loop {
            if let Err(err) = self.check_open() {
                break Err(err);
            }
            if token.is_none() {
                token = Some(state.waiters.add(watch, target, Wake::current_thread()));
                self.tail_written
                    .store(state.waiters.tail_written(), SeqCst);
            }
            // Read after registering: see the module docs.
            let written = self.written.load(SeqCst);
            let poisoned = self.poison.get().is_some();
            let end = readable_end(bound, written, state.durable, self.on_commit, poisoned);
            if end > from {
                break Ok(Tail::Readable { end });
            }
            if poisoned {
                break Ok(Tail::Poisoned { end });
            }
            let now = Instant::now();
            let wait = match deadline {
                Some(deadline) if deadline <= now => break Ok(Tail::TimedOut { end }),
                Some(deadline) => Some(deadline - now),
                None => None,
            };
            drop(state);
            match wait {
                Some(wait) => std::thread::park_timeout(wait),
                None => std::thread::park(),
            }
            state = self.lock();
            // Taken off the list when covered: register again if what was
            // covered is still not readable (a cut of the log, say).
            if let Some(t) = token
                && !state.waiters.contains(t)
            {
                token = None;
            }
        };
        if let Some(t) = token {
            state.waiters.remove(t);
            self.tail_written
                .store(state.waiters.tail_written(), SeqCst);
        }
        outcome
    }
}
