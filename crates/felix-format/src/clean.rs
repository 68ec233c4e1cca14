//! Bytes of the `clean-shutdown` file: the segments a cleanly closed shard
//! left, so that the next open need not open every sealed segment.
//!
//! This file is an addition of felix storage to format v2 (see
//! `docs/storage-format.md`); readers that do not know it see a stray file
//! and lose nothing, since it only repeats what the segments say.
//!
//! Layout (big-endian): magic `FLCS` (4), version (2), flags (2, zero),
//! count (4), `crc` (4) — the CRC-32 of the header's first 12 bytes followed
//! by the entries — then `count` × `{ id u64, base_offset u64, next_offset
//! u64, len u64 }` (a [`SegmentExtent`]), one per segment in id order, the
//! last being the segment appends continue in.
//!
//! Decoding checks everything the bytes alone can prove: length, magic,
//! version, flags, the count's bound, the CRC, ids ascending, each
//! segment's offsets and length plausible, and offsets continuing from one
//! segment to the next. Whether the file still describes the directory is
//! the reader's question (`felix-recovery` compares it with the listing).

use alloc::vec::Vec;

use crate::bytes_be::u64_at;
use crate::side_file::{
    SideFileBody, SideFileChecksum, SideFileDefect, SideFileError, SideFileKind, SideFileLayout,
    SideFileVersion,
};
use crate::{CLEAN_SHUTDOWN_MAGIC, SEGMENT_HEADER_LEN, SegmentExtent};

/// Version of the clean-shutdown file layout.
pub const CLEAN_SHUTDOWN_VERSION: u16 = 1;
/// Length of the clean-shutdown file header.
pub const CLEAN_SHUTDOWN_HEADER_LEN: usize = 16;
/// Length of one entry.
pub const CLEAN_SHUTDOWN_ENTRY_LEN: usize = 32;
/// The most segments a clean-shutdown file may list (32 MiB of entries): a
/// bound on what an open reads, far above any real shard.
pub const MAX_CLEAN_SHUTDOWN_ENTRIES: usize = 1 << 20;
/// The largest valid clean-shutdown file.
pub const MAX_CLEAN_SHUTDOWN_FILE_LEN: usize =
    CLEAN_SHUTDOWN_HEADER_LEN + MAX_CLEAN_SHUTDOWN_ENTRIES * CLEAN_SHUTDOWN_ENTRY_LEN;

/// The clean-shutdown file's frame: 16-byte header with flags (none
/// defined), `count` at byte 8, the CRC at 12 over the header's first 12
/// bytes and the entries.
pub const CLEAN_SHUTDOWN_LAYOUT: SideFileLayout = SideFileLayout {
    kind: SideFileKind::CleanShutdown,
    name: "CleanShutdown",
    file: "clean-shutdown file",
    field: "clean-shutdown",
    entries: "segments",
    magic: CLEAN_SHUTDOWN_MAGIC,
    versions: &[SideFileVersion {
        version: CLEAN_SHUTDOWN_VERSION,
        header_len: CLEAN_SHUTDOWN_HEADER_LEN,
        known_flags: 0,
    }],
    has_flags: true,
    body: SideFileBody::Entries {
        count_at: 8,
        count_width: 4,
        entry_len: CLEAN_SHUTDOWN_ENTRY_LEN,
        min: 1,
        max: MAX_CLEAN_SHUTDOWN_ENTRIES as u32,
    },
    checksum: SideFileChecksum::HeaderAndBody,
};

const fn error(defect: SideFileDefect) -> SideFileError {
    SideFileError::new(SideFileKind::CleanShutdown, defect)
}

/// What is wrong with one clean-shutdown entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CleanEntryProblem {
    /// Its id is not above the previous entry's.
    #[error("id not above the previous segment's {previous}")]
    IdNotAscending {
        /// The previous entry's id.
        previous: u64,
    },
    /// Its next offset is below its base offset.
    #[error("next offset {next_offset} below base offset {base_offset}")]
    OffsetsBackwards {
        /// Its base offset.
        base_offset: u64,
        /// Its next offset.
        next_offset: u64,
    },
    /// Its base offset is not where the previous segment ended.
    #[error("base offset {base_offset}, but the previous segment ends at {expected}")]
    Gap {
        /// Its base offset.
        base_offset: u64,
        /// The previous entry's next offset.
        expected: u64,
    },
    /// Its length is shorter than a segment header.
    #[error("length {len} is shorter than a segment header")]
    TooShort {
        /// Its length.
        len: u64,
    },
}

