//! The generation history in memory: which generation began at which offset.
//!
//! The invariant every method keeps is that entries ascend strictly in both
//! generation and start offset, and that there are at most
//! [`MAX_EPOCH_ENTRIES`] of them. Strict ascent is what makes the history an
//! answer at all: with it, every offset at or above the first entry's start
//! belongs to exactly one generation, and every generation to one range of
//! offsets. Nothing here does I/O, so the rules can be tested against a model.

use felix_format::epochs::{EpochEntry, MAX_EPOCH_ENTRIES};

use crate::divergence::LeaderAnswer;

/// Why a history cannot be built or changed as asked.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    /// A generation below the latest one was recorded.
    #[error(
        "generation {requested} is below the latest recorded generation {last}; generations never go backwards"
    )]
    GenerationWentBackwards {
        /// The latest recorded generation.
        last: u64,
        /// The generation that was to be recorded.
        requested: u64,
    },
    /// A generation was to start below the offset where the latest began.
    #[error(
        "generation {generation} cannot start at offset {requested}, below offset {last_start} where generation {last_generation} started; start offsets never go backwards"
    )]
    StartOffsetWentBackwards {
        /// The latest recorded generation.
        last_generation: u64,
        /// Where the latest recorded generation started.
        last_start: u64,
        /// The generation that was to be recorded.
        generation: u64,
        /// The start offset that was asked for.
        requested: u64,
    },
    /// More entries than [`MAX_EPOCH_ENTRIES`] were given.
    #[error("a generation history holds at most {max} entries, {count} were given")]
    TooManyEntries {
        /// Entries given.
        count: usize,
        /// [`MAX_EPOCH_ENTRIES`].
        max: usize,
    },
    /// An entry does not ascend from the one before it in both generation and
    /// start offset.
    #[error(
        "entry {index} (generation {}, start offset {}) does not ascend from the entry before it (generation {}, start offset {})",
        .entry.generation, .entry.start_offset, .previous.generation, .previous.start_offset
    )]
    NotAscending {
        /// Position of the offending entry.
        index: usize,
        /// The entry before it.
        previous: EpochEntry,
        /// The offending entry.
        entry: EpochEntry,
    },
}

/// What [`EpochHistory::record`] did.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// The generation became the new latest entry.
    Appended,
    /// The latest entry began at the same offset, so its generation wrote
    /// nothing and the new generation took its place.
    Replaced {
        /// The entry that was replaced.
        previous: EpochEntry,
    },
    /// The history was full, so the oldest entry was dropped to make room.
    ///
    /// Offsets below the new oldest entry then have no known generation,
    /// exactly as if retention had removed them; see
    /// [`EpochHistory::record`] for why this is preferred to refusing.
    AppendedDroppingOldest {
        /// The entry that was dropped.
        dropped: EpochEntry,
    },
    /// The generation is already the latest; its recorded start stays, since
    /// a generation begins where its first record went.
    AlreadyLatest,
}

/// Where each leadership generation of a shard began, oldest first.
///
/// ```
/// # use felix_epochs::{EpochHistory, Recorded};
/// let mut history = EpochHistory::new();
/// assert_eq!(history.record(1, 0)?, Recorded::Appended);
/// assert_eq!(history.record(2, 10)?, Recorded::Appended);
/// assert_eq!(history.generation_at(9), Some(1));
/// assert_eq!(history.generation_at(10), Some(2));
/// # Ok::<(), felix_epochs::HistoryError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EpochHistory {
    entries: Vec<EpochEntry>,
}

impl EpochHistory {
    /// An empty history: no generation is known for any offset.
    ///
    /// ```
    /// # use felix_epochs::EpochHistory;
    /// let history = EpochHistory::new();
    /// assert!(history.is_empty());
    /// assert_eq!(history.generation_at(0), None);
    /// ```
    pub const fn new() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// Builds a history from entries, oldest first, checking the invariant.
    ///
    /// Fails with `TooManyEntries` above [`MAX_EPOCH_ENTRIES`] and with
    /// `NotAscending` naming the first entry whose generation or start offset
    /// is not strictly above the one before it.
    ///
    /// ```
    /// # use felix_epochs::{EpochEntry, EpochHistory, HistoryError};
    /// let a = EpochEntry { generation: 1, start_offset: 0 };
    /// let b = EpochEntry { generation: 2, start_offset: 0 };
    /// assert_eq!(
    ///     EpochHistory::from_entries(vec![a, b]),
    ///     Err(HistoryError::NotAscending { index: 1, previous: a, entry: b }),
    /// );
    /// ```
    pub fn from_entries(entries: Vec<EpochEntry>) -> Result<Self, HistoryError> {
        if entries.len() > MAX_EPOCH_ENTRIES {
            return Err(HistoryError::TooManyEntries {
                count: entries.len(),
                max: MAX_EPOCH_ENTRIES,
            });
        }
        for (index, pair) in entries.windows(2).enumerate() {
            if let [previous, entry] = *pair
                && (entry.generation <= previous.generation
                    || entry.start_offset <= previous.start_offset)
            {
                return Err(HistoryError::NotAscending {
                    index: index + 1,
                    previous,
                    entry,
                });
            }
        }
        Ok(Self { entries })
    }

