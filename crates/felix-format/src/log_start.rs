//! Bytes of the `log-start` file: where a shard's log begins when that is
//! inside a segment (records deleted before an offset, as Kafka's
//! DeleteRecords and a Raft log's purge do) or after a reset.
//!
//! This file is an addition of felix storage to format v2 (see
//! `docs/storage-format.md`); the reference implementation writes none,
//! and a shard without one begins at its first segment's base offset.
//!
//! Layout (big-endian, 28 bytes): magic `FLLS` (4), version (2), flags (2),
//! `start_offset` (8), `first_segment_id` (8), `crc` (4) — the CRC-32 of
//! bytes 0..24. Flags bit 0 ([`FLAG_OFFLOADED`]) says what moved the start
//! ([`MovedBy`]); every other bit is refused.
//!
//! The record says: the log begins at `start_offset`, in the segment with
//! id `first_segment_id` or a later one; every segment with a lower id lies
//! wholly below the start. A reset to a later offset records the id of the
//! fresh segment it is about to create, so a crash anywhere in the reset
//! leaves either the old log or the new one.

use crate::bytes_be::{put, u64_at};
use crate::side_file::{
    SideFileBody, SideFileChecksum, SideFileError, SideFileKind, SideFileLayout, SideFileVersion,
};

/// Magic of the `log-start` file: ASCII `FLLS`, "Felix Log Start".
pub const LOG_START_MAGIC: u32 = u32::from_be_bytes(*b"FLLS");
/// Version of the log-start layout.
pub const LOG_START_VERSION: u16 = 1;
/// Length of the file: it has no variable part.
pub const LOG_START_FILE_LEN: usize = 28;
/// Flags bit 0: an offload moved the start ([`MovedBy::Offload`]).
pub const FLAG_OFFLOADED: u16 = 1;

/// What moved a shard's log start, recorded in the file's flags so that a
/// tiering layer can tell records that must be in its remote copy from
/// records deleted on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MovedBy {
    /// A deletion of records or a reset (flags 0): the records below the
    /// start were discarded and may be held anywhere or nowhere.
    #[default]
    Deletion,
    /// An offload (flags bit 0, [`FLAG_OFFLOADED`]): when the start moved, a
    /// durable remote manifest listed every record below `start_offset`
    /// that remote retention had not deleted.
    Offload,
}

/// Where a shard's log begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogStart {
    /// The first offset of the log: reads below it are refused as trimmed.
    pub start_offset: u64,
    /// The lowest id of a segment that may hold offsets at or above the
    /// start; segments with lower ids lie wholly below it.
    pub first_segment_id: u64,
    /// What moved the start here.
    pub moved_by: MovedBy,
}

/// The log-start file's frame: 28 bytes, no body, flags bit 0
/// ([`FLAG_OFFLOADED`]) defined, the CRC at 24 over bytes 0..24.
pub const LOG_START_LAYOUT: SideFileLayout = SideFileLayout {
    kind: SideFileKind::LogStart,
    name: "LogStart",
    file: "log-start file",
    field: "log-start",
    entries: "",
    magic: LOG_START_MAGIC,
    versions: &[SideFileVersion {
        version: LOG_START_VERSION,
        header_len: LOG_START_FILE_LEN,
        known_flags: FLAG_OFFLOADED,
    }],
    has_flags: true,
    body: SideFileBody::None,
    checksum: SideFileChecksum::HeaderAndBody,
};

/// The file's 28 bytes.
///
/// ```
/// use felix_format::log_start::{LogStart, decode_log_start, encode_log_start};
///
/// use felix_format::log_start::MovedBy;
///
/// let start = LogStart { start_offset: 1_000, first_segment_id: 3, moved_by: MovedBy::Offload };
/// let bytes = encode_log_start(&start);
/// assert_eq!(&bytes[..4], b"FLLS");
/// assert_eq!(&bytes[6..8], &[0, 1]); // flags: bit 0, moved by an offload
/// assert_eq!(decode_log_start(&bytes), Ok(start));
/// ```
pub fn encode_log_start(start: &LogStart) -> [u8; LOG_START_FILE_LEN] {
    let mut out = [0u8; LOG_START_FILE_LEN];
    let flags = match start.moved_by {
        MovedBy::Deletion => 0,
        MovedBy::Offload => FLAG_OFFLOADED,
    };
    LOG_START_LAYOUT.write_preamble(LOG_START_VERSION, flags, &mut out);
    put(&mut out, 8, &start.start_offset.to_be_bytes());
    put(&mut out, 16, &start.first_segment_id.to_be_bytes());
    LOG_START_LAYOUT.seal(&mut out);
    out
}

