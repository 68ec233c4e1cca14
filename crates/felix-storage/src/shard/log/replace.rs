//! Replacing a damaged sealed segment with a verified copy: what a broker
//! does once a scrub (or a read) found rot and a replica has the records.
//!
//! The copy is written to the segment's copy name
//! ([`ShardFileName::SegmentCopy`], `{id:020}.log.copy`) and synced, then
//! read back through a descriptor of its own and checked in full — its
//! header, every record's checksums, the same base and next offset as the
//! segment it replaces — before anything else changes. Only then, under the
//! writer lock (so that retention and truncation, which delete segments
//! under it, cannot race the rename), is it renamed over the segment and
//! the directory synced: a power loss leaves the old segment or the new
//! one, never a mix, and a copy left behind by a crash is removed by the
//! next open (recovery knows the name). The index is rebuilt from the copy
//! and written after the rename; an index that lags is never trusted, so a
//! crash between the two costs a rebuild, not a record.
//!
//! Readers never see half a replacement: a read that chose the old segment
//! holds its descriptor (opened before the rename), one that begins after
//! the swap gets the new entry of the view, with the new file already
//! opened.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

use bytes::Bytes;
use felix_format::{SegmentExtent, ShardFileName};
use felix_io::{IoError, OpenMode};
use felix_recovery::{ScanDepth, ScanStart, scan_segment, scrub_segment};
use felix_segment::{CHUNK_BYTES, SegmentError, SegmentFile, SparseIndex, fs::sync_dir};

use super::{Log, OpenedSegment, Sealed};
use crate::error::{CopyProblem, Result, StorageError};
use crate::stats::Counters;

/// A copy of a sealed segment for
/// [`Shard::replace_sealed_segment`](crate::Shard::replace_sealed_segment):
/// a whole segment file, header and records, as a replica holds it (or
/// built from the replica's records with the same offsets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentCopy {
    /// The file's bytes.
    Bytes(Bytes),
    /// A file holding them, read through the shard's file system (it may
    /// lie anywhere; it is neither modified nor removed).
    File(PathBuf),
}

impl Log {
    /// Replaces sealed segment `id` with `copy` once the copy verifies; see
    /// `Shard::replace_sealed_segment`. Returns the new extent.
    pub(crate) fn replace_sealed_segment(
        &self,
        id: u64,
        copy: &SegmentCopy,
    ) -> Result<SegmentExtent> {
        self.check_poison()?;
        // One replacement at a time: the copy's temporary name is the
        // segment's, and a second call must not write over a copy this one
        // has checked before it is renamed.
        let _replacing = self
            .replacing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let old = self.sealed_by_id(id)?;
        let temp = self.shared.dir.join(
            ShardFileName::SegmentCopy(id)
                .file_name()
                .map(|n| n.to_string())
                .unwrap_or_default(),
        );
        let verified = self
            .write_copy(&temp, copy)
            .and_then(|()| self.verify_copy(&temp, &old));
        let (extent, entries) = match verified {
            Ok(verified) => verified,
            Err(err) => {
                self.remove_copy(&temp);
                return Err(err);
            }
        };
        let state = self.lock_writer();
        let swapped = state.and_then(|_state| {
            // Retention or a truncation may have removed the segment while
            // the copy was checked: a copy must never bring it back. A
            // truncation may also have made it active and a roll sealed it
            // again with other records: only the very segment the copy was
            // checked against may be replaced.
            let now = self.sealed_by_id(id)?;
            if !Arc::ptr_eq(&now, &old) {
                return Err(StorageError::CopyRejected {
                    shard: Arc::clone(&self.shared.label),
                    segment: id,
                    problem: CopyProblem::SegmentChanged { segment: id },
                });
            }
            // A kept clean-shutdown record describes the sealed segments as
            // they were: it goes (durably) before one is replaced.
            self.forget_clean_shutdown()?;
            self.swap(&old, &temp, extent, entries)
        });
        if swapped.is_err() {
            self.remove_copy(&temp);
        }
        swapped.map(|()| extent)
    }