    /// Asserts, in debug builds, the invariant every method keeps: entries
    /// ascend strictly in generation and in start offset, at most
    /// [`MAX_EPOCH_ENTRIES`] of them. Called where a history crosses a
    /// boundary (after each change, before it is encoded, after it is
    /// decoded), so a broken history is caught where it was made, not
    /// when a truncation point taken from it loses records.
    pub(crate) fn debug_assert_ascending(&self, when: &str) {
        if cfg!(debug_assertions) {
            debug_assert!(
                self.entries.len() <= MAX_EPOCH_ENTRIES,
                "epochs history {when}: {} entries, more than {MAX_EPOCH_ENTRIES}",
                self.entries.len()
            );
            for (index, pair) in self.entries.windows(2).enumerate() {
                if let [previous, entry] = pair {
                    debug_assert!(
                        entry.generation > previous.generation
                            && entry.start_offset > previous.start_offset,
                        "epochs history {when}: entry {} (generation {}, start offset {}) does not ascend from entry {index} (generation {}, start offset {})",
                        index + 1,
                        entry.generation,
                        entry.start_offset,
                        previous.generation,
                        previous.start_offset
                    );
                }
            }
        }
    }

    /// The entries, oldest first.
    ///
    /// ```
    /// # use felix_epochs::EpochHistory;
    /// let mut history = EpochHistory::new();
    /// history.record(4, 7)?;
    /// assert_eq!(history.entries()[0].generation, 4);
    /// # Ok::<(), felix_epochs::HistoryError>(())
    /// ```
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// How many generations are recorded.
    ///
    /// ```
    /// # use felix_epochs::EpochHistory;
    /// assert_eq!(EpochHistory::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no generation is recorded.
    ///
    /// ```
    /// # use felix_epochs::EpochHistory;
    /// assert!(EpochHistory::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The oldest recorded entry; offsets below its start have no known
    /// generation.
    ///
    /// ```
    /// # use felix_epochs::EpochHistory;
    /// let mut history = EpochHistory::new();
    /// history.record(1, 5)?;
    /// history.record(2, 9)?;
    /// assert_eq!(history.earliest().map(|e| e.start_offset), Some(5));
    /// # Ok::<(), felix_epochs::HistoryError>(())
    /// ```
    pub fn earliest(&self) -> Option<EpochEntry> {
        self.entries.first().copied()
    }

    /// The newest recorded entry: the generation now writing, or last to write.
    ///
    /// ```
    /// # use felix_epochs::EpochHistory;
    /// let mut history = EpochHistory::new();
    /// history.record(1, 5)?;
    /// history.record(2, 9)?;
    /// assert_eq!(history.latest().map(|e| e.generation), Some(2));
    /// # Ok::<(), felix_epochs::HistoryError>(())
    /// ```
    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// Records that `generation` begins at `start_offset`, the log end at the
    /// moment a new leader's term begins (or a follower's first record of it).
    ///
    /// Generations and start offsets never go backwards, because an entry is
    /// later used as a truncation point and a backwards step would make two
    /// generations claim the same records:
    ///
    /// - a generation below the latest fails with `GenerationWentBackwards`;
    /// - a start below the latest entry's fails with `StartOffsetWentBackwards`;
    /// - the latest generation again is `AlreadyLatest` and changes nothing;
    /// - a newer generation at the latest entry's start `Replaced` it, since
    ///   that generation wrote nothing;
    /// - otherwise the generation is `Appended`.
    ///
    /// When the history already holds [`MAX_EPOCH_ENTRIES`] entries, the
    /// oldest is dropped (`AppendedDroppingOldest`) rather than the new
    /// generation refused. Refusing would stop a leader from taking over,
    /// trading availability for the ability to repair a divergence thousands
    /// of leadership changes deep, which retention has almost always removed.
    ///
    /// ```
    /// # use felix_epochs::{EpochEntry, EpochHistory, HistoryError, Recorded};
    /// let mut history = EpochHistory::new();
    /// history.record(3, 10)?;
    /// // Generation 3 wrote nothing before generation 4 began.
    /// assert_eq!(
    ///     history.record(4, 10)?,
    ///     Recorded::Replaced { previous: EpochEntry { generation: 3, start_offset: 10 } },
    /// );
    /// assert_eq!(
    ///     history.record(2, 12),
    ///     Err(HistoryError::GenerationWentBackwards { last: 4, requested: 2 }),
    /// );
    /// # Ok::<(), HistoryError>(())
    /// ```
    pub fn record(&mut self, generation: u64, start_offset: u64) -> Result<Recorded, HistoryError> {
        let recorded = self.record_unchecked(generation, start_offset);
        self.debug_assert_ascending("after record");
        recorded
    }

