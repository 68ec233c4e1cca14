//! Generations: which leadership generation wrote which offsets, kept in
//! memory and in the shard's `epochs` file.
//!
//! The history only changes with the writer lock held (a new generation
//! begins at the log end, a cut or retention drops entries), so it always
//! agrees with the log it describes; the epochs file is stored before the
//! in-memory copy changes, so a failed store leaves both as they were.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use felix_epochs::{EpochHistory, EpochsFile, LeaderAnswer, Recorded};

use super::core::Core;
use super::log::WriterState;
use crate::error::{Result, StorageError};

/// The history and the file that keeps it.
#[derive(Debug)]
pub(crate) struct Generations {
    history: Mutex<EpochHistory>,
    file: EpochsFile,
}

impl Generations {
    pub(crate) fn new(history: EpochHistory, file: EpochsFile) -> Self {
        Self {
            history: Mutex::new(history),
            file,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, EpochHistory> {
        self.history.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Core {
    /// Records that `generation` begins at the log end (a new leader's term
    /// begins there) and stores the epochs file.
    pub(crate) fn begin_generation(&self, generation: u64) -> Result<Recorded> {
        let state = self.lock_writer()?;
        self.record_generation(&state, generation, state.writer.next_offset())
    }

    /// Records that `generation` begins at `start` (the log end, with the
    /// writer lock held) and stores the epochs file.
    pub(crate) fn record_generation(
        &self,
        state: &WriterState,
        generation: u64,
        start: u64,
    ) -> Result<Recorded> {
        debug_assert_eq!(
            start,
            state.writer.next_offset(),
            "a generation begins at the log end"
        );
        let mut next = self.generations.lock().clone();
        let recorded =
            next.record(generation, start)
                .map_err(|refusal| StorageError::Generation {
                    shard: Arc::clone(&self.label),
                    refusal,
                })?;
        self.update_history(|history| {
            *history = next;
            true
        })?;
        Ok(recorded)
    }

    /// The leader's answer to a follower asking where `generation` ended.
    pub(crate) fn end_offset_for(&self, generation: u64) -> Option<LeaderAnswer> {
        let end = self.log.view().active_limit.next_offset;
        self.generations.lock().end_offset_for(generation, end)
    }

    /// Drops history entries at or above a truncation point, after the log
    /// was cut: the log is cut first so that a crash in between leaves a
    /// history past the log end, which the next open cuts back.
    pub(crate) fn cut_history(&self, offset: u64) -> Result<()> {
        self.update_history(|history| history.truncate_from(offset) > 0)
    }

    /// Applies `change` to a copy of the history and, if it changed
    /// anything, stores the copy; only once the store succeeded does the
    /// shard's history become the copy. A failed store (its fsync included)
    /// is never retried: it stops the shard's writes like any other.
    pub(crate) fn update_history(
        &self,
        change: impl FnOnce(&mut EpochHistory) -> bool,
    ) -> Result<()> {
        let mut history = self.generations.lock();
        let mut next = history.clone();
        if !change(&mut next) {
            return Ok(());
        }
        self.generations.file.store(&next).map_err(|source| {
            self.poison_with(StorageError::Epochs {
                shard: Arc::clone(&self.label),
                source,
            })
        })?;
        *history = next;
        Ok(())
    }
}
