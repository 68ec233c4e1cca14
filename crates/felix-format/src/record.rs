//! Records: a 28-byte header followed by the payload.
//!
//! The header carries its own CRC (`header_crc`, over bytes 0..20), verified
//! before any other field is used. That is what makes recovery decidable: a
//! length that passed its CRC is the length the writer intended, so a file
//! ending short of it is provably an unfinished write.

use crate::bytes_be::{put, u32_at, u64_at};
use crate::checksum::{crc32, crc32_continue, record_checksum};
use crate::{CorruptionKind, MAX_PAYLOAD_BYTES, RECORD_HEADER_LEN};

/// The decoded header of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordHeader {
    /// Length of the payload that follows the header.
    pub payload_len: u32,
    /// The record's logical offset.
    pub offset: u64,
    /// Publish time in microseconds.
    pub timestamp_micros: u64,
    /// The stored CRC over bytes 0..20 of the header.
    pub header_crc: u32,
    /// The stored CRC over bytes 0..24 of the header followed by the payload.
    pub checksum: u32,
}

impl RecordHeader {
    /// Total bytes of the record, header included: `28 + payload_len`.
    ///
    /// This is how a reader steps to the next record without touching the
    /// payload.
    #[inline]
    pub fn encoded_len(&self) -> u64 {
        record_encoded_len(self.payload_len)
    }

    /// Checks the record's offset against the one its position implies.
    #[inline]
    pub fn check_offset(&self, expected: u64) -> Result<(), CorruptionKind> {
        if self.offset == expected {
            Ok(())
        } else {
            Err(CorruptionKind::OffsetOutOfOrder {
                expected,
                found: self.offset,
            })
        }
    }
}

/// Bytes a record with a `payload_len`-byte payload occupies on disk.
///
/// ```
/// assert_eq!(felix_format::record_encoded_len(2), 30);
/// ```
pub const fn record_encoded_len(payload_len: u32) -> u64 {
    RECORD_HEADER_LEN as u64 + payload_len as u64
}

/// A record decoded in place: its header and a borrow of its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// The verified header.
    pub header: RecordHeader,
    /// The verified payload, borrowed from the input.
    pub payload: &'a [u8],
}

impl RecordView<'_> {
    /// Total bytes of the record, header included.
    pub fn encoded_len(&self) -> u64 {
        self.header.encoded_len()
    }
}

/// Encodes the 28-byte header of a record carrying `payload`.
///
/// The payload is not copied: the caller writes the returned header and then
/// the payload, which is how a writer stages a batch without allocating per
/// record. Fails with `RecordTooLarge` for a payload over
/// [`MAX_PAYLOAD_BYTES`], so the writer can never produce a record a reader
/// would refuse.
///
/// ```
/// let header = felix_format::encode_record_header(7, 9, b"hi")?;
/// assert_eq!(&header[20..28], &[0xC6, 0x54, 0xDE, 0x27, 0x24, 0x02, 0x15, 0x2C]);
/// # Ok::<(), felix_format::CorruptionKind>(())
/// ```
pub fn encode_record_header(
    offset: u64,
    timestamp_micros: u64,
    payload: &[u8],
) -> Result<[u8; RECORD_HEADER_LEN], CorruptionKind> {
    let payload_len = match u32::try_from(payload.len()) {
        Ok(len) if len <= MAX_PAYLOAD_BYTES => len,
        _ => {
            return Err(CorruptionKind::RecordTooLarge {
                payload_len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
                max: MAX_PAYLOAD_BYTES,
            });
        }
    };
    let mut out = [0u8; RECORD_HEADER_LEN];
    put(&mut out, 0, &payload_len.to_be_bytes());
    put(&mut out, 4, &offset.to_be_bytes());
    put(&mut out, 12, &timestamp_micros.to_be_bytes());
    let header_crc = crc32(out.get(..20).unwrap_or_default());
    put(&mut out, 20, &header_crc.to_be_bytes());
    // The record checksum covers bytes 0..24 then the payload; bytes 0..20
    // are already hashed in `header_crc`, and bytes 20..24 are that CRC.
    let checksum = record_checksum(header_crc, payload);
    put(&mut out, 24, &checksum.to_be_bytes());
    Ok(out)
}

