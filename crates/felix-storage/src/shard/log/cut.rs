//! Cutting the log: truncation after a divergence and a reset to any
//! offset, both with the writer lock held by the caller.

use std::sync::Arc;

use felix_format::log_start::{LogStart, MovedBy};
use felix_format::{FileKind, IndexEntry, file_name};
use felix_io::{IoError, OpenMode};
use felix_recovery::{ScanDepth, ScanStart, scan_segment};
use felix_segment::{ReadLimit, SegmentFile, SegmentWriter, SparseIndex, fs::sync_dir};

use super::{Log, WriterState, segment_config};
use crate::error::{Result, StorageError};

impl Log {
    /// Drops every record at or above `offset`, which lies in
    /// `base..next` (checked by the caller).
    pub(crate) fn truncate_locked(&self, state: &mut WriterState, offset: u64) -> Result<()> {
        // A cut may shorten a sealed segment a kept clean-shutdown record
        // describes, and a later roll could list the same ids again.
        self.forget_clean_shutdown()?;
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
                    shard: Arc::clone(&self.shared.label),
                    requested: offset,
                    oldest: offset,
                })?;
            let (file, _) = SegmentFile::open(
                &self.shared.fs,
                &self.shared.dir,
                target.extent.id,
                Arc::clone(&self.shared.label),
                OpenMode::ReadWrite,
            )
            .map_err(|e| self.shared.segment_error(e))?;
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
        let io = |op, e| self.shared.segment_error(IoError::new(op, &path, e).into());
        // A time index file describes the segment as it was sealed. It goes
        // first, durably: appends after the cut could bring the segment back
        // to the same extent with other records, and the file must not be
        // there to be taken for theirs.
        self.remove_time_index(&file)?;
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
        // The largest timestamp of what is kept needs the kept records: one
        // walk of their headers (a cut is rare; the segment is at most one).
        let kept_walk = scan_segment(
            &file,
            position,
            ScanStart::first_record(&file),
            ScanDepth::Headers,
            self.shared.config.index_spacing_bytes,
        )
        .map_err(|e| self.shared.segment_error(e.into()))?;
        state.writer = SegmentWriter::resume(
            file,
            offset,
            position,
            index,
            kept_walk.time_index,
            segment_config(&self.shared.config),
        )
        .map_err(|e| self.shared.segment_error(e))?;
        // The cut and everything below it were synced above.
        self.install_writer(state, Some(offset));
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
            .map_err(|e| self.shared.segment_error(e))?;
        records.first().map(|r| r.position).ok_or_else(|| {
            self.shared
                .segment_error(felix_segment::SegmentError::OffsetOutOfRange {
                    segment: file.id(),
                    offset,
                    base_offset: file.base_offset(),
                    next_offset: limit.next_offset,
                })
        })
    }

    /// Removes `file`'s time index file, if it has one, durably.
    fn remove_time_index(&self, file: &SegmentFile) -> Result<()> {
        let path = file.time_index_path();
        match self.shared.fs.remove_file(&path) {
            Ok(()) => sync_dir(&self.shared.fs, &self.shared.dir)
                .map_err(|e| self.shared.segment_error(e.into())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self
                .shared
                .segment_error(IoError::new("remove", &path, e).into())),
        }
    }

    /// Removes a segment and its indexes, and syncs the directory before
    /// returning. Removals are made durable one segment at a time because a
    /// crash may keep any subset of unsynced removals: removing two segments
    /// before one sync could leave the later one gone and the earlier one
    /// back, a gap no recovery may bridge. The indexes go first, so a
    /// process crash leaves the segment whole (its indexes are rebuilt)
    /// rather than indexes with no segment; a power loss may still keep the
    /// segment's removal alone, and the next open removes what it left
    /// when the segment was the oldest (`Note::IndexOfRemovedSegment`).
    pub(crate) fn remove_segment_files(&self, id: u64) -> Result<()> {
        for kind in [FileKind::Index, FileKind::TimeIndex, FileKind::Segment] {
            let path = self.shared.dir.join(file_name(id, kind).as_str());
            match self.shared.fs.remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(self
                        .shared
                        .segment_error(IoError::new("remove", &path, e).into()));
                }
            }
        }
        sync_dir(&self.shared.fs, &self.shared.dir).map_err(|e| self.shared.segment_error(e.into()))
    }

    /// Points readers and group commit at the writer's segment after the
    /// log was cut or replaced; `durable` is what is durable now, if known
    /// (else what was, clamped to the new end). The view is held while
    /// group commit is reset, so that no reader sees the new log end with
    /// the old durable offset.
    fn install_writer(&self, state: &WriterState, durable: Option<u64>) {
        let mut view = self.view_mut();
        view.follow(&state.writer);
        self.commit.reset_log(
            state.writer.next_offset(),
            durable,
            state.writer.sync_handle(),
        );
        drop(view);
        self.shared.metrics.truncated();
        self.report_layout();
    }
    /// Discards the whole log and begins again at `offset`, with the writer
    /// lock held. The log-start file first records that the log begins at
    /// `offset` in the fresh segment's id, durably; then the old segments
    /// are removed newest first and the fresh segment is created. An open
    /// after a crash anywhere in between finishes the reset (it removes what
    /// lies below the recorded segment id and creates that segment): a crash
    /// leaves the old log or the new one.
    pub(crate) fn reset_locked(&self, state: &mut WriterState, offset: u64) -> Result<()> {
        // Checked before anything is removed: the fresh segment needs an id.
        let Some(next_id) = state.next_segment_id else {
            return Err(StorageError::SegmentIdsExhausted {
                shard: Arc::clone(&self.shared.label),
                last_id: state.writer.segment().id(),
            });
        };
        // A reset discards the records below: nothing need hold them.
        self.record_log_start(LogStart {
            start_offset: offset,
            first_segment_id: next_id,
            moved_by: MovedBy::Deletion,
        })?;
        let result = (|| {
            self.forget_clean_shutdown()?;
            self.remove_segment_files(state.writer.segment().id())?;
            let sealed = self.view().sealed.clone();
            for segment in sealed.iter().rev() {
                self.remove_segment_files(segment.extent.id)?;
            }
            let writer = SegmentWriter::create(
                &self.shared.fs,
                &self.shared.dir,
                next_id,
                offset,
                segment_config(&self.shared.config),
                Arc::clone(&self.shared.label),
            )
            .map_err(|e| self.shared.segment_error(e))?;
            state.next_segment_id = next_id.checked_add(1);
            state.writer = writer;
            {
                let mut view = self.view_mut();
                view.sealed.clear();
                view.log_start = offset;
            }
            // An empty log has nothing to lose.
            self.install_writer(state, Some(offset));
            Ok(())
        })();
        result.map_err(|e| self.poison_with(e))
    }
}
