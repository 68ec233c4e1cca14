//! Bytes of the `epochs` file: where each leadership generation began.
//!
//! Layout (big-endian): magic `FLEP` (4), version (2), count (2), `body_crc`
//! over the entries (4), then `count` × `{ generation u64, start_offset u64 }`.
//!
//! This module only encodes and decodes, reporting exactly why bytes do not
//! decode. The policy that a bad file reads as an empty history lives in
//! `felix-epochs`, because it is a decision about availability, not format.

use crate::EPOCHS_MAGIC;
use crate::side_file::{
    SideFileBody, SideFileChecksum, SideFileDefect, SideFileError, SideFileKind, SideFileLayout,
    SideFileVersion,
};

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

/// The epochs file's frame: a 12-byte header without flags, `count` (a
/// `u16`, at most [`MAX_EPOCH_ENTRIES`]) at byte 6, the CRC at 8 over the
/// entries alone.
pub const EPOCHS_LAYOUT: SideFileLayout = SideFileLayout {
    kind: SideFileKind::Epochs,
    name: "Epochs",
    file: "epochs file",
    field: "epochs",
    entries: "entries",
    magic: EPOCHS_MAGIC,
    versions: &[SideFileVersion {
        version: EPOCHS_VERSION,
        header_len: EPOCHS_HEADER_LEN,
        known_flags: 0,
    }],
    has_flags: false,
    body: SideFileBody::Entries {
        count_at: 6,
        count_width: 2,
        entry_len: EPOCH_ENTRY_LEN,
        min: 0,
        max: MAX_EPOCH_ENTRIES as u32,
    },
    checksum: SideFileChecksum::Body,
};

/// Appends the encoded file for `entries` to `out`.
///
/// Fails with [`SideFileDefect::Count`] rather than writing a file no
/// reader accepts.
///
/// ```
/// use felix_format::epochs::{decode_epochs, encode_epochs, EpochEntry};
/// let entries = [EpochEntry { generation: 1, start_offset: 0 }];
/// let mut bytes = Vec::new();
/// encode_epochs(&entries, &mut bytes)?;
/// assert_eq!(bytes.len(), 28);
/// let decoded: Vec<_> = decode_epochs(&bytes)?.collect();
/// assert_eq!(decoded, entries);
/// # Ok::<(), felix_format::side_file::SideFileError>(())
/// ```
pub fn encode_epochs(
    entries: &[EpochEntry],
    out: &mut alloc::vec::Vec<u8>,
) -> Result<(), SideFileError> {
    if entries.len() > MAX_EPOCH_ENTRIES {
        return Err(SideFileError::new(
            SideFileKind::Epochs,
            SideFileDefect::Count {
                count: u32::try_from(entries.len()).unwrap_or(u32::MAX),
                min: 0,
                max: MAX_EPOCH_ENTRIES as u32,
            },
        ));
    }
    let start = EPOCHS_LAYOUT.begin(EPOCHS_VERSION, 0, out);
    for entry in entries {
        out.extend_from_slice(&entry.generation.to_be_bytes());
        out.extend_from_slice(&entry.start_offset.to_be_bytes());
    }
    EPOCHS_LAYOUT.seal(out.get_mut(start..).unwrap_or_default());
    Ok(())
}

/// Decodes an epochs file, returning its entries without allocating.
///
/// Checks length, magic, version, the count's bound, that the body holds
/// exactly `count` entries, and the body CRC. It does not check that entries
/// ascend; that is history policy, decided by `felix-epochs`.
pub fn decode_epochs(bytes: &[u8]) -> Result<EpochEntries<'_>, SideFileError> {
    let body = EPOCHS_LAYOUT.decode(bytes)?.body;
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
