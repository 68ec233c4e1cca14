//! What a replication protocol needs: appends at the leader's offsets,
//! truncation after a divergence, a reset to any offset, and generations.

use std::sync::Arc;

use bytes::Bytes;
use felix_epochs::{EpochHistory, LeaderAnswer, Recorded};
use felix_format::{FileKind, IndexEntry, file_name};
use felix_io::OpenMode;
use felix_segment::{ReadLimit, Record, SegmentFile, SegmentWriter, SparseIndex, fs::sync_dir};

use super::{Shard, WriterState, segment_config};
use crate::error::{Result, StorageError};

/// A record copied from a leader, with the leader's offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicatedRecord {
    /// The offset the leader assigned.
    pub offset: u64,
    /// The leader's publish time.
    pub timestamp_micros: u64,
    /// The payload.
    pub payload: Bytes,
}

impl Shard {
    /// Appends records copied from a leader. The first must have exactly
    /// [`Shard::next_offset`] and the rest follow contiguously; anything else
    /// is rejected before a byte is written. Durability follows the policy,
    /// as for [`Shard::append`].
    pub fn append_replicated(&self, records: &[ReplicatedRecord]) -> Result<crate::AppendReceipt> {
        self.check_batch(records.iter().map(|r| r.payload.len()))?;
        let batch: Vec<Record> = records
            .iter()
            .map(|r| Record {
                timestamp_micros: r.timestamp_micros,
                payload: r.payload.clone(),
            })
            .collect();
        let receipt = {
            let mut state = self.writer_state();
            self.check_poison()?;
            let next = state.writer.next_offset();
            self.check_offsets(next, records.len())?;
            for (i, record) in records.iter().enumerate() {
                let expected = next + i as u64;
                if record.offset != expected {
                    return Err(StorageError::ReplicaOffsetMismatch {
                        shard: Arc::clone(&self.label),
                        index_in_batch: i,
                        expected,
                        found: record.offset,
                    });
                }
            }
            self.append_locked(&mut state, &batch)?
        };
        if self.config.durability == crate::Durability::OnCommit {
            self.commit.wait_durable(receipt.last_offset + 1)?;
        }
        Ok(receipt)
    }

    /// Drops every record at or above `offset` (a follower's log diverged
    /// from its new leader's), across segments.
    ///
    /// Segments wholly above `offset` are removed newest first, then the
    /// segment holding `offset` is cut and synced, so a crash midway leaves
    /// a prefix of the old log that opens cleanly. Indexes, the epochs file
    /// and `durable_offset` follow. Below the base offset is an error; at or
    /// past the next offset nothing happens.
    pub fn truncate_to(&self, offset: u64) -> Result<()> {
        let span = tracing::info_span!("truncate_to", shard = %self.label, offset);
        let _entered = span.enter();
        let mut state = self.writer_state();
        self.check_poison()?;
        let (oldest, next) = {
            let view = self.view();
            (view.base_offset(), view.active_limit.next_offset)
        };
        if offset < oldest {
            return Err(StorageError::TruncateBelowBase {
                shard: Arc::clone(&self.label),
                requested: offset,
                oldest,
            });
        }
        if offset >= next {
            return Ok(());
        }
        let result = self.truncate_locked(&mut state, offset);
        result.map_err(|e| self.poison_with(e))?;
        self.cut_history(offset)?;
        tracing::info!(next_offset = offset, "truncated");
        Ok(())
    }

