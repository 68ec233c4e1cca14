//! What a writer is told: how a segment is written, one record to append,
//! and what an append did.

use bytes::Bytes;

use super::now_micros;

/// Default spacing of sparse index entries: one per 2 KiB of segment data.
///
/// A read by offset starts at the entry below it and verifies every header
/// it passes, so the spacing sets how much a point read copies and checks:
/// at 2 KiB a random read of a small record passes half the headers it
/// does at 4 KiB, and is faster for it (measured in docs/performance.md,
/// "What was missed, and why": the random read), for 8 MiB of index per
/// GiB of segment instead of 4 MiB (held in memory for the active
/// segment).
pub const DEFAULT_INDEX_SPACING_BYTES: u64 = 2048;

/// How a segment is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentConfig {
    /// An index entry is emitted for the first record and then every this
    /// many bytes of segment data.
    pub index_spacing_bytes: u64,
    /// Disk space to reserve up front with `fallocate(FALLOC_FL_KEEP_SIZE)`,
    /// normally the segment size; `None` grows the file as it is written.
    pub preallocate_bytes: Option<u64>,
}

impl Default for SegmentConfig {
    fn default() -> Self {
        Self {
            index_spacing_bytes: DEFAULT_INDEX_SPACING_BYTES,
            preallocate_bytes: None,
        }
    }
}

/// One record to append: its publish time and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Publish time in microseconds.
    pub timestamp_micros: u64,
    /// The payload, at most [`MAX_PAYLOAD_BYTES`](felix_format::MAX_PAYLOAD_BYTES).
    pub payload: Bytes,
}

impl Record {
    /// A record from a timestamp and anything convertible to [`Bytes`].
    pub fn new(timestamp_micros: u64, payload: impl Into<Bytes>) -> Self {
        Self {
            timestamp_micros,
            payload: payload.into(),
        }
    }

    /// A record stamped with the wall clock now (microseconds since the
    /// Unix epoch; 0 for a clock set before it).
    ///
    /// ```
    /// # use felix_segment::Record;
    /// let record = Record::now("hello");
    /// assert!(record.timestamp_micros > 1_600_000_000_000_000);
    /// ```
    pub fn now(payload: impl Into<Bytes>) -> Self {
        Self::new(now_micros(), payload)
    }
}

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// Offset of the batch's first record.
    pub first_offset: u64,
    /// Offset of the batch's last record.
    pub last_offset: u64,
    /// The segment's length after the batch.
    pub end_position: u64,
}
