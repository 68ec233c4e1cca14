//! Bytes of the `epochs` file: where each leadership generation began.
//!
//! Layout (big-endian): magic `FLEP` (4), version (2), count (2), `body_crc`
//! over the entries (4), then `count` × `{ generation u64, start_offset u64 }`.
//!
//! This module only encodes and decodes, reporting exactly why bytes do not
//! decode. The policy that a bad file reads as an empty history lives in
//! `felix-epochs`, because it is a decision about availability, not format.

use crate::EPOCHS_MAGIC;
use crate::checksum::crc32;

/// Version of the epochs file layout; independent of the segment
/// [`crate::FORMAT_VERSION`].
pub const EPOCHS_VERSION: u16 = 1;
/// Length of the epochs file header.
pub const EPOCHS_HEADER_LEN: usize = 12;
/// Length of one epochs entry.
pub const EPOCH_ENTRY_LEN: usize = 16;
/// The most entries an epochs file may hold.
///
/// One entry is written per leadership change, and entries older than the
/// oldest retained record are pruned, so a real history stays far below this.
/// The cap bounds what every open reads and stays below `u16::MAX`, the most
/// the `count` field can express.
pub const MAX_EPOCH_ENTRIES: usize = 4096;
/// The largest valid epochs file.
pub const MAX_EPOCHS_FILE_LEN: usize = EPOCHS_HEADER_LEN + MAX_EPOCH_ENTRIES * EPOCH_ENTRY_LEN;

/// One generation's start: records from `start_offset` up to the next entry's
/// start were written by `generation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EpochEntry {
    /// The leadership generation.
    pub generation: u64,
    /// The first offset written in that generation.
    pub start_offset: u64,
}

/// Why bytes are not a valid epochs file.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EpochsDecodeError {
    /// Fewer bytes than the 12-byte header.
    #[error("epochs file is {len} bytes, shorter than its 12-byte header")]
    Short {
        /// Bytes present.
        len: usize,
    },
    /// The file does not start with `FLEP`.
    #[error("epochs magic is {found:#010x}, expected 0x464c4550 (FLEP)")]
    Magic {
        /// The four bytes found, big-endian.
        found: u32,
    },
    /// A version this build does not read.
    #[error("epochs file version {found} is not supported (this build reads version 1)")]
    Version {
        /// The version found.
        found: u16,
    },
    /// `count` exceeds [`MAX_EPOCH_ENTRIES`].
    #[error("epochs file claims {count} entries, more than the limit of {max}")]
    TooManyEntries {
        /// The count in the header.
        count: u16,
        /// [`MAX_EPOCH_ENTRIES`].
        max: usize,
    },
    /// The body's length is not `count` whole entries.
    #[error(
        "epochs file claims {count} entries ({expected} bytes) but holds {found} bytes of entries"
    )]
    CountMismatch {
        /// The count in the header.
        count: u16,
        /// Body bytes `count` implies.
        expected: usize,
        /// Body bytes present.
        found: usize,
    },
    /// The body CRC does not match the entries.
    #[error("epochs body checksum mismatch: stored {expected:#010x}, computed {found:#010x}")]
    BodyChecksum {
        /// The CRC stored in the header.
        expected: u32,
        /// The CRC computed over the entries.
        found: u32,
    },
}

