//! Appending to the active segment: one `write` per batch, then `fdatasync`
//! on demand, then sealing.
//!
//! The writer never reports a record as appended unless all of its bytes were
//! written, and after any write or sync failure of the segment it refuses
//! further work with the original error: a failed `fsync` is never retried,
//! because the kernel may already have dropped the pages it failed to write.
//!
//! The index file is the exception, because nothing depends on it: an index
//! is never trusted, only an accelerator. A failure to write or sync it
//! drops the file (the index stays in memory, shared with readers) and is
//! logged; the index is written whole again, to a new file, at
//! [`SegmentWriter::persist_index`] or when the segment is sealed.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use felix_format::{
    FileKind, IndexEntry, MAX_PAYLOAD_BYTES, SegmentExtent, SegmentHeader, encode_record_header,
    file_name, record_encoded_len,
};

use crate::error::{Result, SegmentError};
use felix_io::{FileSystem, OpenMode};

use crate::fs::{open, sync_data, sync_dir};
use crate::index::{ActiveIndex, IndexFile, OpenedIndex, SparseIndex, entry_due};
use crate::segment::{ReadLimit, SegmentFile};
use crate::time_index::{ActiveTimeIndex, TimeIndex};
use felix_format::time_index::TimeIndexEntry;

/// A staging buffer larger than this is released after its batch, so one
/// huge batch does not pin its memory for the life of the segment.
const STAGING_KEEP_BYTES: usize = 4 * 1024 * 1024;

/// The writer of the active segment.
///
/// ```
/// use felix_segment::{Record, SegmentConfig, SegmentWriter};
///
/// let dir = tempfile::tempdir()?;
/// let fs = felix_io::FileSystem::os();
/// let mut writer = SegmentWriter::create(&fs, dir.path(), 0, 100, SegmentConfig::default(), "doc".into())?;
/// let appended = writer.append(&[Record::new(1, "a"), Record::new(2, "b")])?;
/// assert_eq!((appended.first_offset, appended.last_offset), (100, 101));
/// writer.sync()?;
/// let records = writer.read(100, 1 << 20)?;
/// assert_eq!(records[1].payload, "b");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SegmentWriter {
    segment: Arc<SegmentFile>,
    next_offset: u64,
    len: u64,
    staging: Vec<u8>,
    /// Entries for the first record and every `index_spacing_bytes` after;
    /// shared with readers (one copy in memory).
    index: ActiveIndex,
    index_spacing_bytes: u64,
    /// Position of the last entry, so deciding the next needs no lock.
    last_indexed: Option<u64>,
    /// Where the running maximum timestamp grew at an index entry point;
    /// shared with readers, written to a file when the segment is sealed.
    time_index: ActiveTimeIndex,
    /// The largest timestamp appended to the segment, if any.
    max_timestamp: Option<u64>,
    /// The running maximum at the last time index entry.
    last_time_entry: Option<u64>,
    /// Whether sealing wrote the time index file.
    time_index_written: bool,
    /// The index file, extended as entries accumulate. `None` while it
    /// could not be written (a full disk, or a name that is not a regular
    /// file): the entries are then only in memory, and
    /// [`Self::persist_index`] and sealing try to write them again.
    index_file: Option<IndexFile>,
    /// Whether disk was reserved past the records, which sealing trims.
    preallocated: bool,
    /// The end of the space reserved so far ([`Self::reserve`]); 0 when
    /// nothing was.
    reserved_end: u64,
    poison: Poison,
}