    /// The sealed segment `id`, as the view lists it.
    fn sealed_by_id(&self, id: u64) -> Result<Arc<Sealed>> {
        self.view()
            .sealed
            .iter()
            .find(|s| s.extent.id == id)
            .cloned()
            .ok_or_else(|| StorageError::NotSealed {
                shard: Arc::clone(&self.shared.label),
                segment: id,
            })
    }

    /// Writes `copy` to `temp` (replacing one a crash left) and syncs it.
    fn write_copy(&self, temp: &std::path::Path, copy: &SegmentCopy) -> Result<()> {
        let io = |op: &'static str, path: &std::path::Path, e| {
            self.shared.segment_error(IoError::new(op, path, e).into())
        };
        match self.shared.fs.remove_file(temp) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("remove", temp, e)),
        }
        let file = self
            .shared
            .fs
            .open(temp, OpenMode::CreateNew)
            .map_err(|e| io("create", temp, e))?;
        match copy {
            SegmentCopy::Bytes(bytes) => file
                .write_all_at(bytes, 0)
                .map_err(|e| io("write", temp, e))?,
            SegmentCopy::File(source) => {
                let from = self
                    .shared
                    .fs
                    .open(source, OpenMode::Read)
                    .map_err(|e| io("open", source, e))?;
                let len = from.file_len().map_err(|e| io("stat", source, e))?;
                let mut buf = vec![0u8; usize::try_from(CHUNK_BYTES).unwrap_or(1 << 20)];
                let mut position = 0u64;
                while position < len {
                    let n = usize::try_from((len - position).min(CHUNK_BYTES)).unwrap_or(0);
                    let chunk = buf.get_mut(..n).unwrap_or_default();
                    from.read_exact_at(chunk, position)
                        .map_err(|e| io("pread", source, e))?;
                    file.write_all_at(chunk, position)
                        .map_err(|e| io("write", temp, e))?;
                    position += n as u64;
                }
            }
        }
        file.sync_data().map_err(|e| io("fdatasync", temp, e))
    }

    /// Reads the synced copy back and checks it in full against `old`:
    /// its header, every record's checksums, and the same base and next
    /// offset. Returns the copy's extent and its rebuilt index entries.
    fn verify_copy(
        &self,
        temp: &std::path::Path,
        old: &Sealed,
    ) -> Result<(SegmentExtent, Vec<felix_format::IndexEntry>)> {
        let id = old.extent.id;
        let reject = |problem| StorageError::CopyRejected {
            shard: Arc::clone(&self.shared.label),
            segment: id,
            problem,
        };
        let (file, len) = match SegmentFile::open_path(
            &self.shared.fs,
            temp.to_path_buf(),
            id,
            Arc::clone(&self.shared.label),
            OpenMode::Read,
        ) {
            Ok(opened) => opened,
            Err(SegmentError::Corrupt { kind, .. }) => {
                return Err(reject(CopyProblem::Header { kind }));
            }
            Err(other) => return Err(self.shared.segment_error(other)),
        };
        if file.base_offset() != old.extent.base_offset {
            return Err(reject(CopyProblem::BaseOffset {
                expected: old.extent.base_offset,
                found: file.base_offset(),
            }));
        }
        let scrub = scrub_segment(&file, len, None, &mut |_| ControlFlow::Continue(()))
            .map_err(|e| self.shared.segment_error(e.into()))?;
        if let Some(damage) = scrub.damage.first() {
            return Err(reject(CopyProblem::Damaged {
                kind: damage.kind,
                position: damage.site.position,
            }));
        }
        if scrub.next_offset != old.extent.next_offset {
            return Err(reject(CopyProblem::NextOffset {
                expected: old.extent.next_offset,
                found: scrub.next_offset,
            }));
        }
        // The bytes were just read: this walk of headers is served from
        // the page cache.
        let index = scan_segment(
            &file,
            len,
            ScanStart::first_record(&file),
            ScanDepth::Headers,
            self.shared.config.index_spacing_bytes,
        )
        .map_err(|e| self.shared.segment_error(e.into()))?;
        let extent = SegmentExtent {
            id,
            base_offset: old.extent.base_offset,
            next_offset: old.extent.next_offset,
            len,
        };
        Ok((extent, index.index))
    }

    /// Renames the verified copy over the segment and swaps the view's
    /// entry, with the writer lock held.
    fn swap(
        &self,
        old: &Arc<Sealed>,
        temp: &std::path::Path,
        extent: SegmentExtent,
        entries: Vec<felix_format::IndexEntry>,
    ) -> Result<()> {
        // Readers holding the old entry keep reading the old file: its
        // descriptor is opened (if no read opened it yet) before the rename.
        if let Err(err) = self.open_sealed(old, old.extent.base_offset) {
            tracing::warn!(shard = %self.shared.label, segment = extent.id, error = %err, "could not open the damaged segment before replacing it");
        }
        // The old time index describes the damaged file's records: it goes
        // before the copy takes the name, so that no later open trusts it
        // for the copy's (the directory sync after the rename makes the
        // removal durable with it).
        let time_path = self
            .shared
            .dir
            .join(felix_format::file_name(extent.id, felix_format::FileKind::TimeIndex).as_str());
        match self.shared.fs.remove_file(&time_path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(self
                    .shared
                    .segment_error(IoError::new("remove", &time_path, e).into()));
            }
        }
        old.replaced.store(true, SeqCst);
        let path = self
            .shared
            .dir
            .join(felix_format::file_name(extent.id, felix_format::FileKind::Segment).as_str());
        if let Err(e) = self.shared.fs.rename(temp, &path) {
            old.replaced.store(false, SeqCst);
            return Err(self
                .shared
                .segment_error(IoError::new("rename", temp, e).into()));
        }
        // From here the name holds the copy, whatever else fails.
        let opened = SegmentFile::open(
            &self.shared.fs,
            &self.shared.dir,
            extent.id,
            Arc::clone(&self.shared.label),
            OpenMode::Read,
        );
        let file = opened.map(|(file, _)| Arc::new(file));
        let index = SparseIndex::from_entries(extent.base_offset, entries);
        // The copy's time index is built from its records on first need
        // (its old file was removed before the rename).
        let entry = Sealed::new(extent, false);
        *entry
            .opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = file.as_ref().ok().map(|file| {
            Arc::new(OpenedSegment {
                file: Arc::clone(file),
                index: index.clone(),
                vouched: true,
            })
        });
        let entry = Arc::new(entry);
        {
            let mut view = self.view_mut();
            if let Some(slot) = view.sealed.iter_mut().find(|s| Arc::ptr_eq(s, old)) {
                *slot = entry;
            }
        }
        // Whether the rename is on disk is unknown after a failed
        // directory sync, and it is never retried: the shard stops, as for
        // any failed sync. A reopen finds the copy or the old file (whose
        // damage, if the rename was lost, a scrub finds again).
        let synced = sync_dir(&self.shared.fs, &self.shared.dir)
            .map_err(|e| self.poison_with(self.shared.segment_error(e.into())));
        if let Ok(file) = &file
            && let Err(err) = index.write_file(&self.shared.fs, &file.index_path())
        {
            tracing::warn!(shard = %self.shared.label, segment = extent.id, error = %err, "could not write the replaced segment's index");
            Counters::add(&self.shared.counters.index_write_failures, 1);
        }
        synced?;
        tracing::info!(shard = %self.shared.label, segment = extent.id, "sealed segment replaced with a verified copy");
        file.map(drop).map_err(|e| self.shared.segment_error(e))
    }

    /// Removes a copy that was refused or could not be swapped in.
    fn remove_copy(&self, temp: &std::path::Path) {
        match self.shared.fs.remove_file(temp) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(shard = %self.shared.label, path = %temp.display(), error = %e, "could not remove a refused segment copy; the next open removes it");
            }
        }
    }
}
