//! The vocabulary of damage: what is wrong ([`CorruptionKind`]) and where
//! ([`CorruptionSite`]).
//!
//! Variant names follow the spec's compatibility table so that an operator,
//! a log line and the spec all use the same word for the same failure. Each
//! variant carries the values that were seen, because "corruption detected"
//! is not enough to act on.

use alloc::string::String;
use core::fmt;

use crate::{INDEX_MAGIC, SEGMENT_MAGIC, WIRE_FRAME_MAGIC};

/// What is wrong with a run of bytes read from disk.
///
/// Produced by the decoders of this crate; upper layers pair it with a
/// [`CorruptionSite`] saying where it was found.
///
/// ```
/// # use felix_format::{CorruptionKind, SegmentHeader};
/// // What decoding a segment header from 31 bytes finds:
/// # let err = SegmentHeader::decode(b"FLX1 is a wire frame, not a seg").unwrap_err();
/// assert_eq!(err, CorruptionKind::Truncated { needed: 32, available: 31 });
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CorruptionKind {
    /// A segment file does not start with `FLSG`.
    #[error("segment magic is {}, expected 0x464c5347 (FLSG){}", Magic(*.found), magic_hint(*.found))]
    SegmentMagic {
        /// The four bytes found, big-endian.
        found: u32,
    },
    /// A segment header names a version this build does not read.
    #[error("segment format version {found} is not supported (this build reads version 2 only){}", version_hint(*.found))]
    SegmentVersion {
        /// The version found.
        found: u16,
    },
    /// A segment header has flag bits set; unknown bits may change the layout
    /// behind them, so they are rejected rather than masked off.
    #[error(
        "segment header flags are {found:#06x}, expected 0 (unknown flags may change the layout, so they are not ignored)"
    )]
    SegmentFlags {
        /// The flags found.
        found: u16,
    },
    /// The segment header's CRC does not match its first 24 bytes.
    #[error("segment header checksum mismatch: stored {expected:#010x}, computed {found:#010x}")]
    SegmentHeaderChecksum {
        /// The CRC stored in the header.
        expected: u32,
        /// The CRC computed over the bytes read.
        found: u32,
    },
    /// The segment header's reserved field is not zero.
    ///
    /// The field lies outside the header CRC, so this check is what keeps a
    /// flipped bit there from going unnoticed.
    #[error("segment header reserved field is {found:#010x}, expected 0")]
    SegmentReserved {
        /// The reserved field found.
        found: u32,
    },
    /// The bytes end before a verified header says they should; the one shape
    /// recovery may repair without being asked.
    #[error("truncated: {needed} bytes needed, {available} available")]
    Truncated {
        /// Bytes the structure needs, counted from its start.
        needed: u64,
        /// Bytes present from its start.
        available: u64,
    },
    /// A record header's own CRC failed, so its length cannot be trusted.
    #[error(
        "record header checksum mismatch: stored {expected:#010x}, computed {found:#010x} (the record's length cannot be trusted)"
    )]
    RecordHeaderChecksum {
        /// The CRC stored in the record header.
        expected: u32,
        /// The CRC computed over the header bytes read.
        found: u32,
    },
    /// A record's checksum over its header prefix and payload failed.
    #[error("record checksum mismatch: stored {expected:#010x}, computed {found:#010x}")]
    RecordChecksum {
        /// The CRC stored in the record header.
        expected: u32,
        /// The CRC computed over the bytes read.
        found: u32,
    },
    /// A verified record header carries a payload length over the limit.
    #[error("record payload length {payload_len} exceeds the limit of {max} bytes")]
    RecordTooLarge {
        /// The payload length in the header.
        payload_len: u32,
        /// [`crate::MAX_PAYLOAD_BYTES`].
        max: u32,
    },
    /// A record's offset is not the one that follows its predecessor.
    #[error("record offset {found} out of order: expected {expected}")]
    OffsetOutOfOrder {
        /// The offset the position in the segment implies.
        expected: u64,
        /// The offset stored in the record.
        found: u64,
    },
    /// A record carries offset `u64::MAX`, which no record takes: the next
    /// offset of a segment holding it could not be named. Only a crafted
    /// record (or rot that kept its header CRC) carries it, since writers
    /// refuse an append past `u64::MAX - 1`.
    #[error(
        "record offset {found} has no successor (no record takes u64::MAX, so that the offset after the last record can be named)"
    )]
    OffsetOverflow {
        /// The offset stored in the record.
        found: u64,
    },
    /// An index file does not start with `FLSI`.
    #[error("index magic is {}, expected 0x464c5349 (FLSI){}", Magic(*.found), magic_hint(*.found))]
    IndexMagic {
        /// The four bytes found, big-endian.
        found: u32,
    },
    /// An index header names a version this build does not read.
    #[error("index format version {found} is not supported (this build reads version 2 only)")]
    IndexVersion {
        /// The version found.
        found: u16,
    },
    /// An index header has flag bits set.
    #[error("index header flags are {found:#06x}, expected 0")]
    IndexFlags {
        /// The flags found.
        found: u16,
    },
    /// An index belongs to a segment with another base offset.
    #[error("index base offset is {found}, but its segment begins at {expected}")]
    IndexBaseOffset {
        /// The segment's base offset.
        expected: u64,
        /// The base offset in the index header.
        found: u64,
    },
    /// An index entry does not lie strictly after its predecessor, or points
    /// outside the segment's records.
    #[error(
        "index entry {entry} (offset {offset}, position {position}) is out of order or outside the segment"
    )]
    IndexEntryOutOfOrder {
        /// Zero-based number of the entry.
        entry: u64,
        /// The entry's offset.
        offset: u64,
        /// The entry's byte position.
        position: u64,
    },
}

