//! Scanning, classifying damage, repair, index rebuild, and opening a shard
//! directory after a crash.
//!
//! Recovery turns a directory of segment files left by a crash into a shard
//! that can be opened — or into a precise refusal naming the shard, segment
//! and byte. The rules are the spec's "What recovery may repair":
//! only damage confined to the end of the newest segment can ever be
//! repaired, a `Truncated` tail (an unfinished write, provably) is repaired
//! by default, and so is damage in space a power loss left unwritten (zeros
//! where a header should be, or 4 KiB blocks never written), while damage
//! that may be rot of an acknowledged record is repaired only when the
//! caller opts in.
//!
//! Invariants this crate keeps:
//!
//! * It writes nothing unless its caller chose a repair: [`inspect`] opens
//!   every file read-only; only [`repair`] (and [`open_shard`], which calls
//!   it) modifies the directory, and both require the directory's
//!   [`ShardLock`], so no repair races a writer.
//! * Indexes are never trusted: a missing, invalid or stale index is rebuilt
//!   from its segment and reported as a note, never as damage.
//!
//! ```
//! use felix_io::FileSystem;
//! use felix_recovery::{inspect, InspectOptions};
//! use felix_segment::{Record, SegmentConfig, SegmentWriter};
//!
//! let dir = tempfile::tempdir()?;
//! let fs = FileSystem::os();
//! let mut writer = SegmentWriter::create(&fs, dir.path(), 0, 0, SegmentConfig::default(), "doc".into())?;
//! writer.append(&[Record::new(1, "a"), Record::new(2, "b")])?;
//! writer.sync()?;
//!
//! let inspection = inspect(&fs, dir.path(), "doc", &InspectOptions::default())?;
//! assert!(inspection.findings.is_empty());
//! assert_eq!(inspection.next_offset(), Some(2));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod chunked;
mod classify;
mod clean;
mod error;
mod index_check;
mod inspect;
mod key_file;
mod listing;
mod lock;
mod open;
mod repair;
mod report;
mod scan;
mod unwritten;

pub use classify::{DamageLocation, RepairClass, RepairPolicy, is_repairable_tail};
pub use clean::{
    CLEAN_SHUTDOWN_FILE_NAME, CLEAN_SHUTDOWN_TEMP_FILE_NAME, CleanShutdownUnused,
    write_clean_shutdown,
};
pub use error::RecoveryError;
pub use index_check::{IndexCheck, first_stale_entry};
pub use inspect::{InspectOptions, Inspection, SegmentSummary, inspect};
pub use key_file::{KeyFileProblem, StoredKey, read_key_file, write_key_file};
pub use lock::{LockError, ShardLock};
pub use open::{NewestSegment, OpenOptions, RecoveredShard, open_shard};
pub use repair::{Repaired, repair};
pub use report::{Action, Finding, FindingContext, IndexProblem, Note, TemporaryKind};
pub use scan::{
    Damage, ScanDepth, ScanStart, SegmentScan, find_intact_record, range_is_zero, scan_segment,
    search_start, tail_is_zero,
};
pub use unwritten::{BLOCK_BYTES, UnwrittenBlocks};
