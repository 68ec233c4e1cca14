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
//!   every file read-only (an [`open_shard`] opens the newest segment and
//!   its index read-write, under the lock, to hand them to the writer, and
//!   writes nothing through them); only [`repair`] (and [`open_shard`],
//!   which calls it) modifies the directory, and both require the directory's
//!   [`ShardLock`], so no repair races a writer. (A clean close's
//!   [`write_clean_shutdown`] is the one other write.)
//! * Data flows one way: the directory is listed, each segment measured
//!   into facts (values, holding no file-system handle), the facts
//!   classified and planned by pure code, and only then is anything
//!   written.
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

// The pipeline, in the order data flows. Each module uses only modules on
// the lines above its own (checked with a grep of `use crate::`; see
// ARCHITECTURE.md):
//   classify, lock        the decisions' vocabulary and rules; the lock
//   location              where damage lies (pure)
//   report                findings, notes, actions: what is reported
//   error, inspection     failures; options and the result
//   listing, clean,       reading names, the clean-shutdown file,
//   key_file, log_start,  the key and log-start files (and writing
//   tail                  them), tails
//   facts                 measured values, holding no file-system handle
//   scan, scrub,          measuring (scrub: every checksum, read-only);
//   plan, repair          deciding (pure); the only writer
//   open                  inspect and open_shard, composing the above
mod classify;
mod clean;
mod error;
mod facts;
mod held;
mod inspection;
mod key_file;
mod listing;
mod location;
mod lock;
mod log_start;
mod open;
mod plan;
mod raft_state;
mod repair;
mod report;
mod scan;
mod scrub;
mod tail;

pub use classify::{DamageLocation, RepairClass, RepairPolicy, is_repairable_tail};
pub use error::RecoveryError;
/// The clean-shutdown file's names, as felix-format defines them, beside
/// [`write_clean_shutdown`].
pub use felix_format::{CLEAN_SHUTDOWN_FILE_NAME, CLEAN_SHUTDOWN_TEMP_FILE_NAME};
/// The depth of a scan and the damage it met, as felix-format's cursor
/// defines them.
pub use felix_format::{Damage, ScanDepth};
pub use felix_io::side_file::{ReadSideFileError, read_side_file};
pub use inspection::{IndexCheck, InspectOptions, Inspection, SegmentSummary};
pub use key_file::{StoredKey, read_key_file, write_key_file};
pub use location::{BLOCK_BYTES, UnwrittenBlocks};
pub use lock::{LockError, ShardLock, StoreLock};
pub use log_start::{StoredLogStart, read_log_start, write_log_start};
pub use open::{
    NewestSegment, OpenHints, OpenOptions, RecoveredShard, inspect, open_shard, open_shard_with,
};
pub use raft_state::{StoredRaftSnapshot, StoredRaftState, read_raft_snapshot, read_raft_state};
pub use repair::{
    Repaired, remove_clean_shutdown, repair, write_clean_shutdown, write_clean_shutdown_unsynced,
};
pub use report::{
    Action, CleanShutdownUnused, Finding, FindingContext, IndexProblem, Note, SideFileProblem,
    TemporaryKind, TimeIndexProblem,
};
pub use scan::{CheckedScan, ScanStart, SegmentScan, scan_segment, scan_segment_checking};
pub use scrub::{ScrubDamage, SegmentScrub, scrub_segment};
