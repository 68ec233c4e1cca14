//! Scanning a segment's records from front to back.
//!
//! Two depths: [`ScanDepth::Headers`] verifies each record header's CRC, its
//! length bound and its offset, and steps on with `position + 28 +
//! payload_len` without checksumming payloads — the cost is proportional to
//! the number of records, which is what makes index rebuilds cheap.
//! [`ScanDepth::Full`] also verifies every record checksum. Both stop at the
//! first damage and say what and where it is.

use felix_format::{
    CorruptionKind, IndexEntry, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN, check_record, decode_record,
    decode_record_header,
};
use felix_io::IoError;
use felix_segment::{IndexBuilder, SegmentFile};

use crate::chunked::ChunkedReader;

/// How much of each record a scan verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScanDepth {
    /// Header CRC, length bound and offset sequence; payloads are skipped.
    Headers,
    /// Everything `Headers` checks plus every record checksum.
    Full,
}

/// The first damage a scan met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Damage {
    /// What is wrong.
    pub kind: CorruptionKind,
    /// Byte position where the damaged record begins.
    pub position: u64,
}

/// What a scan of one segment saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentScan {
    /// Intact records found before any damage (counting from where the scan
    /// started).
    pub records: u64,
    /// One past the last intact record's offset.
    pub next_offset: u64,
    /// One past the last intact record's last byte: where valid data ends.
    pub valid_len: u64,
    /// The file's length when scanned.
    pub file_len: u64,
    /// Index entries rebuilt on the way (for a scan from the first record).
    pub index: Vec<IndexEntry>,
    /// The first damage, if the scan did not reach the end cleanly.
    pub damage: Option<Damage>,
}

/// Where a scan starts: normally the first record, or an index entry when
/// only a segment's tail needs checking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanStart {
    /// Offset of the record at `position`.
    pub offset: u64,
    /// Byte position of a record boundary.
    pub position: u64,
}

impl ScanStart {
    /// The first record of `segment`.
    pub fn first_record(segment: &SegmentFile) -> Self {
        Self {
            offset: segment.base_offset(),
            position: SEGMENT_HEADER_LEN as u64,
        }
    }
}

/// Scans `segment` (of `file_len` bytes) from `start` to its end.
///
/// Index entries are emitted every `index_spacing_bytes` as a writer would,
/// so a scan from the first record rebuilds the segment's index exactly.
pub fn scan_segment(
    segment: &SegmentFile,
    file_len: u64,
    start: ScanStart,
    depth: ScanDepth,
    index_spacing_bytes: u64,
) -> Result<SegmentScan, IoError> {
    let mut reader = ChunkedReader::new(segment.file(), segment.path(), file_len);
    let mut index = IndexBuilder::new(index_spacing_bytes);
    let mut position = start.position;
    let mut offset = start.offset;
    let mut records = 0u64;
    let damage = loop {
        if position == file_len {
            break None;
        }
        let header_bytes = match reader.get(position, RECORD_HEADER_LEN as u64)? {
            Some(bytes) => bytes,
            None => {
                break Some(CorruptionKind::Truncated {
                    needed: RECORD_HEADER_LEN as u64,
                    available: file_len - position,
                });
            }
        };
        let header = match decode_record_header(header_bytes)
            .and_then(|h| h.check_offset(offset).map(|()| h))
        {
            Ok(header) => header,
            Err(kind) => break Some(kind),
        };
        let total = header.encoded_len();
        if depth == ScanDepth::Full {
            match reader.get(position, total)? {
                Some(bytes) => {
                    // The header verified above: only the rest is checked.
                    if let Err(kind) = check_record(header, bytes, Some(offset)) {
                        break Some(kind);
                    }
                }
                None => {
                    break Some(CorruptionKind::Truncated {
                        needed: total,
                        available: file_len - position,
                    });
                }
            }
        } else if position + total > file_len {
            break Some(CorruptionKind::Truncated {
                needed: total,
                available: file_len - position,
            });
        }
        index.observe(offset, position);
        position += total;
        offset += 1;
        records += 1;
    };
    Ok(SegmentScan {
        records,
        next_offset: offset,
        valid_len: position,
        file_len,
        index: index.into_entries(),
        damage: damage.map(|kind| Damage { kind, position }),
    })
}