/// Appends the encoded file listing `segments` (in id order, the active one
/// last) to `out`.
///
/// Fails, writing nothing, when the list would not decode: no reader should
/// ever be handed a file that this module rejects.
///
/// ```
/// use felix_format::SegmentExtent;
/// use felix_format::clean::{decode_clean_shutdown, encode_clean_shutdown};
/// let segments = [
///     SegmentExtent { id: 0, base_offset: 0, next_offset: 10, len: 1_592 },
///     SegmentExtent { id: 1, base_offset: 10, next_offset: 12, len: 344 },
/// ];
/// let mut bytes = Vec::new();
/// encode_clean_shutdown(&segments, &mut bytes)?;
/// assert_eq!(bytes.len(), 16 + 2 * 32);
/// assert_eq!(decode_clean_shutdown(&bytes)?, segments);
/// # Ok::<(), felix_format::side_file::SideFileError>(())
/// ```
pub fn encode_clean_shutdown(
    segments: &[SegmentExtent],
    out: &mut Vec<u8>,
) -> Result<(), SideFileError> {
    count_of(segments.len())?;
    check_entries(segments.iter().copied())?;
    let start = CLEAN_SHUTDOWN_LAYOUT.begin(CLEAN_SHUTDOWN_VERSION, 0, out);
    for s in segments {
        for field in [s.id, s.base_offset, s.next_offset, s.len] {
            out.extend_from_slice(&field.to_be_bytes());
        }
    }
    CLEAN_SHUTDOWN_LAYOUT.seal(out.get_mut(start..).unwrap_or_default());
    Ok(())
}

/// Decodes a clean-shutdown file into its segments, in id order.
pub fn decode_clean_shutdown(bytes: &[u8]) -> Result<Vec<SegmentExtent>, SideFileError> {
    let frame = CLEAN_SHUTDOWN_LAYOUT.decode(bytes)?;
    let segments: Vec<SegmentExtent> = frame
        .body
        .chunks_exact(CLEAN_SHUTDOWN_ENTRY_LEN)
        .map(|raw| SegmentExtent {
            id: u64_at(raw, 0),
            base_offset: u64_at(raw, 8),
            next_offset: u64_at(raw, 16),
            len: u64_at(raw, 24),
        })
        .collect();
    check_entries(segments.iter().copied())?;
    Ok(segments)
}

fn count_of(len: usize) -> Result<u32, SideFileError> {
    match u32::try_from(len) {
        Ok(count) if (1..=MAX_CLEAN_SHUTDOWN_ENTRIES).contains(&len) => Ok(count),
        _ => Err(error(SideFileDefect::Count {
            count: u32::try_from(len).unwrap_or(u32::MAX),
            min: 1,
            max: MAX_CLEAN_SHUTDOWN_ENTRIES as u32,
        })),
    }
}

