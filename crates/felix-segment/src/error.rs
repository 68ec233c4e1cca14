//! Errors of segment and index operations.
//!
//! Every error names where it happened: I/O errors keep the operation and the
//! path, damage keeps its [`CorruptionSite`]. None is a formatted string.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use felix_format::{CorruptionKind, CorruptionSite, IndexEntry};
use felix_io::IoError;

/// What went wrong in a segment or index operation.
///
/// `Clone`, so that one failure can be both the failing call's error and a
/// stopped writer's reason.
#[non_exhaustive]
#[derive(Debug, Clone, thiserror::Error)]
pub enum SegmentError {
    /// A system call failed (the operation, the path, and the system's
    /// error as the source).
    #[error(transparent)]
    Io(#[from] IoError),
    /// Bytes on disk failed a format check.
    #[error("{kind} ({site})")]
    Corrupt {
        /// Where the damaged structure begins.
        site: CorruptionSite,
        /// What is wrong with it.
        kind: CorruptionKind,
    },
    /// An index entry did not lead to the record it promised. Indexes are
    /// never trusted, so this asks the caller to rebuild the index from the
    /// segment; it never means data was returned wrongly.
    #[error("index entry (offset {}, position {}) does not begin a valid record: {kind} ({site}); rebuild the index", entry.offset, entry.position)]
    StaleIndex {
        /// The entry that was followed.
        entry: IndexEntry,
        /// Where the scan from that entry failed.
        site: CorruptionSite,
        /// What was found there.
        kind: CorruptionKind,
    },
    /// A payload in a batch is larger than the format allows; nothing of the
    /// batch was written.
    #[error(
        "record {index_in_batch} of the batch has a {len}-byte payload, over the limit of {max} bytes; nothing was written"
    )]
    PayloadTooLarge {
        /// Position of the record within the batch.
        index_in_batch: usize,
        /// Its payload length.
        len: usize,
        /// [`MAX_PAYLOAD_BYTES`](felix_format::MAX_PAYLOAD_BYTES).
        max: u32,
    },
    /// An append was given no records.
    #[error("an append needs at least one record")]
    EmptyBatch,
    /// The batch's offsets would pass the last offset a record can have
    /// (`u64::MAX - 1`, so that the offset after it can be named); nothing
    /// was written.
    #[error(
        "segment {segment}: a batch of {records} record(s) from offset {next_offset} would pass the last offset a record can have ({}); nothing was written",
        u64::MAX - 1
    )]
    OffsetSpaceExhausted {
        /// The segment id.
        segment: u64,
        /// The offset the batch would begin at.
        next_offset: u64,
        /// Records in the batch.
        records: usize,
    },
    /// A read asked for an offset this segment does not hold.
    #[error("offset {offset} is not in segment {segment} (offsets {base_offset}..{next_offset})")]
    OffsetOutOfRange {
        /// The segment id.
        segment: u64,
        /// The offset asked for.
        offset: u64,
        /// The segment's first offset.
        base_offset: u64,
        /// One past the segment's last readable offset.
        next_offset: u64,
    },
    /// The writer stopped after an earlier write or sync failure. A failed
    /// fsync is never retried: the page cache may already have dropped the
    /// data it was meant to make durable, so a later "success" would lie.
    /// The call whose own write or sync failed gets that failure itself;
    /// every call after it gets this, naming it.
    #[error("segment {} accepts no more writes after an earlier failure: {original}", path.display())]
    Poisoned {
        /// The segment file.
        path: PathBuf,
        /// The failure that stopped the writer.
        original: Arc<SegmentError>,
    },
}

impl SegmentError {
    /// An [`SegmentError::Io`] for `op` on `path`.
    pub fn io(op: &'static str, path: &Path, source: io::Error) -> Self {
        Self::Io(IoError::new(op, path, source))
    }

    /// The corruption kind and site, if this error reports damage.
    pub fn corruption(&self) -> Option<(&CorruptionKind, &CorruptionSite)> {
        match self {
            Self::Corrupt { site, kind } | Self::StaleIndex { site, kind, .. } => {
                Some((kind, site))
            }
            Self::Poisoned { original, .. } => original.corruption(),
            _ => None,
        }
    }

    /// The underlying I/O error kind, following a poisoned writer to its
    /// original failure.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            Self::Io(err) => Some(err.kind()),
            Self::Poisoned { original, .. } => original.io_kind(),
            _ => None,
        }
    }
}

/// Shorthand used across this crate.
pub type Result<T, E = SegmentError> = std::result::Result<T, E>;
