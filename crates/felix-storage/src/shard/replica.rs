//! What a replication protocol needs: appends at the leader's offsets and
//! generations, a reconciliation step after a leader change, truncation,
//! and a reset to any offset.

use std::sync::Arc;

use bytes::Bytes;
use felix_epochs::{Divergence, EpochHistory, LeaderAnswer, Recorded};
use felix_segment::Record;

use super::AppendReceipt;
use super::bounds::ReadBound;
use super::core::Core;
use super::log::{ReadRecord, Synced};
use crate::error::{Result, StorageError};
use felix_segment::RecordRun;

/// A record copied from a leader: the leader's offset and the generation
/// that wrote it there.
///
/// A leader reads them with
/// [`Shard::read_replicated`](crate::Shard::read_replicated), or converts a
/// record it read with [`ReadRecord::into_replicated`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicatedRecord {
    /// The offset the leader assigned.
    pub offset: u64,
    /// The leader generation that wrote the record, when the leader's
    /// history knows it (`None` below it, as Kafka's "no leader epoch").
    /// [`Shard::append_replicated`](crate::Shard::append_replicated)
    /// records a generation boundary wherever this changes.
    pub generation: Option<u64>,
    /// The leader's publish time.
    pub timestamp_micros: u64,
    /// The payload.
    pub payload: Bytes,
}

/// A run of records a leader read for its followers, all written by one
/// generation (see
/// [`Shard::read_replicated_runs`](crate::Shard::read_replicated_runs)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicatedRun {
    /// The generation that wrote every record of the run, when the
    /// leader's history knows it (`None` below it).
    pub generation: Option<u64>,
    /// The records, verified, as they lie in the leader's segment.
    pub run: RecordRun,
}

impl ReadRecord {
    /// This record as a follower appends it, written by `generation`
    /// (from [`Shard::generation_at`](crate::Shard::generation_at), say).
    ///
    /// ```
    /// use felix_storage::ReadRecord;
    ///
    /// let read = ReadRecord { offset: 7, timestamp_micros: 1, payload: "x".into() };
    /// let replicated = read.into_replicated(Some(3));
    /// assert_eq!((replicated.offset, replicated.generation), (7, Some(3)));
    /// ```
    pub fn into_replicated(self, generation: Option<u64>) -> ReplicatedRecord {
        ReplicatedRecord {
            offset: self.offset,
            generation,
            timestamp_micros: self.timestamp_micros,
            payload: self.payload,
        }
    }
}

impl Core {
    /// Records that `generation` begins at the log end (a new leader's term
    /// begins there) and stores the epochs file.
    pub(crate) fn begin_generation(&self, generation: u64) -> Result<Recorded> {
        let state = self.log().lock_writer()?;
        self.generations()
            .record(generation, state.writer.next_offset())
    }

    /// The leader's answer to a follower asking where `generation` ended.
    pub(crate) fn end_offset_for(&self, generation: u64) -> Option<LeaderAnswer> {
        let end = self.log().view().active_limit.next_offset;
        self.generations().end_offset_for(generation, end)
    }

    /// Appends records copied from a leader (see
    /// `Shard::append_replicated`).
    pub(crate) fn append_replicated(&self, records: &[ReplicatedRecord]) -> Result<AppendReceipt> {
        self.log()
            .check_batch(records.iter().map(|r| r.payload.len()))?;
        let synced = if self.on_commit() {
            Synced::ByCaller
        } else {
            Synced::Later
        };
        let receipt = {
            let mut state = self.log().lock_writer()?;
            let next = state.writer.next_offset();
            self.log().check_offsets(next, records.len())?;
            for (i, record) in records.iter().enumerate() {
                let expected = next + i as u64;
                if record.offset != expected {
                    return Err(StorageError::ReplicaOffsetMismatch {
                        shard: Arc::clone(&self.shared().label),
                        index_in_batch: i,
                        expected,
                        found: record.offset,
                    });
                }
            }
            let latest = self.generations().latest();
            self.generations()
                .check_ascending(records.iter().filter_map(|r| r.generation))?;
            // One write per run of one generation, each boundary recorded
            // (epochs file stored) before the run's first record exists: a
            // crash between the two leaves a generation beginning at the log
            // end, which is what a leader that has not written looks like.
            let mut current = latest;
            let mut receipt: Option<AppendReceipt> = None;
            for run in
                records.chunk_by(|a, b| b.generation.is_none() || a.generation == b.generation)
            {
                if let Some(first) = run.first()
                    && let Some(generation) = first.generation
                    && current != Some(generation)
                {
                    debug_assert_eq!(
                        first.offset,
                        state.writer.next_offset(),
                        "a generation begins at the log end"
                    );
                    self.generations().record(generation, first.offset)?;
                    current = Some(generation);
                }
                let batch: Vec<Record> = run
                    .iter()
                    .map(|r| Record {
                        timestamp_micros: r.timestamp_micros,
                        payload: r.payload.clone(),
                    })
                    .collect();
                let written = self.log().append_locked(&mut state, &batch, synced)?;
                receipt = Some(match receipt {
                    Some(r) => AppendReceipt {
                        last_offset: written.last_offset,
                        ..r
                    },
                    None => written,
                });
            }
            receipt.ok_or_else(|| StorageError::EmptyBatch {
                shard: Arc::clone(&self.shared().label),
            })?
        };
        if self.on_commit() {
            self.commit()
                .wait_durable_with(receipt.last_offset + 1, true, &|| Ok(()))?;
        }
        Ok(receipt)
    }