fn check_entries(segments: impl Iterator<Item = SegmentExtent>) -> Result<(), SideFileError> {
    let mut previous: Option<SegmentExtent> = None;
    for (entry, s) in segments.enumerate() {
        let problem = match previous {
            Some(p) if s.id <= p.id => Some(CleanEntryProblem::IdNotAscending { previous: p.id }),
            Some(p) if s.base_offset != p.next_offset => Some(CleanEntryProblem::Gap {
                base_offset: s.base_offset,
                expected: p.next_offset,
            }),
            _ if s.next_offset < s.base_offset => Some(CleanEntryProblem::OffsetsBackwards {
                base_offset: s.base_offset,
                next_offset: s.next_offset,
            }),
            _ if s.len < SEGMENT_HEADER_LEN as u64 => {
                Some(CleanEntryProblem::TooShort { len: s.len })
            }
            _ => None,
        };
        if let Some(problem) = problem {
            return Err(error(SideFileDefect::SegmentEntry {
                entry,
                id: s.id,
                problem,
            }));
        }
        previous = Some(s);
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::side_file::SideFileDefect as D;

    fn checksum(file: &[u8]) -> u32 {
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&file[..12]);
        hasher.update(&file[16..]);
        hasher.finalize()
    }

    fn segments() -> Vec<SegmentExtent> {
        vec![
            SegmentExtent {
                id: 3,
                base_offset: 100,
                next_offset: 110,
                len: 1_592,
            },
            SegmentExtent {
                id: 4,
                base_offset: 110,
                next_offset: 110,
                len: 32,
            },
        ]
    }

    #[test]
    fn encode_writes_the_documented_bytes() {
        let mut bytes = Vec::new();
        encode_clean_shutdown(&segments(), &mut bytes).unwrap();
        let mut expected = Vec::new();
        expected.extend_from_slice(b"FLCS");
        expected.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 2]);
        expected.extend_from_slice(&[0; 4]);
        for s in segments() {
            for field in [s.id, s.base_offset, s.next_offset, s.len] {
                expected.extend_from_slice(&field.to_be_bytes());
            }
        }
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&expected[..12]);
        hasher.update(&expected[16..]);
        expected[12..16].copy_from_slice(&hasher.finalize().to_be_bytes());
        assert_eq!(bytes, expected);
    }

    #[test]
    fn decode_rejects_every_truncation_and_every_bit_flip_naming_the_field() {
        let mut bytes = Vec::new();
        encode_clean_shutdown(&segments(), &mut bytes).unwrap();
        for len in 0..bytes.len() {
            let expected = if len < CLEAN_SHUTDOWN_HEADER_LEN {
                error(D::Short {
                    len,
                    header_len: CLEAN_SHUTDOWN_HEADER_LEN,
                })
            } else {
                error(D::CountMismatch {
                    count: 2,
                    expected: 64,
                    found: len - CLEAN_SHUTDOWN_HEADER_LEN,
                })
            };
            assert_eq!(
                decode_clean_shutdown(&bytes[..len]),
                Err(expected),
                "cut at {len}"
            );
        }
        let stored_crc = u32::from_be_bytes(bytes[12..16].try_into().unwrap());
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let got = decode_clean_shutdown(&flipped).unwrap_err();
            let field = |at: usize, n: usize| {
                flipped[at..at + n]
                    .iter()
                    .fold(0u32, |acc, &b| (acc << 8) | u32::from(b))
            };
            let expected = match bit / 8 {
                0..4 => error(D::Magic {
                    found: field(0, 4),
                    expected: CLEAN_SHUTDOWN_MAGIC,
                }),
                4..6 => error(D::Version {
                    found: field(4, 2) as u16,
                    expected: CLEAN_SHUTDOWN_VERSION,
                }),
                6..8 => error(D::Flags {
                    found: field(6, 2) as u16,
                    known: 0,
                }),
                8..12 => {
                    let count = field(8, 4);
                    if count == 0 || count as usize > MAX_CLEAN_SHUTDOWN_ENTRIES {
                        error(D::Count {
                            count,
                            max: MAX_CLEAN_SHUTDOWN_ENTRIES as u32,
                            min: 1,
                        })
                    } else {
                        error(D::CountMismatch {
                            count,
                            expected: count as usize * CLEAN_SHUTDOWN_ENTRY_LEN,
                            found: 64,
                        })
                    }
                }
                12..16 => error(D::Checksum {
                    expected: field(12, 4),
                    found: stored_crc,
                }),
                _ => error(D::Checksum {
                    expected: stored_crc,
                    found: checksum(&flipped),
                }),
            };
            assert_eq!(got, expected, "bit {bit}");
        }
    }

    #[test]
    fn decode_names_what_is_wrong() {
        let mut bytes = Vec::new();
        encode_clean_shutdown(&segments(), &mut bytes).unwrap();
        let mut flags = bytes.clone();
        flags[7] = 1;
        assert_eq!(
            decode_clean_shutdown(&flags),
            Err(error(D::Flags { found: 1, known: 0 }))
        );
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            decode_clean_shutdown(&longer),
            Err(error(D::CountMismatch {
                count: 2,
                expected: 64,
                found: 65
            }))
        );
        assert_eq!(
            decode_clean_shutdown(&bytes[..16]),
            Err(error(D::CountMismatch {
                count: 2,
                expected: 64,
                found: 0
            }))
        );
    }

    #[test]
    fn encode_refuses_lists_no_reader_accepts() {
        let mut out = Vec::new();
        assert_eq!(
            encode_clean_shutdown(&[], &mut out),
            Err(error(D::Count {
                count: 0,
                max: MAX_CLEAN_SHUTDOWN_ENTRIES as u32,
                min: 1
            }))
        );
        let mut gap = segments();
        gap[1].base_offset = 111;
        gap[1].next_offset = 111;
        assert_eq!(
            encode_clean_shutdown(&gap, &mut out),
            Err(error(D::SegmentEntry {
                entry: 1,
                id: 4,
                problem: CleanEntryProblem::Gap {
                    base_offset: 111,
                    expected: 110
                }
            }))
        );
        let mut same_id = segments();
        same_id[1].id = 3;
        assert_eq!(
            encode_clean_shutdown(&same_id, &mut out),
            Err(error(D::SegmentEntry {
                entry: 1,
                id: 3,
                problem: CleanEntryProblem::IdNotAscending { previous: 3 }
            }))
        );
        let mut short = segments();
        short[0].len = 31;
        assert_eq!(
            encode_clean_shutdown(&short, &mut out),
            Err(error(D::SegmentEntry {
                entry: 0,
                id: 3,
                problem: CleanEntryProblem::TooShort { len: 31 }
            }))
        );
        let mut backwards = segments();
        backwards[1].next_offset = 109;
        assert_eq!(
            encode_clean_shutdown(&backwards, &mut out),
            Err(error(D::SegmentEntry {
                entry: 1,
                id: 4,
                problem: CleanEntryProblem::OffsetsBackwards {
                    base_offset: 110,
                    next_offset: 109
                }
            }))
        );
        assert!(out.is_empty(), "nothing written on refusal");
    }
}
