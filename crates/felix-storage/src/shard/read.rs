//! Reads by offset, across segments, concurrent with appends.

use std::sync::Arc;

use bytes::Bytes;
use felix_format::RECORD_HEADER_LEN;
use felix_io::OpenMode;
use felix_recovery::{ScanDepth, ScanStart, scan_segment};
use felix_segment::{ReadLimit, SegmentError, SegmentFile, SparseIndex};

use super::{OpenedSegment, Sealed, Shard};
use crate::error::{Result, StorageError};

/// A record read from a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRecord {
    /// Its offset.
    pub offset: u64,
    /// Its publish time.
    pub timestamp_micros: u64,
    /// Its payload, sliced from the read's buffer.
    pub payload: Bytes,
}

/// Where a read of one segment goes.
enum Target {
    Active {
        file: Arc<SegmentFile>,
        limit: ReadLimit,
        start: felix_format::IndexEntry,
        next_position: Option<u64>,
    },
    Sealed(Arc<Sealed>),
}

impl Shard {
    /// Reads whole records from `from` onwards, across segments, until about
    /// `max_bytes` of encoded records (header included) — at least one
    /// record if any exists at `from`.
    ///
    /// Below the base offset is [`StorageError::Trimmed`]; at or past the
    /// next offset the result is empty. Every record returned passed its
    /// checksums; reads never see a partial record.
    pub fn read(&self, from: u64, max_bytes: u64) -> Result<Vec<ReadRecord>> {
        let mut out = Vec::new();
        let mut offset = from;
        let mut budget = max_bytes;
        loop {
            let Some(target) = self.target(offset)? else {
                break;
            };
            let records = self.read_target(target, offset, budget)?;
            let mut used = 0u64;
            for record in records {
                let size = RECORD_HEADER_LEN as u64 + record.payload.len() as u64;
                // Past the first record, the budget is a hard limit.
                if !out.is_empty() && used + size > budget {
                    return Ok(out);
                }
                used += size;
                offset = record.offset + 1;
                out.push(ReadRecord {
                    offset: record.offset,
                    timestamp_micros: record.timestamp_micros,
                    payload: record.payload,
                });
            }
            budget = budget.saturating_sub(used);
            if budget == 0 {
                break;
            }
        }
        Ok(out)
    }

    /// Finds the segment holding `offset`, or `None` at or past the end.
    fn target(&self, offset: u64) -> Result<Option<Target>> {
        let view = self.view();
        let oldest = view.base_offset();
        if offset < oldest {
            return Err(StorageError::Trimmed {
                shard: Arc::clone(&self.label),
                requested: offset,
                oldest,
            });
        }
        if offset >= view.active_limit.next_offset {
            return Ok(None);
        }
        if offset >= view.active.base_offset() {
            let (start, next_position) = view
                .active_index
                .seek_span(view.active.base_offset(), offset);
            return Ok(Some(Target::Active {
                file: Arc::clone(&view.active),
                limit: view.active_limit,
                start,
                next_position,
            }));
        }
        let i = view.sealed.partition_point(|s| s.base_offset <= offset);
        let segment = i.checked_sub(1).and_then(|i| view.sealed.get(i));
        match segment {
            Some(s) if offset < s.next_offset => Ok(Some(Target::Sealed(Arc::clone(s)))),
            // Empty sealed segments leave no gap in offsets, so this is only
            // reached for an offset inside an empty segment's range: none.
            _ => Ok(None),
        }
    }

    fn read_target(
        &self,
        target: Target,
        from: u64,
        budget: u64,
    ) -> Result<Vec<felix_segment::ReadRecord>> {
        match target {
            Target::Active {
                file,
                limit,
                start,
                next_position,
            } => file
                .read_within(start, next_position, from, limit, budget)
                .map_err(|e| self.segment_error(e)),
            Target::Sealed(sealed) => {
                let opened = self.open_sealed(&sealed, from)?;
                let limit = ReadLimit {
                    end_position: sealed.len,
                    next_offset: sealed.next_offset,
                };
                let (start, next_position) = opened.index.seek_span(from);
                match opened
                    .file
                    .read_within(start, next_position, from, limit, budget)
                {
                    Err(SegmentError::StaleIndex { entry, site, kind }) => {
                        tracing::warn!(shard = %self.label, segment = sealed.id, ?entry, %site, %kind, "stale index; rebuilding");
                        let rebuilt = self.rebuild_index(&sealed, &opened.file)?;
                        rebuilt
                            .file
                            .read(rebuilt.index.seek(from), from, limit, budget)
                            .map_err(|e| self.segment_error(e))
                    }
                    other => other.map_err(|e| self.segment_error(e)),
                }
            }
        }
    }

    /// Opens a sealed segment and loads its index on first use, rebuilding
    /// an index that fails to load.
    pub(crate) fn open_sealed(
        &self,
        sealed: &Sealed,
        requested: u64,
    ) -> Result<Arc<OpenedSegment>> {
        let mut opened = sealed
            .opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(existing) = &*opened {
            return Ok(Arc::clone(existing));
        }
        let (file, _) = match SegmentFile::open_in(
            &self.fs,
            &self.dir,
            sealed.id,
            Arc::clone(&self.label),
            OpenMode::Read,
        ) {
            Ok(opened) => opened,
            Err(SegmentError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                // Retention removed it after this read chose it.
                return Err(StorageError::Trimmed {
                    shard: Arc::clone(&self.label),
                    requested,
                    oldest: self.base_offset(),
                });
            }
            Err(e) => return Err(self.segment_error(e)),
        };
        let file = Arc::new(file);
        let index = match SparseIndex::load_in(
            &self.fs,
            &file.index_path(),
            sealed.base_offset,
            sealed.len,
        ) {
            Ok(index) => index,
            Err(reason) => {
                tracing::warn!(shard = %self.label, segment = sealed.id, %reason, "index unusable; rebuilding");
                self.scan_index(sealed, &file)?
            }
        };
        let entry = Arc::new(OpenedSegment { file, index });
        *opened = Some(Arc::clone(&entry));
        Ok(entry)
    }

    fn scan_index(&self, sealed: &Sealed, file: &SegmentFile) -> Result<SparseIndex> {
        let scan = scan_segment(
            file,
            sealed.len,
            ScanStart::first_record(file),
            ScanDepth::Headers,
            self.config.index_spacing_bytes,
        )
        .map_err(|e| self.segment_error(e))?;
        let index = SparseIndex::from_entries(sealed.base_offset, scan.index);
        // Writing the rebuilt index back is an optimisation for the next
        // open; failing to is harmless, since indexes are never trusted.
        if let Err(err) = index.write_file_in(&self.fs, &file.index_path()) {
            tracing::warn!(shard = %self.label, segment = sealed.id, error = %err, "could not write rebuilt index");
            crate::stats::Counters::add(&self.counters.index_write_failures, 1);
        }
        Ok(index)
    }

    fn rebuild_index(
        &self,
        sealed: &Sealed,
        file: &Arc<SegmentFile>,
    ) -> Result<Arc<OpenedSegment>> {
        let index = self.scan_index(sealed, file)?;
        let entry = Arc::new(OpenedSegment {
            file: Arc::clone(file),
            index,
        });
        *sealed
            .opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&entry));
        Ok(entry)
    }
}