/// Decodes a log-start file: its length, magic, version, flags (bit 0 is
/// [`MovedBy::Offload`]; any other bit is
/// [`SideFileDefect::Flags`](crate::side_file::SideFileDefect::Flags)),
/// then the CRC.
///
/// ```
/// use felix_format::log_start::decode_log_start;
/// use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
///
/// let length = SideFileDefect::Length { len: 4 };
/// assert_eq!(decode_log_start(b"FLLS"), Err(SideFileError::new(SideFileKind::LogStart, length)));
/// ```
pub fn decode_log_start(bytes: &[u8]) -> Result<LogStart, SideFileError> {
    let frame = LOG_START_LAYOUT.decode(bytes)?;
    let raw = frame.header;
    Ok(LogStart {
        start_offset: u64_at(raw, 8),
        first_segment_id: u64_at(raw, 16),
        moved_by: if frame.flags & FLAG_OFFLOADED != 0 {
            MovedBy::Offload
        } else {
            MovedBy::Deletion
        },
    })
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::side_file::SideFileDefect as D;

    const fn error(defect: D) -> SideFileError {
        SideFileError::new(SideFileKind::LogStart, defect)
    }

    const START: LogStart = LogStart {
        start_offset: 0x0102_0304_0506_0708,
        first_segment_id: 9,
        moved_by: MovedBy::Deletion,
    };

    #[test]
    fn encode_writes_the_documented_bytes() {
        #[rustfmt::skip]
        let mut expected: Vec<u8> = [
            &b"FLLS"[..],
            &[0, 1, 0, 0],
            &[1, 2, 3, 4, 5, 6, 7, 8],
            &9u64.to_be_bytes(),
            &[0; 4],
        ]
        .concat();
        let crc = crc32fast::hash(&expected[..24]);
        expected[24..].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(encode_log_start(&START).to_vec(), expected);
    }

    #[test]
    fn encode_offload_sets_flags_bit_0_only_and_round_trips() {
        let offloaded = LogStart {
            moved_by: MovedBy::Offload,
            ..START
        };
        let bytes = encode_log_start(&offloaded);
        let deleted = encode_log_start(&START);
        assert_eq!(&bytes[6..8], &[0, 1]);
        assert_eq!(&deleted[6..8], &[0, 0]);
        // Only the flags and the CRC differ.
        assert_eq!(bytes[..6], deleted[..6]);
        assert_eq!(bytes[8..24], deleted[8..24]);
        assert_eq!(decode_log_start(&bytes), Ok(offloaded));
        assert_eq!(decode_log_start(&deleted), Ok(START));
    }

    #[test]
    fn decode_refuses_every_unknown_flag_bit() {
        for moved_by in [MovedBy::Deletion, MovedBy::Offload] {
            let good = encode_log_start(&LogStart { moved_by, ..START });
            for bit in 1..16 {
                let mut bytes = good;
                let flags = u16::from_be_bytes([bytes[6], bytes[7]]) | (1 << bit);
                bytes[6..8].copy_from_slice(&flags.to_be_bytes());
                let crc = crc32fast::hash(&bytes[..24]);
                bytes[24..].copy_from_slice(&crc.to_be_bytes());
                assert_eq!(
                    decode_log_start(&bytes),
                    Err(error(D::Flags {
                        found: flags,
                        known: FLAG_OFFLOADED
                    })),
                    "bit {bit}"
                );
            }
        }
    }

    #[test]
    fn decode_rejects_every_truncation_and_every_bit_flip_naming_the_field() {
        for moved_by in [MovedBy::Deletion, MovedBy::Offload] {
            every_truncation_and_bit_flip(LogStart { moved_by, ..START });
        }
    }

    fn every_truncation_and_bit_flip(start: LogStart) {
        let bytes = encode_log_start(&start);
        for len in 0..bytes.len() {
            assert_eq!(
                decode_log_start(&bytes[..len]),
                Err(error(D::Length { len }))
            );
        }
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert_eq!(decode_log_start(&longer), Err(error(D::Length { len: 29 })));
        let stored = u32::from_be_bytes(bytes[24..].try_into().unwrap());
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes;
            flipped[bit / 8] ^= 1 << (bit % 8);
            let field = |at: usize, n: usize| {
                flipped[at..at + n]
                    .iter()
                    .fold(0u32, |acc, &b| (acc << 8) | u32::from(b))
            };
            let expected = match bit / 8 {
                0..4 => error(D::Magic {
                    found: field(0, 4),
                    expected: LOG_START_MAGIC,
                }),
                4..6 => error(D::Version {
                    found: field(4, 2) as u16,
                    expected: LOG_START_VERSION,
                }),
                // Bit 0 of the flags is known: flipping it changes what
                // the bytes mean, so the CRC catches it.
                7 if bit % 8 == 0 => error(D::Checksum {
                    expected: stored,
                    found: crc32fast::hash(&flipped[..24]),
                }),
                6..8 => error(D::Flags {
                    found: field(6, 2) as u16,
                    known: FLAG_OFFLOADED,
                }),
                24..28 => error(D::Checksum {
                    expected: field(24, 4),
                    found: stored,
                }),
                _ => error(D::Checksum {
                    expected: stored,
                    found: crc32fast::hash(&flipped[..24]),
                }),
            };
            assert_eq!(decode_log_start(&flipped), Err(expected), "bit {bit}");
        }
    }
}