/// Where the search for an intact record after damage begins.
///
/// When the damaged record's header verified (`Truncated`, `RecordChecksum`,
/// `OffsetOutOfOrder`), its length is trustworthy, so only bytes after its
/// end are searched: its own payload may legitimately contain bytes that
/// look like a record. When the header did not verify, its length means
/// nothing and the search starts at the next byte.
pub fn search_start(damage: &Damage, file: &SegmentFile, file_len: u64) -> Result<u64, IoError> {
    let trusted_len = match damage.kind {
        CorruptionKind::Truncated { needed, .. } => Some(needed),
        CorruptionKind::RecordChecksum { .. } | CorruptionKind::OffsetOutOfOrder { .. } => {
            let mut reader = ChunkedReader::new(file.file(), file.path(), file_len);
            reader
                .get(damage.position, RECORD_HEADER_LEN as u64)?
                .and_then(|bytes| decode_record_header(bytes).ok())
                .map(|h| h.encoded_len())
        }
        _ => None,
    };
    Ok(damage.position.saturating_add(trusted_len.unwrap_or(1)))
}

/// Finds the first position at or after `from` where a whole, intact record
/// (header CRC and record CRC valid) begins, searching byte by byte.
///
/// Finding one proves that damage before it is not confined to the tail:
/// something complete was written after it, so it cannot be an unfinished
/// write.
pub fn find_intact_record(
    segment: &SegmentFile,
    file_len: u64,
    from: u64,
) -> Result<Option<u64>, IoError> {
    let mut reader = ChunkedReader::new(segment.file(), segment.path(), file_len);
    let mut position = from;
    while position + RECORD_HEADER_LEN as u64 <= file_len {
        let window = reader.window(position, RECORD_HEADER_LEN as u64)?;
        let mut candidate = None;
        let mut examined = 0u64;
        for (i, slice) in window.windows(RECORD_HEADER_LEN).enumerate() {
            examined = i as u64 + 1;
            // An all-zero header never verifies (its CRC field would have to
            // equal the CRC of twenty zero bytes, which is not zero), and
            // zero runs are the common tail shape: skip them without hashing.
            if slice.iter().all(|&b| b == 0) {
                continue;
            }
            if let Ok(header) = decode_record_header(slice) {
                candidate = Some((position + i as u64, header.encoded_len()));
                break;
            }
        }
        match candidate {
            Some((at, len)) => {
                if let Some(bytes) = reader.get(at, len)?
                    && decode_record(bytes, None).is_ok()
                {
                    return Ok(Some(at));
                }
                position = at + 1;
            }
            None => position += examined.max(1),
        }
    }
    Ok(None)
}

/// True when every byte from `from` to the end of the file is zero: the
/// shape of preallocated or extended space that was never written.
pub fn tail_is_zero(segment: &SegmentFile, file_len: u64, from: u64) -> Result<bool, IoError> {
    range_is_zero(segment, file_len, from, file_len)
}

/// True when every byte in `[from, to)` is zero (and the range is not
/// empty): space whose size reached the disk before its data did.
pub fn range_is_zero(
    segment: &SegmentFile,
    file_len: u64,
    from: u64,
    to: u64,
) -> Result<bool, IoError> {
    let to = to.min(file_len);
    if from >= to {
        return Ok(false);
    }
    let mut reader = ChunkedReader::new(segment.file(), segment.path(), file_len);
    let mut position = from;
    while position < to {
        let window = reader.window(position, 1)?;
        let take = usize::try_from(to - position)
            .unwrap_or(usize::MAX)
            .min(window.len());
        let Some(bytes) = window.get(..take).filter(|b| !b.is_empty()) else {
            break;
        };
        if bytes.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        position += bytes.len() as u64;
    }
    Ok(true)
}
