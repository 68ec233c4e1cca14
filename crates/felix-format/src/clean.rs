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

use crate::checksum::{crc32, crc32_continue};
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

/// Why bytes are not a valid clean-shutdown file.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CleanShutdownDecodeError {
    /// Fewer bytes than the 16-byte header.
    #[error("clean-shutdown file is {len} bytes, shorter than its 16-byte header")]
    Short {
        /// Bytes present.
        len: usize,
    },
    /// The file does not start with `FLCS`.
    #[error("clean-shutdown magic is {found:#010x}, expected 0x464c4353 (FLCS)")]
    Magic {
        /// The four bytes found, big-endian.
        found: u32,
    },
    /// A version this build does not read.
    #[error("clean-shutdown file version {found} is not supported (this build reads version 1)")]
    Version {
        /// The version found.
        found: u16,
    },
    /// Flags this build does not know.
    #[error("clean-shutdown flags are {found:#06x}, expected 0")]
    Flags {
        /// The flags found.
        found: u16,
    },
    /// No entries, or more than [`MAX_CLEAN_SHUTDOWN_ENTRIES`].
    #[error("clean-shutdown file claims {count} segments; between 1 and {max} are valid")]
    Count {
        /// The count in the header.
        count: u32,
        /// [`MAX_CLEAN_SHUTDOWN_ENTRIES`].
        max: usize,
    },
    /// The body's length is not `count` whole entries.
    #[error(
        "clean-shutdown file claims {count} segments ({expected} bytes) but holds {found} bytes of entries"
    )]
    CountMismatch {
        /// The count in the header.
        count: u32,
        /// Body bytes `count` implies.
        expected: usize,
        /// Body bytes present.
        found: usize,
    },
    /// The CRC does not match.
    #[error("clean-shutdown checksum mismatch: stored {expected:#010x}, computed {found:#010x}")]
    Checksum {
        /// The CRC stored in the header.
        expected: u32,
        /// The CRC computed.
        found: u32,
    },
    /// An entry contradicts itself or the one before it: ids not ascending,
    /// offsets going backwards or not continuing, or a length shorter than a
    /// segment header.
    #[error("clean-shutdown entry {entry} (segment {id}) is inconsistent: {problem}")]
    Entry {
        /// Position of the entry in the file.
        entry: usize,
        /// The segment id it names.
        id: u64,
        /// What is wrong.
        problem: CleanEntryProblem,
    },
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
/// # Ok::<(), felix_format::clean::CleanShutdownDecodeError>(())
/// ```
pub fn encode_clean_shutdown(
    segments: &[SegmentExtent],
    out: &mut Vec<u8>,
) -> Result<(), CleanShutdownDecodeError> {
    let count = count_of(segments.len())?;
    check_entries(segments.iter().copied())?;
    let start = out.len();
    out.extend_from_slice(&CLEAN_SHUTDOWN_MAGIC.to_be_bytes());
    out.extend_from_slice(&CLEAN_SHUTDOWN_VERSION.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    for s in segments {
        for field in [s.id, s.base_offset, s.next_offset, s.len] {
            out.extend_from_slice(&field.to_be_bytes());
        }
    }
    let crc = checksum(out.get(start..).unwrap_or_default());
    if let Some(slot) = out.get_mut(start + 12..start + 16) {
        slot.copy_from_slice(&crc.to_be_bytes());
    }
    Ok(())
}

/// Decodes a clean-shutdown file into its segments, in id order.
pub fn decode_clean_shutdown(bytes: &[u8]) -> Result<Vec<SegmentExtent>, CleanShutdownDecodeError> {
    let Some((header, body)) = bytes.split_first_chunk::<CLEAN_SHUTDOWN_HEADER_LEN>() else {
        return Err(CleanShutdownDecodeError::Short { len: bytes.len() });
    };
    let [
        m0,
        m1,
        m2,
        m3,
        v0,
        v1,
        f0,
        f1,
        c0,
        c1,
        c2,
        c3,
        k0,
        k1,
        k2,
        k3,
    ] = *header;
    let magic = u32::from_be_bytes([m0, m1, m2, m3]);
    if magic != CLEAN_SHUTDOWN_MAGIC {
        return Err(CleanShutdownDecodeError::Magic { found: magic });
    }
    let version = u16::from_be_bytes([v0, v1]);
    if version != CLEAN_SHUTDOWN_VERSION {
        return Err(CleanShutdownDecodeError::Version { found: version });
    }
    let flags = u16::from_be_bytes([f0, f1]);
    if flags != 0 {
        return Err(CleanShutdownDecodeError::Flags { found: flags });
    }
    let count = u32::from_be_bytes([c0, c1, c2, c3]);
    let entries = usize::try_from(count).unwrap_or(usize::MAX);
    if entries == 0 || entries > MAX_CLEAN_SHUTDOWN_ENTRIES {
        return Err(CleanShutdownDecodeError::Count {
            count,
            max: MAX_CLEAN_SHUTDOWN_ENTRIES,
        });
    }
    let expected_len = entries * CLEAN_SHUTDOWN_ENTRY_LEN;
    if body.len() != expected_len {
        return Err(CleanShutdownDecodeError::CountMismatch {
            count,
            expected: expected_len,
            found: body.len(),
        });
    }
    let expected = u32::from_be_bytes([k0, k1, k2, k3]);
    let found = checksum(bytes);
    if expected != found {
        return Err(CleanShutdownDecodeError::Checksum { expected, found });
    }
    let segments: Vec<SegmentExtent> = body
        .chunks_exact(CLEAN_SHUTDOWN_ENTRY_LEN)
        .map(|raw| {
            let field = |at: usize| {
                raw.get(at..at + 8)
                    .and_then(|s| s.try_into().ok())
                    .map_or(0, u64::from_be_bytes)
            };
            SegmentExtent {
                id: field(0),
                base_offset: field(8),
                next_offset: field(16),
                len: field(24),
            }
        })
        .collect();
    check_entries(segments.iter().copied())?;
    Ok(segments)
}

/// The CRC of a whole file: the header's first 12 bytes, then the entries
/// (the stored CRC itself is skipped).
fn checksum(file: &[u8]) -> u32 {
    crc32_continue(
        crc32(file.get(..12).unwrap_or_default()),
        &[file.get(CLEAN_SHUTDOWN_HEADER_LEN..).unwrap_or_default()],
    )
}

fn count_of(len: usize) -> Result<u32, CleanShutdownDecodeError> {
    match u32::try_from(len) {
        Ok(count) if (1..=MAX_CLEAN_SHUTDOWN_ENTRIES).contains(&len) => Ok(count),
        _ => Err(CleanShutdownDecodeError::Count {
            count: u32::try_from(len).unwrap_or(u32::MAX),
            max: MAX_CLEAN_SHUTDOWN_ENTRIES,
        }),
    }
}

fn check_entries(
    segments: impl Iterator<Item = SegmentExtent>,
) -> Result<(), CleanShutdownDecodeError> {
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
            return Err(CleanShutdownDecodeError::Entry {
                entry,
                id: s.id,
                problem,
            });
        }
        previous = Some(s);
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

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
                CleanShutdownDecodeError::Short { len }
            } else {
                CleanShutdownDecodeError::CountMismatch {
                    count: 2,
                    expected: 64,
                    found: len - CLEAN_SHUTDOWN_HEADER_LEN,
                }
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
                0..4 => CleanShutdownDecodeError::Magic { found: field(0, 4) },
                4..6 => CleanShutdownDecodeError::Version {
                    found: field(4, 2) as u16,
                },
                6..8 => CleanShutdownDecodeError::Flags {
                    found: field(6, 2) as u16,
                },
                8..12 => {
                    let count = field(8, 4);
                    if count == 0 || count as usize > MAX_CLEAN_SHUTDOWN_ENTRIES {
                        CleanShutdownDecodeError::Count {
                            count,
                            max: MAX_CLEAN_SHUTDOWN_ENTRIES,
                        }
                    } else {
                        CleanShutdownDecodeError::CountMismatch {
                            count,
                            expected: count as usize * CLEAN_SHUTDOWN_ENTRY_LEN,
                            found: 64,
                        }
                    }
                }
                12..16 => CleanShutdownDecodeError::Checksum {
                    expected: field(12, 4),
                    found: stored_crc,
                },
                _ => CleanShutdownDecodeError::Checksum {
                    expected: stored_crc,
                    found: checksum(&flipped),
                },
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
            Err(CleanShutdownDecodeError::Flags { found: 1 })
        );
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            decode_clean_shutdown(&longer),
            Err(CleanShutdownDecodeError::CountMismatch {
                count: 2,
                expected: 64,
                found: 65
            })
        );
        assert_eq!(
            decode_clean_shutdown(&bytes[..16]),
            Err(CleanShutdownDecodeError::CountMismatch {
                count: 2,
                expected: 64,
                found: 0
            })
        );
    }

    #[test]
    fn encode_refuses_lists_no_reader_accepts() {
        let mut out = Vec::new();
        assert_eq!(
            encode_clean_shutdown(&[], &mut out),
            Err(CleanShutdownDecodeError::Count {
                count: 0,
                max: MAX_CLEAN_SHUTDOWN_ENTRIES
            })
        );
        let mut gap = segments();
        gap[1].base_offset = 111;
        gap[1].next_offset = 111;
        assert_eq!(
            encode_clean_shutdown(&gap, &mut out),
            Err(CleanShutdownDecodeError::Entry {
                entry: 1,
                id: 4,
                problem: CleanEntryProblem::Gap {
                    base_offset: 111,
                    expected: 110
                }
            })
        );
        let mut same_id = segments();
        same_id[1].id = 3;
        assert_eq!(
            encode_clean_shutdown(&same_id, &mut out),
            Err(CleanShutdownDecodeError::Entry {
                entry: 1,
                id: 3,
                problem: CleanEntryProblem::IdNotAscending { previous: 3 }
            })
        );
        let mut short = segments();
        short[0].len = 31;
        assert_eq!(
            encode_clean_shutdown(&short, &mut out),
            Err(CleanShutdownDecodeError::Entry {
                entry: 0,
                id: 3,
                problem: CleanEntryProblem::TooShort { len: 31 }
            })
        );
        let mut backwards = segments();
        backwards[1].next_offset = 109;
        assert_eq!(
            encode_clean_shutdown(&backwards, &mut out),
            Err(CleanShutdownDecodeError::Entry {
                entry: 1,
                id: 4,
                problem: CleanEntryProblem::OffsetsBackwards {
                    base_offset: 110,
                    next_offset: 109
                }
            })
        );
        assert!(out.is_empty(), "nothing written on refusal");
    }
}