/// Reads the fields of a record header that a verified walk already
/// checked, checking nothing again: the header CRC, the length bound and the
/// offset were verified when the bytes were read (a run of records a
/// verified read returned, say), so a second decode would only repeat the
/// header's CRC. For bytes of unknown origin use [`decode_record_header`].
///
/// ```
/// use felix_format::{decode_record_header, encode_record_header, record_header_fields};
///
/// let header = encode_record_header(7, 9, b"hi")?;
/// assert_eq!(record_header_fields(&header), decode_record_header(&header)?);
/// # Ok::<(), felix_format::CorruptionKind>(())
/// ```
#[inline]
pub fn record_header_fields(raw: &[u8; RECORD_HEADER_LEN]) -> RecordHeader {
    RecordHeader {
        payload_len: u32_at(raw, 0),
        offset: u64_at(raw, 4),
        timestamp_micros: u64_at(raw, 12),
        header_crc: u32_at(raw, 20),
        checksum: u32_at(raw, 24),
    }
}

/// Decodes and verifies a record header without looking at the payload.
///
/// Checks, in order: 28 bytes present (`Truncated`), the header CRC
/// (`RecordHeaderChecksum`, before any other field is used), and
/// `payload_len <= MAX_PAYLOAD_BYTES` (`RecordTooLarge`). This is the step a
/// headers-only scan takes per record.
#[inline]
pub fn decode_record_header(bytes: &[u8]) -> Result<RecordHeader, CorruptionKind> {
    let Some(raw) = bytes.first_chunk::<RECORD_HEADER_LEN>() else {
        return Err(CorruptionKind::Truncated {
            needed: RECORD_HEADER_LEN as u64,
            available: bytes.len() as u64,
        });
    };
    let expected = u32_at(raw, 20);
    let found = crc32(raw.get(..20).unwrap_or_default());
    if expected != found {
        return Err(CorruptionKind::RecordHeaderChecksum { expected, found });
    }
    let payload_len = u32_at(raw, 0);
    if payload_len > MAX_PAYLOAD_BYTES {
        return Err(CorruptionKind::RecordTooLarge {
            payload_len,
            max: MAX_PAYLOAD_BYTES,
        });
    }
    Ok(RecordHeader {
        payload_len,
        offset: u64_at(raw, 4),
        timestamp_micros: u64_at(raw, 12),
        header_crc: expected,
        checksum: u32_at(raw, 24),
    })
}

/// Decodes and verifies the record at the start of `bytes`.
///
/// After [`decode_record_header`]'s checks: the payload present
/// (`Truncated { needed, available }`, counted from the record's start), the
/// record CRC (`RecordChecksum`), and, when `expected_offset` is given, the
/// offset (`OffsetOutOfOrder`). Bytes after the record are ignored.
pub fn decode_record(
    bytes: &[u8],
    expected_offset: Option<u64>,
) -> Result<RecordView<'_>, CorruptionKind> {
    let header = decode_record_header(bytes)?;
    check_record(header, bytes, expected_offset)
}

/// The rest of [`decode_record`], for a `header` that
/// [`decode_record_header`] already decoded and verified from the start of
/// the same `bytes`: the payload present, the record CRC, and the offset
/// when `expected_offset` is given.
///
/// A scan that steps through headers first and checks a record only when it
/// needs to uses this to avoid verifying each header twice. Given a header
/// of other bytes, it reports damage; it never panics.
///
/// ```
/// use felix_format::{check_record, decode_record_header, encode_record_header};
///
/// let mut bytes = encode_record_header(7, 9, b"hi")?.to_vec();
/// bytes.extend_from_slice(b"hi");
/// let header = decode_record_header(&bytes)?;
/// assert_eq!(check_record(header, &bytes, Some(7))?.payload, b"hi");
/// # Ok::<(), felix_format::CorruptionKind>(())
/// ```
#[inline]
pub fn check_record(
    header: RecordHeader,
    bytes: &[u8],
    expected_offset: Option<u64>,
) -> Result<RecordView<'_>, CorruptionKind> {
    let total = header.encoded_len();
    let Some(record) = usize::try_from(total).ok().and_then(|end| bytes.get(..end)) else {
        return Err(CorruptionKind::Truncated {
            needed: total,
            available: bytes.len() as u64,
        });
    };
    let (prefix, rest) = record.split_at_checked(24).unwrap_or_default();
    let payload = rest.get(4..).unwrap_or_default();
    // The header CRC verified bytes 0..20 (it equals their CRC), so the
    // record CRC continues from it over bytes 20..24 and the payload; when
    // those bytes are the header CRC (always, for a header decoded from
    // them), without hashing them.
    let stored = prefix.get(20..).unwrap_or_default();
    let found = if stored == header.header_crc.to_be_bytes() {
        record_checksum(header.header_crc, payload)
    } else {
        crc32_continue(header.header_crc, &[stored, payload])
    };
    if found != header.checksum {
        return Err(CorruptionKind::RecordChecksum {
            expected: header.checksum,
            found,
        });
    }
    if let Some(expected) = expected_offset {
        header.check_offset(expected)?;
    }
    Ok(RecordView { header, payload })
}