    fn truncate_locked(&self, state: &mut WriterState, offset: u64) -> Result<()> {
        let active_base = state.writer.segment().base_offset();
        let (file, position, entries) = if offset >= active_base {
            let file = Arc::clone(state.writer.segment());
            let limit = state.writer.read_limit();
            let entries = state.writer.index_entries();
            let position = self.position_of(&file, &entries, offset, limit)?;
            (file, position, entries)
        } else {
            // Remove the active segment and every sealed one above `offset`,
            // newest first, so the directory always holds a prefix.
            self.remove_segment_files(state.writer.segment().id())?;
            let mut sealed = self.view().sealed.clone();
            while let Some(last) = sealed.last() {
                if last.extent.base_offset <= offset {
                    break;
                }
                self.remove_segment_files(last.extent.id)?;
                sealed.pop();
            }
            let target = sealed
                .last()
                .cloned()
                .ok_or_else(|| StorageError::TruncateBelowBase {
                    shard: Arc::clone(&self.label),
                    requested: offset,
                    oldest: offset,
                })?;
            let (file, _) = SegmentFile::open(
                &self.fs,
                &self.dir,
                target.extent.id,
                Arc::clone(&self.label),
                OpenMode::ReadWrite,
            )
            .map_err(|e| self.segment_error(e))?;
            let file = Arc::new(file);
            // The cut is made at the position the index leads to, so the
            // index must be one the records vouch for: a wrong entry could
            // otherwise place the cut inside an acknowledged record.
            let opened = self.open_sealed_vouched(&target, offset)?;
            let entries = opened.index.entries().to_vec();
            let limit = ReadLimit {
                end_position: target.extent.len,
                next_offset: target.extent.next_offset,
            };
            let position = self.position_of(&file, &entries, offset, limit)?;
            let mut view = self.view_mut();
            view.sealed.truncate(sealed.len() - 1);
            (file, position, entries)
        };
        let path = file.path().to_path_buf();
        let io = |op, e| self.segment_error(felix_segment::SegmentError::io(op, &path, e));
        // Unsynced appends below the cut must be durable before the length
        // changes: otherwise a power loss could keep the shorter length and a
        // torn half of what it keeps.
        file.file().sync_data().map_err(|e| io("fdatasync", e))?;
        file.file()
            .set_len(position)
            .map_err(|e| io("truncate", e))?;
        file.file().sync_data().map_err(|e| io("fdatasync", e))?;
        let kept: Vec<IndexEntry> = entries.into_iter().filter(|e| e.offset < offset).collect();
        let index = SparseIndex::from_entries(file.base_offset(), kept);
        state.writer =
            SegmentWriter::resume(file, offset, position, index, segment_config(&self.config))
                .map_err(|e| self.segment_error(e))?;
        state.active_max_timestamp = None;
        self.install_writer(state);
        Ok(())
    }

    /// Byte position of the record at `offset` (or the end, for the next
    /// offset) in a segment.
    fn position_of(
        &self,
        file: &SegmentFile,
        entries: &[IndexEntry],
        offset: u64,
        limit: ReadLimit,
    ) -> Result<u64> {
        if offset >= limit.next_offset {
            return Ok(limit.end_position);
        }
        let start = felix_segment::seek_entries(entries, file.base_offset(), offset);
        let records = file
            .read(start, offset, limit, 0)
            .map_err(|e| self.segment_error(e))?;
        records.first().map(|r| r.position).ok_or_else(|| {
            self.segment_error(felix_segment::SegmentError::OffsetOutOfRange {
                segment: file.id(),
                offset,
                base_offset: file.base_offset(),
                next_offset: limit.next_offset,
            })
        })
    }