/// Appends the encoded file for `entries` to `out`.
///
/// Fails with `TooManyEntries` rather than writing a file no reader accepts.
///
/// ```
/// use felix_format::epochs::{decode_epochs, encode_epochs, EpochEntry};
/// let entries = [EpochEntry { generation: 1, start_offset: 0 }];
/// let mut bytes = Vec::new();
/// encode_epochs(&entries, &mut bytes)?;
/// assert_eq!(bytes.len(), 28);
/// let decoded: Vec<_> = decode_epochs(&bytes)?.collect();
/// assert_eq!(decoded, entries);
/// # Ok::<(), felix_format::epochs::EpochsDecodeError>(())
/// ```
pub fn encode_epochs(
    entries: &[EpochEntry],
    out: &mut alloc::vec::Vec<u8>,
) -> Result<(), EpochsDecodeError> {
    let count = match u16::try_from(entries.len()) {
        Ok(count) if entries.len() <= MAX_EPOCH_ENTRIES => count,
        _ => {
            return Err(EpochsDecodeError::TooManyEntries {
                count: u16::try_from(entries.len()).unwrap_or(u16::MAX),
                max: MAX_EPOCH_ENTRIES,
            });
        }
    };
    let start = out.len();
    out.extend_from_slice(&EPOCHS_MAGIC.to_be_bytes());
    out.extend_from_slice(&EPOCHS_VERSION.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    let body_start = out.len();
    for entry in entries {
        out.extend_from_slice(&entry.generation.to_be_bytes());
        out.extend_from_slice(&entry.start_offset.to_be_bytes());
    }
    let crc = crc32(out.get(body_start..).unwrap_or_default());
    if let Some(slot) = out.get_mut(start + 8..start + 12) {
        slot.copy_from_slice(&crc.to_be_bytes());
    }
    Ok(())
}

/// Decodes an epochs file, returning its entries without allocating.
///
/// Checks length, magic, version, the count's bound, that the body holds
/// exactly `count` entries, and the body CRC. It does not check that entries
/// ascend; that is history policy, decided by `felix-epochs`.
pub fn decode_epochs(bytes: &[u8]) -> Result<EpochEntries<'_>, EpochsDecodeError> {
    let Some((header, body)) = bytes.split_first_chunk::<EPOCHS_HEADER_LEN>() else {
        return Err(EpochsDecodeError::Short { len: bytes.len() });
    };
    let [m0, m1, m2, m3, v0, v1, c0, c1, k0, k1, k2, k3] = *header;
    let magic = u32::from_be_bytes([m0, m1, m2, m3]);
    if magic != EPOCHS_MAGIC {
        return Err(EpochsDecodeError::Magic { found: magic });
    }
    let version = u16::from_be_bytes([v0, v1]);
    if version != EPOCHS_VERSION {
        return Err(EpochsDecodeError::Version { found: version });
    }
    let count = u16::from_be_bytes([c0, c1]);
    if usize::from(count) > MAX_EPOCH_ENTRIES {
        return Err(EpochsDecodeError::TooManyEntries {
            count,
            max: MAX_EPOCH_ENTRIES,
        });
    }
    let expected_len = usize::from(count) * EPOCH_ENTRY_LEN;
    if body.len() != expected_len {
        return Err(EpochsDecodeError::CountMismatch {
            count,
            expected: expected_len,
            found: body.len(),
        });
    }
    let expected = u32::from_be_bytes([k0, k1, k2, k3]);
    let found = crc32(body);
    if expected != found {
        return Err(EpochsDecodeError::BodyChecksum { expected, found });
    }
    Ok(EpochEntries { body })
}

/// The entries of a decoded epochs file, in file order.
#[derive(Debug, Clone)]
pub struct EpochEntries<'a> {
    body: &'a [u8],
}

impl EpochEntries<'_> {
    /// Entries not yet yielded.
    pub fn remaining(&self) -> usize {
        self.body.len() / EPOCH_ENTRY_LEN
    }
}

impl Iterator for EpochEntries<'_> {
    type Item = EpochEntry;

    fn next(&mut self) -> Option<EpochEntry> {
        let (raw, rest) = self.body.split_first_chunk::<EPOCH_ENTRY_LEN>()?;
        self.body = rest;
        let (generation, start_offset) = raw.split_at(8);
        Some(EpochEntry {
            generation: u64::from_be_bytes(generation.try_into().ok()?),
            start_offset: u64::from_be_bytes(start_offset.try_into().ok()?),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining(), Some(self.remaining()))
    }
}

impl ExactSizeIterator for EpochEntries<'_> {}