    /// Records from `from`, each with the generation that wrote it.
    pub(crate) fn read_replicated(
        &self,
        from: u64,
        max_bytes: u64,
        bound: ReadBound,
    ) -> Result<Vec<ReplicatedRecord>> {
        let runs = self.read_replicated_runs(from, max_bytes, bound)?;
        let mut out = Vec::with_capacity(runs.iter().map(|r| r.run.len()).sum());
        for ReplicatedRun { generation, run } in &runs {
            out.extend(run.iter().map(|record| ReplicatedRecord {
                offset: record.offset,
                generation: *generation,
                timestamp_micros: record.timestamp_micros,
                payload: run.payload_bytes(&record),
            }));
        }
        Ok(out)
    }

    /// Runs from `from`, split where a generation begins, each with the
    /// generation that wrote it.
    pub(crate) fn read_replicated_runs(
        &self,
        from: u64,
        max_bytes: u64,
        bound: ReadBound,
    ) -> Result<Vec<ReplicatedRun>> {
        let runs = self.log().read_runs(from, max_bytes, bound)?;
        let history: EpochHistory = self.generations().history();
        let mut out = Vec::with_capacity(runs.len());
        for mut run in runs {
            // The generations beginning inside the run cut it.
            let starts = history
                .entries()
                .iter()
                .map(|e| e.start_offset)
                .filter(|&start| start > run.first_offset() && start < run.next_offset())
                .collect::<Vec<_>>();
            for start in starts.into_iter().rev() {
                let tail = run.split_off(start);
                out.push(ReplicatedRun {
                    generation: history.generation_at(tail.first_offset()),
                    run: tail,
                });
            }
            out.push(ReplicatedRun {
                generation: history.generation_at(run.first_offset()),
                run,
            });
        }
        // Split from the back: put each segment's pieces in offset order.
        out.sort_by_key(|r| r.run.first_offset());
        Ok(out)
    }

    /// One step of a follower's reconciliation (see `Shard::reconcile`).
    pub(crate) fn reconcile(&self, answer: LeaderAnswer) -> Result<Divergence> {
        let mut state = self.log().lock_writer()?;
        let (oldest, next) = {
            let view = self.log().view();
            (view.base_offset(), view.active_limit.next_offset)
        };
        let divergence = self.generations().divergence(next, answer);
        let to = divergence.truncate_to();
        debug_assert!(to <= next, "a divergence point past the log end");
        if to < oldest {
            return Err(StorageError::TruncateBelowBase {
                shard: Arc::clone(&self.shared().label),
                requested: to,
                oldest,
            });
        }
        if to < next {
            self.log()
                .truncate_locked(&mut state, to)
                .map_err(|e| self.commit().poison_with(e))?;
        }
        // Generations from the divergence point on are the follower's own:
        // the next question is about the one before.
        self.generations().cut_from(to)?;
        tracing::info!(shard = %self.shared().label, ?divergence, "reconciled with the leader");
        Ok(divergence)
    }

    /// Drops every record at or above `offset` (see `Shard::truncate_to`).
    pub(crate) fn truncate_to(&self, offset: u64) -> Result<()> {
        let span = tracing::info_span!("truncate_to", shard = %self.shared().label, offset);
        let _entered = span.enter();
        let mut state = self.log().lock_writer()?;
        let (oldest, next) = {
            let view = self.log().view();
            (view.base_offset(), view.active_limit.next_offset)
        };
        if offset < oldest {
            return Err(StorageError::TruncateBelowBase {
                shard: Arc::clone(&self.shared().label),
                requested: offset,
                oldest,
            });
        }
        if offset >= next {
            return Ok(());
        }
        self.log()
            .truncate_locked(&mut state, offset)
            .map_err(|e| self.commit().poison_with(e))?;
        self.generations().cut_from(offset)?;
        tracing::info!(next_offset = offset, "truncated");
        Ok(())
    }

    /// Discards the whole log and begins again at `offset`.
    pub(crate) fn reset_to(&self, offset: u64) -> Result<()> {
        let span = tracing::info_span!("reset_to", shard = %self.shared().label, offset);
        let _entered = span.enter();
        let mut state = self.log().lock_writer()?;
        self.log().reset_locked(&mut state, offset)?;
        self.generations().clear()
    }
}