impl SegmentWriter {
    /// Creates segment `id` in `dir` on the file system `fs`, its first
    /// record to be `base_offset`.
    ///
    /// The file is created with `create_new` (an existing segment is never
    /// overwritten), its header written and `fdatasync`ed, and the directory
    /// fsynced, all before the writer accepts a record: a record must never
    /// live in a segment whose header or directory entry could vanish.
    pub fn create(
        fs: &FileSystem,
        dir: &Path,
        id: u64,
        base_offset: u64,
        config: SegmentConfig,
        shard: Arc<str>,
    ) -> Result<Self> {
        let path = dir.join(file_name(id, FileKind::Segment).as_str());
        // The header is written and synced under a temporary name and only
        // then renamed into place, so a crash never leaves a segment file
        // without a complete header: for a shard's first segment there would
        // be no other way to tell where its log begins.
        let temp = dir.join(segment_temp_name(id).as_str());
        match fs.remove_file(&temp) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(SegmentError::io("remove", &temp, e)),
        }
        let file = open(fs, &temp, OpenMode::CreateNew)?;
        let header = SegmentHeader::new(base_offset, now_micros());
        file.write_all_at(&header.encode(), 0)
            .map_err(|e| SegmentError::io("write", &temp, e))?;
        let preallocated = match config.preallocate_bytes {
            Some(bytes) => file
                .preallocate(bytes)
                .map_err(|e| SegmentError::io("fallocate", &temp, e))?,
            None => false,
        };
        sync_data(&*file, &temp)?;
        // A segment is never overwritten (the shard's lock keeps anyone else
        // from creating one between this check and the rename).
        if fs.open(&path, OpenMode::Read).is_ok() {
            return Err(SegmentError::io(
                "create",
                &path,
                std::io::Error::from(std::io::ErrorKind::AlreadyExists),
            ));
        }
        fs.rename(&temp, &path)
            .map_err(|e| SegmentError::io("rename", &temp, e))?;
        let segment = SegmentFile::from_parts(fs, id, header, path, file, shard);
        let index_file = IndexFile::try_create(&segment, &[], None);
        sync_dir(fs, dir)?;
        tracing::debug!(shard = %segment.shard(), segment = id, base_offset, "segment created");
        Ok(Self {
            segment: Arc::new(segment),
            next_offset: base_offset,
            len: felix_format::SEGMENT_HEADER_LEN as u64,
            staging: Vec::new(),
            index: ActiveIndex::default(),
            index_spacing_bytes: config.index_spacing_bytes.max(1),
            last_indexed: None,
            time_index: ActiveTimeIndex::default(),
            max_timestamp: None,
            last_time_entry: None,
            time_index_written: false,
            index_file,
            preallocated,
            reserved_end: match config.preallocate_bytes {
                Some(bytes) if preallocated => bytes,
                _ => 0,
            },
            poison: Arc::default(),
        })
    }

    /// Continues writing a segment that recovery has verified: its records
    /// end at `len` and `next_offset`, and `index` and `time_index` hold
    /// the entries the recovery scan rebuilt (the time index as built by the
    /// walk, not sealed: the writer goes on observing from there). The
    /// index file is rewritten from them; if
    /// that fails (see [`Self::index_persisted`]) the index is served from
    /// memory, and writing it is tried again at [`Self::persist_index`] and
    /// when the segment is sealed.
    pub fn resume(
        segment: Arc<SegmentFile>,
        next_offset: u64,
        len: u64,
        index: SparseIndex,
        time_index: TimeIndex,
        config: SegmentConfig,
    ) -> Result<Self> {
        Self::resume_with_index_file(segment, next_offset, len, index, time_index, config, None)
    }

    /// [`Self::resume`], given the segment's index file already open
    /// read-write (recovery opens it so to check it under the shard's
    /// lock): the descriptor is kept when the file holds exactly `index`
    /// (judged from the bytes recovery read, when it kept them), so a
    /// clean reopen opens and reads the file once, not twice.
    pub fn resume_with_index_file(
        segment: Arc<SegmentFile>,
        next_offset: u64,
        len: u64,
        index: SparseIndex,
        time_index: TimeIndex,
        config: SegmentConfig,
        index_file: Option<OpenedIndex>,
    ) -> Result<Self> {
        debug_assert!(
            time_index
                .last_offset()
                .is_none_or(|last| last < next_offset),
            "the time index observed records the segment holds"
        );
        let index_file = IndexFile::try_create(&segment, index.entries(), index_file);
        Ok(Self {
            segment,
            next_offset,
            len,
            staging: Vec::new(),
            last_indexed: index.entries().last().map(|e| e.position),
            index: ActiveIndex::new(index.entries().to_vec()),
            index_spacing_bytes: config.index_spacing_bytes.max(1),
            last_time_entry: time_index.entries().last().map(|e| e.timestamp_micros),
            max_timestamp: time_index.max_timestamp_micros(),
            time_index: ActiveTimeIndex::new(time_index.entries().to_vec()),
            time_index_written: false,
            index_file,
            // Space an earlier writer reserved past the records is not
            // known (nor trimmed) until this one reserves some.
            preallocated: false,
            reserved_end: 0,
            poison: Arc::default(),
        })
    }

    /// Reserves disk for the segment up to `end` bytes (without changing
    /// its length), unless that much is reserved already, so that writes
    /// below `end` need no block allocation; sealing trims what is left
    /// unused. Returns whether the file system reserved it (`false` where
    /// it cannot: the file then grows as written).
    ///
    /// A failure (a full disk) is returned without stopping the writer:
    /// reserving is only an optimisation, and a write that then really
    /// finds no space fails on its own.
    pub fn reserve(&mut self, end: u64) -> Result<bool> {
        self.check_poison()?;
        if end <= self.reserved_end {
            return Ok(true);
        }
        let path = self.segment.path();
        let reserved = self
            .segment
            .file()
            .preallocate(end)
            .map_err(|e| SegmentError::io("fallocate", path, e))?;
        // Unsupported: asking again at every step would cost a system call
        // each time for nothing.
        self.reserved_end = if reserved { end } else { u64::MAX };
        self.preallocated |= reserved;
        Ok(reserved)
    }

    /// The end of the space reserved with [`Self::reserve`] or at
    /// creation: writes below it need no block allocation. `u64::MAX` once
    /// the file system has said it cannot reserve.
    pub fn reserved_end(&self) -> u64 {
        self.reserved_end
    }

    /// Appends `records` with contiguous offsets from [`Self::next_offset`],
    /// in one `write`.
    ///
    /// Every payload is checked before anything is encoded, so an oversized
    /// record, or a batch whose offsets would pass the end of the offset
    /// space, rejects the whole batch with nothing written. A failed write
    /// stops the writer; the bytes it may have left are beyond the writer's
    /// length and are never reported as records.
    pub fn append(&mut self, records: &[Record]) -> Result<Appended> {
        self.check_poison()?;
        let Some(last_index) = records.len().checked_sub(1) else {
            return Err(SegmentError::EmptyBatch);
        };
        if self.next_offset.checked_add(records.len() as u64).is_none() {
            return Err(SegmentError::OffsetSpaceExhausted {
                segment: self.segment.id(),
                next_offset: self.next_offset,
                records: records.len(),
            });
        }
        for (index_in_batch, record) in records.iter().enumerate() {
            if record.payload.len() > MAX_PAYLOAD_BYTES as usize {
                return Err(SegmentError::PayloadTooLarge {
                    index_in_batch,
                    len: record.payload.len(),
                    max: MAX_PAYLOAD_BYTES,
                });
            }
        }
        self.staging.clear();
        for (i, record) in records.iter().enumerate() {
            let header = encode_record_header(
                self.next_offset + i as u64,
                record.timestamp_micros,
                &record.payload,
            )
            .map_err(|kind| SegmentError::Corrupt {
                site: self.segment.site(self.len),
                kind,
            })?;
            self.staging.extend_from_slice(&header);
            self.staging.extend_from_slice(&record.payload);
        }
        let written = self.segment.file().write_all_at(&self.staging, self.len);
        if let Err(e) = written {
            return Err(self.poison_with(SegmentError::io("write", self.segment.path(), e)));
        }
        // Only now that every byte is written do the records exist, so only
        // now are they indexed and counted.
        let first_offset = self.next_offset;
        let mut position = self.len;
        for record in records {
            let ts = record.timestamp_micros;
            let max = self.max_timestamp.map_or(ts, |m| m.max(ts));
            self.max_timestamp = Some(max);
            if entry_due(self.last_indexed, position, self.index_spacing_bytes) {
                self.index.push(IndexEntry {
                    offset: self.next_offset,
                    position,
                });
                self.last_indexed = Some(position);
                // The rule `TimeIndexBuilder::observe` follows for a walk.
                if self.last_time_entry.is_none_or(|last| max > last) {
                    self.time_index.push(TimeIndexEntry {
                        timestamp_micros: max,
                        offset: self.next_offset,
                    });
                    self.last_time_entry = Some(max);
                }
            }
            position += record_encoded_len(record.payload.len() as u32);
            self.next_offset += 1;
        }
        debug_assert_eq!(
            position - self.len,
            self.staging.len() as u64,
            "the records counted are exactly the bytes written"
        );
        debug_assert_eq!(self.next_offset - first_offset, records.len() as u64);
        self.len = position;
        if self.staging.capacity() > STAGING_KEEP_BYTES {
            self.staging = Vec::new();
        }
        Ok(Appended {
            first_offset,
            last_offset: first_offset + last_index as u64,
            end_position: self.len,
        })
    }

    /// Makes everything appended so far durable (`fdatasync`), writing any
    /// new index entries first (unsynced: the index may lag; failing to
    /// write them leaves the index in memory, see [`Self::index_persisted`]).
    pub fn sync(&mut self) -> Result<()> {
        self.check_poison()?;
        // Logged and dropped by `write_pending_index`: not the data's fault.
        let _ = self.write_pending_index();
        self.sync_handle().sync_data()
    }

    /// Writes index entries not yet in the index file, without syncing it.
    ///
    /// The index may lag its segment (it is never trusted, and the newest
    /// segment is rescanned on open anyway); flushing it now and then keeps
    /// the lag, and the rescan's work after a clean restart, small. A
    /// failure is returned, and leaves the index in memory only (the writer
    /// goes on).
    pub fn flush_index(&mut self) -> Result<()> {
        self.check_poison()?;
        self.write_pending_index()
    }

    /// Appends the entries the index file lacks (none while there is no
    /// index file: they stay in memory).
    fn write_pending_index(&mut self) -> Result<()> {
        let Some(file) = &mut self.index_file else {
            return Ok(());
        };
        self.index
            .with_entries(|entries| file.append_pending(entries))
            .map_err(|e| self.drop_index_file(e))
    }

    /// Gives up the index file after `error` (logged): the index stays in
    /// memory, and is written whole to a new file when next persisted.
    fn drop_index_file(&mut self, error: SegmentError) -> SegmentError {
        tracing::warn!(shard = %self.segment.shard(), segment = self.segment.id(), %error, "index not written; it is held in memory and written again later");
        self.index_file = None;
        error
    }

    /// Brings the index file up to date, first writing it whole if it could
    /// not be written before. A failure to write it whole is returned but
    /// never stops the writer: the index is only an accelerator, and stays
    /// in memory.
    pub fn persist_index(&mut self) -> Result<()> {
        self.check_poison()?;
        if self.index_file.is_none() {
            let file = self.index.with_entries(|entries| {
                IndexFile::create(
                    self.segment.fs(),
                    self.segment.index_path(),
                    self.segment.base_offset(),
                    entries,
                )
            })?;
            self.index_file = Some(file);
            return Ok(());
        }
        self.flush_index()
    }

    /// Whether the index file holds (or is being extended with) the
    /// writer's entries; `false` while it could not be written and the
    /// index is in memory only.
    pub fn index_persisted(&self) -> bool {
        self.index_file.is_some()
    }

    /// A handle that can `fdatasync` this segment without borrowing the
    /// writer, so a flusher thread can sync while appends continue. A failure
    /// through the handle stops the writer too.
    pub fn sync_handle(&self) -> SyncHandle {
        SyncHandle {
            segment: Arc::clone(&self.segment),
            poison: Arc::clone(&self.poison),
        }
    }

    /// Finishes the segment: sync its data, write out the index and the
    /// time index, trim any preallocation to the records' length, and fsync. The index is
    /// written whole if it could not be written before; failing to write or
    /// sync it leaves the sealed segment without a usable one (its readers
    /// rebuild it) and the writer going (see [`Self::index_persisted`]).
    pub fn seal(mut self) -> Result<SealedSegment> {
        self.finish()?;
        Ok(self.into_sealed())
    }

    /// Does everything [`Self::seal`] does to the files, leaving the writer
    /// in place, so a caller can make the old segment durable before it
    /// creates the next one and only then swap writers.
    pub fn finish(&mut self) -> Result<()> {
        self.check_poison()?;
        let result = (|| {
            let segment = Arc::clone(&self.segment);
            let path = segment.path();
            sync_data(segment.file(), path)?;
            // The index never stops the seal: written and synced, or left
            // to the segment's readers to rebuild.
            if self.index_file.is_none() {
                self.index_file = self
                    .index
                    .with_entries(|entries| IndexFile::try_create(&segment, entries, None));
            } else if self.write_pending_index().is_ok()
                && let Some(Err(e)) = self.index_file.as_ref().map(IndexFile::sync)
            {
                self.drop_index_file(e);
            }
            self.time_index_written = self.write_time_index();
            if self.preallocated {
                self.segment
                    .file()
                    .set_len(self.len)
                    .map_err(|e| SegmentError::io("truncate", path, e))?;
                self.preallocated = false;
            }
            self.segment
                .file()
                .sync_all()
                .map_err(|e| SegmentError::io("fsync", path, e))
        })();
        if let Err(e) = result {
            return Err(self.poison_with(e));
        }
        tracing::debug!(shard = %self.segment.shard(), segment = self.segment.id(), next_offset = self.next_offset, "segment sealed");
        Ok(())
    }

    /// The sealed segment's description, once [`Self::finish`] succeeded.
    pub fn into_sealed(self) -> SealedSegment {
        let base_offset = self.segment.base_offset();
        let time_index = self.time_index_so_far().sealed();
        SealedSegment {
            extent: self.extent(),
            segment: self.segment,
            index: SparseIndex::from_entries(base_offset, self.index.into_entries()),
            time_index,
        }
    }

    /// Reads records from `from` (see [`SegmentFile::read`]) using the
    /// writer's own index.
    pub fn read(&self, from: u64, max_bytes: u64) -> Result<Vec<crate::ReadRecord>> {
        let (entry, _) = self.index.seek_span(self.segment.base_offset(), from);
        self.segment.read(entry, from, self.read_limit(), max_bytes)
    }

    /// The limit readers may go up to: what this writer has fully written.
    pub fn read_limit(&self) -> ReadLimit {
        ReadLimit {
            end_position: self.len,
            next_offset: self.next_offset,
        }
    }

    /// The segment being written.
    pub fn segment(&self) -> &Arc<SegmentFile> {
        &self.segment
    }

    /// The offset the next appended record will get.
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// Bytes of the segment file holding header and complete records.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the segment holds no record yet.
    pub fn is_empty(&self) -> bool {
        self.next_offset == self.segment.base_offset()
    }

    /// The index entries so far.
    pub fn index_entries(&self) -> Vec<IndexEntry> {
        self.index.with_entries(<[IndexEntry]>::to_vec)
    }

    /// A handle on the segment's index, shared with the writer: readers
    /// seek through it as entries are added, without a copy.
    pub fn active_index(&self) -> ActiveIndex {
        self.index.clone()
    }

    /// The failure that stopped this writer, if any.
    pub fn poisoned(&self) -> Option<&Arc<SegmentError>> {
        self.poison.get()
    }

    fn check_poison(&self) -> Result<()> {
        match self.poison.get() {
            Some(original) => Err(SegmentError::Poisoned {
                path: self.segment.path().to_path_buf(),
                original: Arc::clone(original),
            }),
            None => Ok(()),
        }
    }

    fn poison_with(&self, err: SegmentError) -> SegmentError {
        poison(&self.poison, self.segment.path(), err)
    }
}

/// The name of the temporary a new segment's header is written under:
/// `{id:020}.log.tmp`. One left by a crash holds no record.
pub fn segment_temp_name(id: u64) -> felix_format::FileName {
    // Every variant but `Other` has a name.
    felix_format::ShardFileName::SegmentTemp(id)
        .file_name()
        .unwrap_or_else(|| file_name(id, FileKind::Segment))
}

/// A segment that will not be written again.
#[derive(Debug)]
pub struct SealedSegment {
    /// The segment file.
    pub segment: Arc<SegmentFile>,
    /// Its id, offsets and length.
    pub extent: SegmentExtent,
    /// Its index.
    pub index: SparseIndex,
    /// Its time index, sealed (its last entry holds the segment's largest
    /// timestamp).
    pub time_index: TimeIndex,
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

mod config;
mod sync;
#[cfg(test)]
mod tests;
mod time;

pub use config::{Appended, DEFAULT_INDEX_SPACING_BYTES, Record, SegmentConfig};
pub use sync::SyncHandle;
use sync::{Poison, poison};
