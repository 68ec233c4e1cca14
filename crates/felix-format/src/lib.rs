//! Byte layouts of the felix storage format, version 2.
//!
//! This crate is the single place where the on-disk format is written down in
//! code: segment headers, records, the one walk over a segment's records
//! ([`RecordCursor`]), sparse index files, time index files
//! ([`time_index`]), the epochs file, the log-start file ([`log_start`]), the raft-state file ([`raft_state`]),
//! a tiered shard's remote manifest ([`tier_manifest`]),
//! the one frame and error all those small checksummed files share
//! ([`side_file`]), the corruption
//! vocabulary every layer above reports in, the one description of a
//! segment's extent, and every name a shard directory may hold.
//! `docs/storage-format.md` describes the same bytes in prose; a change to
//! one without the other is a bug.
//!
//! Invariants this crate keeps:
//!
//! * It does no I/O and builds as `#![no_std]` (with `alloc` only for the
//!   types that own text, such as [`ShardKey`] and [`CorruptionSite`]).
//! * Decoding borrows the caller's bytes and allocates nothing, with one
//!   exception: [`decode_clean_shutdown`](clean::decode_clean_shutdown) returns its segments as a `Vec`,
//!   sized by a count checked against the limit, the file's length and
//!   its CRC first. A manifest decodes to a borrowing
//!   [`ManifestView`](tier_manifest::ManifestView); the owned copy a tier
//!   keeps ([`to_manifest`](tier_manifest::ManifestView::to_manifest))
//!   allocates its segment list and key text, as
//!   [`KeyFileView::to_key`](key_file::KeyFileView::to_key) does.
//! * No length read from input is acted on before the checksum that covers it
//!   has been verified and the length has been range-checked.
//! * Decoders never panic, whatever the input.
//!
//! # Example
//!
//! ```
//! use felix_format::{decode_record, encode_record_header, RECORD_HEADER_LEN};
//!
//! let payload = b"hi";
//! let header = encode_record_header(7, 9, payload)?;
//! let mut bytes = header.to_vec();
//! bytes.extend_from_slice(payload);
//!
//! let record = decode_record(&bytes, Some(7))?;
//! assert_eq!(record.header.offset, 7);
//! assert_eq!(record.payload, b"hi");
//! assert_eq!(record.encoded_len(), (RECORD_HEADER_LEN + 2) as u64);
//! # Ok::<(), felix_format::CorruptionKind>(())
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
// Decoders read bytes from disk: nothing here may panic on them.
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

extern crate alloc;

mod bytes_be;
mod checksum;
pub mod clean;
mod corruption;
mod cursor;
pub mod epochs;
mod extent;
mod index;
pub mod key_file;
pub mod log_start;
mod naming;
pub mod raft_snapshot;
pub mod raft_state;
mod record;
mod segment_header;
pub mod side_file;
pub mod tier_manifest;
pub mod time_index;

pub use corruption::{CorruptionKind, CorruptionSite};
pub use cursor::{CursorRecord, CursorStep, Damage, RecordCursor, ScanDepth, SliceRecords};
pub use extent::SegmentExtent;
pub use index::{
    INDEX_ENTRY_LEN, INDEX_HEADER_LEN, IndexEntry, IndexHeader, IndexView, encode_index_entry,
    parse_index,
};
pub use naming::{
    CLEAN_SHUTDOWN_FILE_NAME, CLEAN_SHUTDOWN_TEMP_FILE_NAME, EPOCHS_FILE_NAME,
    EPOCHS_TEMP_FILE_NAME, FileKind, FileName, KEY_FILE_NAME, KEY_TEMP_FILE_NAME, LOCK_FILE_NAME,
    LOG_START_FILE_NAME, LOG_START_TEMP_FILE_NAME, RAFT_SNAPSHOT_FILE_NAME,
    RAFT_SNAPSHOT_TEMP_FILE_NAME, RAFT_STATE_FILE_NAME, RAFT_STATE_TEMP_FILE_NAME,
    SHARD_COMPONENT_MAX_CHARS, ShardFileName, ShardKey, file_name, is_shard_dir_name,
    parse_file_name, parse_tombstone_name, tombstone_name,
};
pub use record::{
    RecordHeader, RecordView, check_record, decode_record, decode_record_header,
    encode_record_header, record_encoded_len, record_header_fields,
};
pub use segment_header::SegmentHeader;

/// Magic of a segment data file (`*.log`): ASCII `FLSG`, "Felix Segment".
pub const SEGMENT_MAGIC: u32 = u32::from_be_bytes(*b"FLSG");
/// Magic of a sparse index file (`*.index`): ASCII `FLSI`, "Felix Segment Index".
pub const INDEX_MAGIC: u32 = u32::from_be_bytes(*b"FLSI");
/// Magic of the generation history file (`epochs`): ASCII `FLEP`.
pub const EPOCHS_MAGIC: u32 = u32::from_be_bytes(*b"FLEP");
/// Magic of the `clean-shutdown` file (felix storage's addition to the
/// format, see [`clean`]): ASCII `FLCS`, "Felix Clean Shutdown".
pub const CLEAN_SHUTDOWN_MAGIC: u32 = u32::from_be_bytes(*b"FLCS");
/// Magic of a felix-wire network frame (`FLX1`).
///
/// Never valid on disk; it is named here so that a frame which turned up in a
/// segment file is recognised as such in diagnostics instead of being called
/// merely "unknown magic".
pub const WIRE_FRAME_MAGIC: u32 = u32::from_be_bytes(*b"FLX1");

/// The one version number covering both the segment and the index layouts.
pub const FORMAT_VERSION: u16 = 2;

/// Length of a segment file header.
pub const SEGMENT_HEADER_LEN: usize = 32;
/// Length of a record header; the payload follows it directly.
pub const RECORD_HEADER_LEN: usize = 28;

/// The largest payload a record may carry: 64 MiB.
///
/// It bounds the allocation that a corrupt length field could request, so it
/// is checked before any buffer is sized from `payload_len`.
pub const MAX_PAYLOAD_BYTES: u32 = 64 * 1024 * 1024;
