//! The 32-byte header at the start of every segment file.
//!
//! It is written once and synced before any record claims to live in the
//! segment, so damage here is never a torn write: every failure is reported
//! and none is repairable.

use crate::bytes_be::{put, u16_at, u32_at, u64_at};
use crate::checksum::crc32;
use crate::{CorruptionKind, FORMAT_VERSION, SEGMENT_HEADER_LEN, SEGMENT_MAGIC};

/// The decoded header of a segment file.
///
/// Layout (big-endian): magic `FLSG` (4), version (2), flags (2),
/// `base_offset` (8), `created_at_micros` (8), `header_crc` over bytes 0..24
/// (4), reserved zero (4).
///
/// ```
/// use felix_format::SegmentHeader;
///
/// let header = SegmentHeader::new(1, 2);
/// let bytes = header.encode();
/// assert_eq!(&bytes[24..28], &[0x7A, 0x09, 0xE5, 0xB1]);
/// assert_eq!(SegmentHeader::decode(&bytes), Ok(header));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SegmentHeader {
    /// Logical offset of the segment's first record.
    pub base_offset: u64,
    /// Wall-clock creation time in microseconds; informational only.
    pub created_at_micros: u64,
}

impl SegmentHeader {
    /// A header for a segment whose first record will have `base_offset`.
    pub const fn new(base_offset: u64, created_at_micros: u64) -> Self {
        Self {
            base_offset,
            created_at_micros,
        }
    }

    /// The header's 32 bytes.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_LEN] {
        let mut out = [0u8; SEGMENT_HEADER_LEN];
        put(&mut out, 0, &SEGMENT_MAGIC.to_be_bytes());
        put(&mut out, 4, &FORMAT_VERSION.to_be_bytes());
        // Bytes 6..8 (flags) stay zero: no flag is defined in version 2.
        put(&mut out, 8, &self.base_offset.to_be_bytes());
        put(&mut out, 16, &self.created_at_micros.to_be_bytes());
        let crc = crc32(out.get(..24).unwrap_or_default());
        put(&mut out, 24, &crc.to_be_bytes());
        out
    }

    /// Decodes the header at the start of `bytes`.
    ///
    /// Checks, in order: 32 bytes present (`Truncated`), magic, version,
    /// flags, header CRC, reserved field. Version is checked before the CRC
    /// so that a header from another format version is named as such rather
    /// than reported as a checksum failure.
    pub fn decode(bytes: &[u8]) -> Result<Self, CorruptionKind> {
        let Some(raw) = bytes.first_chunk::<SEGMENT_HEADER_LEN>() else {
            return Err(CorruptionKind::Truncated {
                needed: SEGMENT_HEADER_LEN as u64,
                available: bytes.len() as u64,
            });
        };
        let magic = u32_at(raw, 0);
        if magic != SEGMENT_MAGIC {
            return Err(CorruptionKind::SegmentMagic { found: magic });
        }
        let version = u16_at(raw, 4);
        if version != FORMAT_VERSION {
            return Err(CorruptionKind::SegmentVersion { found: version });
        }
        let flags = u16_at(raw, 6);
        if flags != 0 {
            return Err(CorruptionKind::SegmentFlags { found: flags });
        }
        let expected = u32_at(raw, 24);
        let found = crc32(raw.get(..24).unwrap_or_default());
        if expected != found {
            return Err(CorruptionKind::SegmentHeaderChecksum { expected, found });
        }
        let reserved = u32_at(raw, 28);
        if reserved != 0 {
            return Err(CorruptionKind::SegmentReserved { found: reserved });
        }
        Ok(Self {
            base_offset: u64_at(raw, 8),
            created_at_micros: u64_at(raw, 16),
        })
    }
}