    /// Removes a segment and its index, and syncs the directory before
    /// returning. Removals are made durable one segment at a time because a
    /// crash may keep any subset of unsynced removals: removing two segments
    /// before one sync could leave the later one gone and the earlier one
    /// back, a gap no recovery may bridge.
    pub(crate) fn remove_segment_files(&self, id: u64) -> Result<()> {
        for kind in [FileKind::Segment, FileKind::Index] {
            let path = self.dir.join(file_name(id, kind).as_str());
            match self.fs.remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(
                        self.segment_error(felix_segment::SegmentError::io("remove", &path, e))
                    );
                }
            }
        }
        sync_dir(&self.fs, &self.dir).map_err(|e| self.segment_error(e.into()))
    }

    /// Points readers and group commit at the writer's segment after the
    /// log was cut or replaced.
    fn install_writer(&self, state: &WriterState) {
        {
            let mut view = self.view_mut();
            view.active = Arc::clone(state.writer.segment());
            view.active_limit = state.writer.read_limit();
            view.active_index = state.writer.active_index();
        }
        self.commit
            .reset_log(state.writer.next_offset(), state.writer.sync_handle());
    }

    /// Discards the whole log and begins again at `offset`: a replica told
    /// to start over from the leader's log start.
    ///
    /// Segments are removed newest first and a fresh segment is created with
    /// a new id; a crash midway leaves a prefix of the old log.
    pub fn reset_to(&self, offset: u64) -> Result<()> {
        let span = tracing::info_span!("reset_to", shard = %self.label, offset);
        let _entered = span.enter();
        let mut state = self.writer_state();
        self.check_poison()?;
        // Checked before anything is removed: the fresh segment needs an id.
        let Some(next_id) = state.next_segment_id else {
            return Err(StorageError::SegmentIdsExhausted {
                shard: Arc::clone(&self.label),
                last_id: state.writer.segment().id(),
            });
        };
        let result = (|| {
            self.remove_segment_files(state.writer.segment().id())?;
            let sealed = self.view().sealed.clone();
            for segment in sealed.iter().rev() {
                self.remove_segment_files(segment.extent.id)?;
            }
            let writer = SegmentWriter::create(
                &self.fs,
                &self.dir,
                next_id,
                offset,
                segment_config(&self.config),
                Arc::clone(&self.label),
            )
            .map_err(|e| self.segment_error(e))?;
            state.next_segment_id = next_id.checked_add(1);
            state.writer = writer;
            state.active_max_timestamp = None;
            self.view_mut().sealed.clear();
            self.install_writer(&state);
            let mut commit = self.commit_state();
            // An empty log has nothing to lose.
            commit.durable = offset;
            Ok(())
        })();
        result.map_err(|e| self.poison_with(e))?;
        self.update_history(|history| {
            *history = EpochHistory::new();
            true
        })
    }

    /// Records that `generation` begins at the current next offset (a new
    /// leader's term begins at its log end) and stores the epochs file.
    pub fn begin_generation(&self, generation: u64) -> Result<Recorded> {
        let state = self.writer_state();
        self.check_poison()?;
        let start = state.writer.next_offset();
        let mut next = self.history_lock().clone();
        let recorded =
            next.record(generation, start)
                .map_err(|source| StorageError::Generation {
                    shard: Arc::clone(&self.label),
                    source,
                })?;
        self.update_history(|history| {
            *history = next;
            true
        })?;
        drop(state);
        Ok(recorded)
    }

    /// A copy of the generation history.
    pub fn generations(&self) -> EpochHistory {
        self.history_lock().clone()
    }

    /// Which generation wrote the record at `offset`, if the history says.
    pub fn generation_at(&self, offset: u64) -> Option<u64> {
        self.history_lock().generation_at(offset)
    }

    /// The leader's answer to a follower asking where `generation` ended
    /// (see [`EpochHistory::end_offset_for`]).
    pub fn end_offset_for(&self, generation: u64) -> Option<LeaderAnswer> {
        let end = self.next_offset();
        self.history_lock().end_offset_for(generation, end)
    }

    /// Drops history entries at or above a truncation point, after the log
    /// was cut: the log is cut first so that a crash in between leaves a
    /// history past the log end, which the next open cuts back.
    fn cut_history(&self, offset: u64) -> Result<()> {
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
        let mut history = self.history_lock();
        let mut next = history.clone();
        if !change(&mut next) {
            return Ok(());
        }
        self.epochs_file.store(&next).map_err(|source| {
            self.poison_with(StorageError::Epochs {
                shard: Arc::clone(&self.label),
                source,
            })
        })?;
        *history = next;
        Ok(())
    }

    pub(crate) fn history_lock(&self) -> std::sync::MutexGuard<'_, EpochHistory> {
        self.epochs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
