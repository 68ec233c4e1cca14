//! One felix segment file, its sparse index and its time index: create,
//! append, read, seek, look up by time, seal.
//!
//! A segment is a 32-byte header followed by records back to back (see
//! `felix-format`). This crate writes and reads one segment the way a
//! production log does: one `write` per batch, `fdatasync` for durability,
//! `pread` for reads so readers share a descriptor without locks, and a
//! sparse index that speeds reads up but is never trusted.
//!
//! Invariants this crate keeps:
//!
//! * It never decides whether damage is repairable; it reports damage with
//!   its [`felix_format::CorruptionSite`] and leaves policy to
//!   `felix-recovery`.
//! * A record is reported as appended only after all of its bytes were
//!   written; after a write or sync failure a writer accepts nothing more.
//! * Every record a read returns passed its header and record checksums.
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod error;
pub mod fs;
mod index;
mod lookup;
mod reader;
mod run;
mod segment;
mod time_index;
mod walk;
mod writer;

pub use error::{Result, SegmentError};
pub use index::{
    ActiveIndex, IndexBuilder, IndexLoadError, OpenedIndex, SparseIndex, seek_entries, seek_span,
};
pub use lookup::TimestampHit;
pub use reader::{CHUNK_BYTES, ChunkedReader};
pub use run::{ReadBuffers, RecordRun, RunDamage, RunIter, RunRecord};
pub use segment::{ReadLimit, ReadRecord, ReadStart, SegmentFile};
pub use time_index::{
    ActiveTimeIndex, TimeBounds, TimeIndex, TimeIndexBuilder, TimeIndexCheck, TimeIndexLoadError,
    header_of, time_bounds,
};
pub use walk::{RecordWalk, WalkStep, first_stale_entry};
pub use writer::{
    Appended, DEFAULT_INDEX_SPACING_BYTES, Record, SealedSegment, SegmentConfig, SegmentWriter,
    SyncHandle, segment_temp_name,
};
