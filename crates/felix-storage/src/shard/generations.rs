//! Generations: which leadership generation wrote which offsets, kept in
//! memory and in the shard's `epochs` file.
//!
//! [`Generations`] owns the history and the file, beside the log: neither
//! calls the other. The shard's operations change the history only with
//! the log's writer lock held (a new generation begins at the log end, a
//! cut or retention drops entries), so it always agrees with the log it
//! describes; the epochs file is stored before the in-memory copy changes,
//! so a failed store leaves both as they were (and stops the shard's
//! writes, through group commit).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use felix_epochs::{
    Divergence, EpochHistory, EpochsFile, HistoryError, LeaderAnswer, Recorded, divergence_point,
};

use super::commit::Commit;
use crate::error::{Result, StorageError};

/// The history, the file that keeps it, and the shard it belongs to.
#[derive(Debug)]
pub(crate) struct Generations {
    history: Mutex<EpochHistory>,
    file: EpochsFile,
    label: Arc<str>,
    /// Poisoned when the file cannot be stored.
    commit: Arc<Commit>,
}

impl Generations {
    /// The `history` an open loaded from `file`.
    pub(crate) fn new(
        history: EpochHistory,
        file: EpochsFile,
        label: Arc<str>,
        commit: Arc<Commit>,
    ) -> Self {
        Self {
            history: Mutex::new(history),
            file,
            label,
            commit,
        }
    }

    fn lock(&self) -> MutexGuard<'_, EpochHistory> {
        self.history.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A copy of the history.
    pub(crate) fn history(&self) -> EpochHistory {
        self.lock().clone()
    }

    /// The generation that wrote `offset`, as far as the history knows.
    pub(crate) fn generation_at(&self, offset: u64) -> Option<u64> {
        self.lock().generation_at(offset)
    }

    /// The newest generation the history knows.
    pub(crate) fn latest(&self) -> Option<u64> {
        self.lock().latest().map(|e| e.generation)
    }

    /// Records that `generation` begins at `start`, the log end (the
    /// caller holds the writer lock), and stores the epochs file.
    pub(crate) fn record(&self, generation: u64, start: u64) -> Result<Recorded> {
        let mut next = self.history();
        let recorded =
            next.record(generation, start)
                .map_err(|refusal| StorageError::Generation {
                    shard: Arc::clone(&self.label),
                    refusal,
                })?;
        self.update(|history| {
            *history = next;
            true
        })?;
        Ok(recorded)
    }

    /// Refuses a batch whose `generations` go backwards (from the
    /// history's latest, or within the batch) before anything is written.
    pub(crate) fn check_ascending(&self, generations: impl Iterator<Item = u64>) -> Result<()> {
        let mut last = self.latest();
        for generation in generations {
            if let Some(previous) = last
                && generation < previous
            {
                return Err(StorageError::Generation {
                    shard: Arc::clone(&self.label),
                    refusal: HistoryError::GenerationWentBackwards {
                        last: previous,
                        requested: generation,
                    },
                });
            }
            last = Some(generation);
        }
        Ok(())
    }

    /// The leader's answer to a follower asking where `generation` ended,
    /// for a log ending at `end`.
    pub(crate) fn end_offset_for(&self, generation: u64, end: u64) -> Option<LeaderAnswer> {
        self.lock().end_offset_for(generation, end)
    }

    /// Where a follower's log ending at `end` parts from the leader's,
    /// given the leader's `answer`.
    pub(crate) fn divergence(&self, end: u64, answer: LeaderAnswer) -> Divergence {
        divergence_point(&self.lock(), end, answer)
    }

    /// Drops history entries at or above a truncation point, after the log
    /// was cut: the log is cut first so that a crash in between leaves a
    /// history past the log end, which the next open cuts back.
    pub(crate) fn cut_from(&self, offset: u64) -> Result<()> {
        self.update(|history| history.truncate_from(offset) > 0)
    }

    /// Drops history entries below `offset`, after the log start moved
    /// there.
    pub(crate) fn cut_before(&self, offset: u64) -> Result<()> {
        self.update(|history| history.truncate_before(offset) > 0)
    }

    /// Forgets every generation (the log was reset).
    pub(crate) fn clear(&self) -> Result<()> {
        self.update(|history| {
            *history = EpochHistory::new();
            true
        })
    }

    /// Applies `change` to a copy of the history and, if it changed
    /// anything, stores the copy; only once the store succeeded does the
    /// shard's history become the copy. A failed store (its fsync included)
    /// is never retried: it stops the shard's writes like any other.
    fn update(&self, change: impl FnOnce(&mut EpochHistory) -> bool) -> Result<()> {
        let mut history = self.lock();
        let mut next = history.clone();
        if !change(&mut next) {
            return Ok(());
        }
        self.file.store(&next).map_err(|source| {
            self.commit.poison_with(StorageError::Epochs {
                shard: Arc::clone(&self.label),
                source,
            })
        })?;
        *history = next;
        Ok(())
    }
}
