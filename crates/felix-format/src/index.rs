//! Sparse index files: a 24-byte header and 16-byte `(offset, position)`
//! entries.
//!
//! Indexes are accelerators and are never trusted: every entry is only a
//! starting point for a scan that re-validates real records. They carry no
//! checksums; anything wrong with one is a reason to rebuild it from its
//! segment, never a reason to refuse to open a shard.

use crate::bytes_be::{put, u16_at, u64_at};
use crate::{CorruptionKind, FORMAT_VERSION, INDEX_MAGIC, SEGMENT_HEADER_LEN};

/// Length of an index file header.
pub const INDEX_HEADER_LEN: usize = 24;
/// Length of one index entry.
pub const INDEX_ENTRY_LEN: usize = 16;

/// The header of an index file.
///
/// ```
/// use felix_format::IndexHeader;
/// let bytes = IndexHeader { base_offset: 511 }.encode();
/// assert_eq!(&bytes[..4], b"FLSI");
/// assert_eq!(IndexHeader::decode(&bytes), Ok(IndexHeader { base_offset: 511 }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IndexHeader {
    /// Must equal the base offset of the segment the index belongs to.
    pub base_offset: u64,
}

impl IndexHeader {
    /// The header's 24 bytes.
    pub fn encode(&self) -> [u8; INDEX_HEADER_LEN] {
        let mut out = [0u8; INDEX_HEADER_LEN];
        put(&mut out, 0, &INDEX_MAGIC.to_be_bytes());
        put(&mut out, 4, &FORMAT_VERSION.to_be_bytes());
        put(&mut out, 8, &self.base_offset.to_be_bytes());
        out
    }

    /// Decodes an index header: length, magic, version, flags. The reserved
    /// field is ignored because nothing in an index is trusted anyway.
    pub fn decode(bytes: &[u8]) -> Result<Self, CorruptionKind> {
        let Some(raw) = bytes.first_chunk::<INDEX_HEADER_LEN>() else {
            return Err(CorruptionKind::Truncated {
                needed: INDEX_HEADER_LEN as u64,
                available: bytes.len() as u64,
            });
        };
        let magic = crate::bytes_be::u32_at(raw, 0);
        if magic != INDEX_MAGIC {
            return Err(CorruptionKind::IndexMagic { found: magic });
        }
        let version = u16_at(raw, 4);
        if version != FORMAT_VERSION {
            return Err(CorruptionKind::IndexVersion { found: version });
        }
        let flags = u16_at(raw, 6);
        if flags != 0 {
            return Err(CorruptionKind::IndexFlags { found: flags });
        }
        Ok(Self {
            base_offset: u64_at(raw, 8),
        })
    }
}

/// One index entry: the record with `offset` begins at byte `position` of the
/// segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IndexEntry {
    /// Logical offset of the record.
    pub offset: u64,
    /// Byte position of that record in the segment file.
    pub position: u64,
}

/// Encodes one 16-byte index entry.
///
/// ```
/// use felix_format::{encode_index_entry, IndexEntry};
/// let bytes = encode_index_entry(IndexEntry { offset: 1, position: 32 });
/// assert_eq!(bytes, [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 32]);
/// ```
pub fn encode_index_entry(entry: IndexEntry) -> [u8; INDEX_ENTRY_LEN] {
    let mut out = [0u8; INDEX_ENTRY_LEN];
    put(&mut out, 0, &entry.offset.to_be_bytes());
    put(&mut out, 8, &entry.position.to_be_bytes());
    out
}

fn decode_index_entry(raw: &[u8; INDEX_ENTRY_LEN]) -> IndexEntry {
    IndexEntry {
        offset: u64_at(raw, 0),
        position: u64_at(raw, 8),
    }
}

/// A validated index, borrowed from the file's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexView<'a> {
    /// The index header.
    pub header: IndexHeader,
    entries: &'a [u8],
    /// Bytes of a torn final entry that were dropped (0..16).
    pub torn_bytes: usize,
}

impl<'a> IndexView<'a> {
    /// Number of whole entries.
    pub fn len(&self) -> usize {
        self.entries.len() / INDEX_ENTRY_LEN
    }

    /// True when the index holds no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `i`-th entry, if any.
    pub fn get(&self, i: usize) -> Option<IndexEntry> {
        let start = i.checked_mul(INDEX_ENTRY_LEN)?;
        let raw = self
            .entries
            .get(start..)?
            .first_chunk::<INDEX_ENTRY_LEN>()?;
        Some(decode_index_entry(raw))
    }

    /// The entries in file order.
    pub fn iter(&self) -> impl Iterator<Item = IndexEntry> + 'a {
        self.entries
            .chunks_exact(INDEX_ENTRY_LEN)
            .filter_map(|c| c.first_chunk::<INDEX_ENTRY_LEN>().map(decode_index_entry))
    }
}

/// Parses and validates an index file's bytes against its segment.
///
/// Checks the header (magic, version, flags), that its base offset equals
/// `segment_base_offset`, and that entries ascend strictly in both offset and
/// position, start at or after the segment's base offset and first record,
/// and point inside the first `segment_len` bytes of the segment. A torn final
/// entry (fewer than 16 bytes, the signature of a crash mid-append) is
/// dropped and counted in [`IndexView::torn_bytes`].
///
/// ```
/// use felix_format::{encode_index_entry, parse_index, IndexEntry, IndexHeader};
///
/// let mut bytes = IndexHeader { base_offset: 0 }.encode().to_vec();
/// bytes.extend(encode_index_entry(IndexEntry { offset: 0, position: 32 }));
/// bytes.extend([0, 0, 0]); // torn final entry
/// let index = parse_index(&bytes, 0, 4096)?;
/// assert_eq!(index.len(), 1);
/// assert_eq!(index.torn_bytes, 3);
/// # Ok::<(), felix_format::CorruptionKind>(())
/// ```
pub fn parse_index(
    bytes: &[u8],
    segment_base_offset: u64,
    segment_len: u64,
) -> Result<IndexView<'_>, CorruptionKind> {
    let header = IndexHeader::decode(bytes)?;
    if header.base_offset != segment_base_offset {
        return Err(CorruptionKind::IndexBaseOffset {
            expected: segment_base_offset,
            found: header.base_offset,
        });
    }
    let body = bytes.get(INDEX_HEADER_LEN..).unwrap_or_default();
    let torn_bytes = body.len() % INDEX_ENTRY_LEN;
    let entries = body.get(..body.len() - torn_bytes).unwrap_or_default();
    let view = IndexView {
        header,
        entries,
        torn_bytes,
    };

    let mut previous: Option<IndexEntry> = None;
    for (i, entry) in view.iter().enumerate() {
        let after_previous =
            previous.is_none_or(|p| entry.offset > p.offset && entry.position > p.position);
        let inside = entry.offset >= segment_base_offset
            && entry.position >= SEGMENT_HEADER_LEN as u64
            && entry.position < segment_len;
        if !(after_previous && inside) {
            return Err(CorruptionKind::IndexEntryOutOfOrder {
                entry: i as u64,
                offset: entry.offset,
                position: entry.position,
            });
        }
        previous = Some(entry);
    }
    Ok(view)
}