impl CorruptionKind {
    /// The variant's name as the spec spells it, e.g. `"RecordHeaderChecksum"`.
    ///
    /// Stable across releases: scripts match on it in `felix-store --json`.
    ///
    /// ```
    /// # use felix_format::CorruptionKind;
    /// let kind = CorruptionKind::Truncated { needed: 30, available: 12 };
    /// assert_eq!(kind.name(), "Truncated");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Self::SegmentMagic { .. } => "SegmentMagic",
            Self::SegmentVersion { .. } => "SegmentVersion",
            Self::SegmentFlags { .. } => "SegmentFlags",
            Self::SegmentHeaderChecksum { .. } => "SegmentHeaderChecksum",
            Self::SegmentReserved { .. } => "SegmentReserved",
            Self::Truncated { .. } => "Truncated",
            Self::RecordHeaderChecksum { .. } => "RecordHeaderChecksum",
            Self::RecordChecksum { .. } => "RecordChecksum",
            Self::RecordTooLarge { .. } => "RecordTooLarge",
            Self::OffsetOutOfOrder { .. } => "OffsetOutOfOrder",
            Self::OffsetOverflow { .. } => "OffsetOverflow",
            Self::IndexMagic { .. } => "IndexMagic",
            Self::IndexVersion { .. } => "IndexVersion",
            Self::IndexFlags { .. } => "IndexFlags",
            Self::IndexBaseOffset { .. } => "IndexBaseOffset",
            Self::IndexEntryOutOfOrder { .. } => "IndexEntryOutOfOrder",
        }
    }

    /// True for damage to a segment file's 32-byte header, which is written
    /// and synced before any record and so is never a torn write.
    pub fn is_segment_header(&self) -> bool {
        matches!(
            self,
            Self::SegmentMagic { .. }
                | Self::SegmentVersion { .. }
                | Self::SegmentFlags { .. }
                | Self::SegmentHeaderChecksum { .. }
                | Self::SegmentReserved { .. }
        )
    }

    /// True for problems with an index file, which is never trusted and is
    /// rebuilt from its segment rather than reported as damage.
    pub fn is_index(&self) -> bool {
        matches!(
            self,
            Self::IndexMagic { .. }
                | Self::IndexVersion { .. }
                | Self::IndexFlags { .. }
                | Self::IndexBaseOffset { .. }
                | Self::IndexEntryOutOfOrder { .. }
        )
    }
}

/// Where damage was found: which shard, which segment file, which byte.
///
/// `position` is the byte offset in the segment file where the damaged
/// structure (the record or the header) begins.
///
/// ```
/// # use felix_format::CorruptionSite;
/// let site = CorruptionSite::new("orders-0", 3, 4096);
/// assert_eq!(site.to_string(), "shard orders-0, segment 00000000000000000003.log, byte 4096");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CorruptionSite {
    /// The shard's label, normally its directory name.
    pub shard: String,
    /// The segment id (the number in the file name, not an offset).
    pub segment: u64,
    /// Byte position in the segment file where the damaged structure begins.
    pub position: u64,
}

impl CorruptionSite {
    /// A site in `segment` of `shard` at byte `position`.
    pub fn new(shard: impl Into<String>, segment: u64, position: u64) -> Self {
        Self {
            shard: shard.into(),
            segment,
            position,
        }
    }
}

impl fmt::Display for CorruptionSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "shard {}, segment {}, byte {}",
            self.shard,
            crate::file_name(self.segment, crate::FileKind::Segment),
            self.position
        )
    }
}

/// Renders four magic bytes as hex plus their ASCII where printable.
struct Magic(u32);

impl fmt::Display for Magic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)?;
        let bytes = self.0.to_be_bytes();
        if bytes.iter().all(|b| b.is_ascii_graphic()) {
            f.write_str(" (")?;
            for b in bytes {
                write!(f, "{}", char::from(b))?;
            }
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// Names the other felix magics so a misplaced file is recognised.
fn magic_hint(found: u32) -> &'static str {
    match found {
        WIRE_FRAME_MAGIC => ": this is a felix-wire network frame, not a storage file",
        INDEX_MAGIC => ": this is an index file",
        SEGMENT_MAGIC => ": this is a segment file",
        crate::EPOCHS_MAGIC => ": this is an epochs file",
        0 => ": the bytes are zero (never written, or preallocated space)",
        _ => "",
    }
}

fn version_hint(found: u16) -> &'static str {
    if found == 1 {
        "; version 1 was only written by unreleased builds: discard the data directory"
    } else {
        ""
    }
}