    /// [`Self::record`] without the check of its result.
    fn record_unchecked(
        &mut self,
        generation: u64,
        start_offset: u64,
    ) -> Result<Recorded, HistoryError> {
        let entry = EpochEntry {
            generation,
            start_offset,
        };
        let Some(last) = self.latest() else {
            self.entries.push(entry);
            return Ok(Recorded::Appended);
        };
        if generation < last.generation {
            return Err(HistoryError::GenerationWentBackwards {
                last: last.generation,
                requested: generation,
            });
        }
        if start_offset < last.start_offset {
            return Err(HistoryError::StartOffsetWentBackwards {
                last_generation: last.generation,
                last_start: last.start_offset,
                generation,
                requested: start_offset,
            });
        }
        if generation == last.generation {
            return Ok(Recorded::AlreadyLatest);
        }
        if start_offset == last.start_offset {
            if let Some(slot) = self.entries.last_mut() {
                *slot = entry;
            }
            return Ok(Recorded::Replaced { previous: last });
        }
        if self.entries.len() >= MAX_EPOCH_ENTRIES {
            // The history is full, hence not empty, so there is an oldest entry.
            let dropped = self.entries.remove(0);
            self.entries.push(entry);
            return Ok(Recorded::AppendedDroppingOldest { dropped });
        }
        self.entries.push(entry);
        Ok(Recorded::Appended)
    }

    /// The generation that wrote the record at `offset`, or `None` below the
    /// oldest entry.
    ///
    /// The history does not know the log end, so any offset at or above the
    /// latest entry's start answers the latest generation; ask only about
    /// offsets the log holds.
    ///
    /// ```
    /// # use felix_epochs::EpochHistory;
    /// let mut history = EpochHistory::new();
    /// history.record(1, 5)?;
    /// history.record(3, 8)?;
    /// assert_eq!(history.generation_at(4), None);
    /// assert_eq!(history.generation_at(7), Some(1));
    /// assert_eq!(history.generation_at(8), Some(3));
    /// # Ok::<(), felix_epochs::HistoryError>(())
    /// ```
    pub fn generation_at(&self, offset: u64) -> Option<u64> {
        let covering = self.entries.partition_point(|e| e.start_offset <= offset);
        let index = covering.checked_sub(1)?;
        self.entries.get(index).map(|e| e.generation)
    }

    /// The leader's side of divergence detection: the largest generation at
    /// or below `generation`, and the offset where it ended here.
    ///
    /// The end is the next generation's start, or `log_end` when the answer
    /// is the latest generation. This is the answer of Kafka's
    /// `OffsetsForLeaderEpoch` (KIP-101, KIP-279), including its edge cases:
    ///
    /// - asked about the latest generation or a newer one, the answer is the
    ///   latest generation ending at `log_end`;
    /// - asked about a generation older than every entry, the answer is the
    ///   asked generation ending where this history begins, since everything
    ///   here from that point on was written by newer generations;
    /// - an empty history answers `None`: nothing is known, and the follower
    ///   must fall back to its own policy.
    ///
    /// `log_end` is this replica's log end, at or above the latest entry's
    /// start once the history has been cut with the log.
    ///
    /// ```
    /// # use felix_epochs::{EpochHistory, LeaderAnswer};
    /// let mut leader = EpochHistory::new();
    /// leader.record(1, 0)?;
    /// leader.record(3, 10)?;
    /// // Generation 2 never led here; generation 1 ended where 3 began.
    /// assert_eq!(leader.end_offset_for(2, 25), Some(LeaderAnswer { generation: 1, end_offset: 10 }));
    /// assert_eq!(leader.end_offset_for(3, 25), Some(LeaderAnswer { generation: 3, end_offset: 25 }));
    /// # Ok::<(), felix_epochs::HistoryError>(())
    /// ```
    pub fn end_offset_for(&self, generation: u64, log_end: u64) -> Option<LeaderAnswer> {
        let latest = self.latest()?;
        if generation >= latest.generation {
            return Some(LeaderAnswer {
                generation: latest.generation,
                end_offset: log_end,
            });
        }
        // The latest generation is above the one asked, so a next entry exists.
        let next_index = self.entries.partition_point(|e| e.generation <= generation);
        let next = self.entries.get(next_index)?;
        let answered = match next_index.checked_sub(1).and_then(|i| self.entries.get(i)) {
            Some(floor) => floor.generation,
            None => generation,
        };
        Some(LeaderAnswer {
            generation: answered,
            end_offset: next.start_offset,
        })
    }

    /// The largest local generation at or below `generation` and where it
    /// ended here, without the convention [`Self::end_offset_for`] uses for
    /// generations older than the history: a follower must know whether it
    /// really holds the generation the leader named.
    pub(crate) fn floor_end(&self, generation: u64, log_end: u64) -> Option<(u64, u64)> {
        let next_index = self.entries.partition_point(|e| e.generation <= generation);
        let floor = self.entries.get(next_index.checked_sub(1)?)?;
        let end = self
            .entries
            .get(next_index)
            .map_or(log_end, |next| next.start_offset);
        Some((floor.generation, end))
    }

    /// Drops the entries that begin at or above `offset`, after the log was
    /// cut there, and returns how many were dropped.
    ///
    /// A generation whose records were all cut no longer began anywhere; one
    /// that began below the cut keeps its entry and now ends at the log end.
    ///
    /// ```
    /// # use felix_epochs::EpochHistory;
    /// let mut history = EpochHistory::new();
    /// history.record(1, 0)?;
    /// history.record(2, 10)?;
    /// assert_eq!(history.truncate_from(10), 1);
    /// assert_eq!(history.latest().map(|e| e.generation), Some(1));
    /// # Ok::<(), felix_epochs::HistoryError>(())
    /// ```
    pub fn truncate_from(&mut self, offset: u64) -> usize {
        let keep = self.entries.partition_point(|e| e.start_offset < offset);
        let dropped = self.entries.len() - keep;
        self.entries.truncate(keep);
        self.debug_assert_ascending("after truncate_from");
        dropped
    }

    /// Drops the entries that retention made useless once the log starts at
    /// `offset`, and returns how many were dropped.
    ///
    /// The entry covering `offset` stays and is moved to start there, as
    /// Kafka does, so the history begins exactly where the log does: a
    /// generation older than the oldest retained record cannot be one two
    /// replicas diverge within, while the covering one still can.
    ///
    /// ```
    /// # use felix_epochs::{EpochEntry, EpochHistory};
    /// let mut history = EpochHistory::new();
    /// history.record(1, 0)?;
    /// history.record(2, 10)?;
    /// history.record(3, 20)?;
    /// assert_eq!(history.truncate_before(15), 1);
    /// assert_eq!(
    ///     history.entries(),
    ///     [EpochEntry { generation: 2, start_offset: 15 }, EpochEntry { generation: 3, start_offset: 20 }],
    /// );
    /// # Ok::<(), felix_epochs::HistoryError>(())
    /// ```
    pub fn truncate_before(&mut self, offset: u64) -> usize {
        let covering = self.entries.partition_point(|e| e.start_offset <= offset);
        let Some(first_kept) = covering.checked_sub(1) else {
            // Every entry starts above `offset`, so none is made useless.
            return 0;
        };
        self.entries.drain(..first_kept);
        if let Some(first) = self.entries.first_mut() {
            first.start_offset = offset;
        }
        self.debug_assert_ascending("after truncate_before");
        first_kept
    }
}

/// A history from `(generation, start_offset)` pairs, for tests.
#[cfg(test)]
pub(crate) fn history_of(pairs: &[(u64, u64)]) -> EpochHistory {
    let entries = pairs
        .iter()
        .map(|&(generation, start_offset)| EpochEntry {
            generation,
            start_offset,
        })
        .collect();
    EpochHistory::from_entries(entries).unwrap_or_else(|e| panic!("test history {pairs:?}: {e}"))
}

#[cfg(test)]
mod tests;
