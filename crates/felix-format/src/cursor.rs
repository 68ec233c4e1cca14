//! [`RecordCursor`]: the one walk over a segment's records, without I/O.
//!
//! Every reader of records — the segment's reads, recovery's scan, the
//! index check, `felix-store dump`, the fixture generator — steps through
//! a segment with this cursor, so the order in which a record is checked is
//! written once:
//!
//! 1. the header's own CRC (and the length bound that [`decode_record_header`]
//!    checks with it), before any field is used;
//! 2. the offset sequence: the record carries the offset after its
//!    predecessor's (and is not `u64::MAX`, which no record takes);
//! 3. the length against the bytes the segment has;
//! 4. at [`ScanDepth::Full`], the record CRC over header and payload.
//!
//! The cursor does no I/O and allocates nothing, in the spirit of gimli's
//! iterators: the caller hands it the bytes from the cursor's position on,
//! and [`RecordCursor::step`] answers with what those bytes hold — a record,
//! the end, damage, or how many bytes it needs to decide (nothing is
//! decided on bytes it has not been given). A caller that
//! reads the file in chunks fetches more and steps again; one that holds
//! the whole segment never sees [`CursorStep::NeedBytes`]. Each record's
//! header is yielded, so whatever observes the walk (an index builder, a
//! time index) sees every offset, position and timestamp.
//!
//! ```
//! use felix_format::{CursorStep, RecordCursor, ScanDepth, encode_record_header};
//!
//! let mut bytes = encode_record_header(7, 1, b"hi")?.to_vec();
//! bytes.extend_from_slice(b"hi");
//! // The records begin at byte 32 of the file (after the segment header).
//! let mut cursor = RecordCursor::new(32, 7, 32 + bytes.len() as u64, ScanDepth::Full);
//! let CursorStep::Record(record) = cursor.step(&bytes) else { panic!() };
//! assert_eq!((record.header.offset, record.position, record.payload()), (7, 32, Some(&b"hi"[..])));
//! assert_eq!(cursor.step(&[]), CursorStep::End);
//! assert_eq!((cursor.position(), cursor.next_offset()), (62, 8));
//! # Ok::<(), felix_format::CorruptionKind>(())
//! ```

use crate::{CorruptionKind, RECORD_HEADER_LEN, RecordHeader, check_record, decode_record_header};

/// How much of each record a walk verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScanDepth {
    /// Header CRC, length bound, offset sequence and the length against the
    /// bytes available; payloads are stepped over, not read. The cost is
    /// proportional to the number of records, which is what makes index
    /// rebuilds cheap.
    Headers,
    /// Everything `Headers` checks plus every record checksum.
    Full,
}

/// The first damage a walk met: what is wrong, and the byte position where
/// the damaged record begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Damage {
    /// What is wrong.
    pub kind: CorruptionKind,
    /// Byte position where the damaged record begins.
    pub position: u64,
}

/// A record the cursor verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CursorRecord<'a> {
    /// Its header (verified; its offset is the one the walk expected).
    pub header: RecordHeader,
    /// Byte position in the file where the record begins.
    pub position: u64,
    /// The record's bytes, header and payload, at [`ScanDepth::Full`]
    /// (where the record CRC verified over them); `None` at
    /// [`ScanDepth::Headers`], where the payload was not looked at.
    pub bytes: Option<&'a [u8]>,
}

impl<'a> CursorRecord<'a> {
    /// Bytes the record occupies, header included.
    #[inline]
    pub fn encoded_len(&self) -> u64 {
        self.header.encoded_len()
    }

    /// One past the record's last byte: where the next record begins.
    #[inline]
    pub fn end(&self) -> u64 {
        self.position + self.encoded_len()
    }

    /// The verified payload, at [`ScanDepth::Full`].
    #[inline]
    pub fn payload(&self) -> Option<&'a [u8]> {
        self.bytes
            .map(|b| b.get(RECORD_HEADER_LEN..).unwrap_or_default())
    }
}

/// What [`RecordCursor::step`] found at the cursor's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorStep<'a> {
    /// The bytes given hold fewer than `needed` bytes from the cursor's
    /// position: step again with at least that many. The segment has them
    /// (the cursor checked its end first), so a caller that cannot supply
    /// them has an I/O problem, not damage.
    NeedBytes {
        /// Bytes needed from the cursor's position.
        needed: u64,
    },
    /// A verified record; the cursor has moved past it.
    Record(CursorRecord<'a>),
    /// [`RecordCursor::step_if`]'s caller declined the record this verified
    /// header begins (a read whose byte budget it would pass). The cursor
    /// did not move.
    Declined {
        /// The header, verified and carrying the expected offset.
        header: RecordHeader,
    },
    /// The segment's records end exactly at the cursor's end.
    End,
    /// The record at the cursor's position is damaged. The cursor does not
    /// move: stepping again reports the same damage.
    Damage(Damage),
}

/// A walk over the records of one segment, from a record boundary to an end
/// position (the file's length, or how far a reader may look), with the
/// offset each record must carry.
///
/// `Copy`: a caller may keep the cursor as it was before a step and return
/// to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordCursor {
    position: u64,
    next_offset: u64,
    end: u64,
    depth: ScanDepth,
}

impl RecordCursor {
    /// A cursor at the record boundary `position`, where a record carrying
    /// `next_offset` must begin, walking to `end` at `depth`.
    ///
    /// A `position` past `end` is treated as `end` (nothing to walk).
    #[inline]
    pub fn new(position: u64, next_offset: u64, end: u64, depth: ScanDepth) -> Self {
        debug_assert!(position <= end, "cursor at {position} past its end {end}");
        Self {
            position: position.min(end),
            next_offset,
            end,
            depth,
        }
    }

    /// Where the next record must begin.
    #[inline]
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The offset the next record must carry: one past the last record's.
    #[inline]
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// Where the walk ends.
    #[inline]
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The depth the next step verifies at.
    #[inline]
    pub fn depth(&self) -> ScanDepth {
        self.depth
    }

    /// Verifies the following records at `depth` (a read steps over the
    /// records before the one it wants by their headers, then reads in full).
    #[inline]
    pub fn set_depth(&mut self, depth: ScanDepth) {
        self.depth = depth;
    }

    /// Steps over the record at the cursor's position. `bytes` are the file's
    /// bytes from [`Self::position`] on (any bytes past [`Self::end`] are
    /// ignored); the checks run in the order the module describes.
    #[inline]
    pub fn step<'a>(&mut self, bytes: &'a [u8]) -> CursorStep<'a> {
        self.step_if(bytes, |_| true)
    }

    /// [`Self::step`], asking `take` about each record once its header and
    /// offset have verified and before anything else is looked at: a record
    /// `take` declines is [`CursorStep::Declined`], and the cursor stays.
    ///
    /// A read with a byte budget declines the record that would pass it, so
    /// that damage after what it returns — a truncated or rotted record it
    /// would not have returned — does not fail it.
    #[inline]
    pub fn step_if<'a>(
        &mut self,
        bytes: &'a [u8],
        take: impl FnOnce(&RecordHeader) -> bool,
    ) -> CursorStep<'a> {
        let remaining = self.end - self.position;
        if remaining == 0 {
            return CursorStep::End;
        }
        let damage = |kind| {
            CursorStep::Damage(Damage {
                kind,
                position: self.position,
            })
        };
        let header_len = RECORD_HEADER_LEN as u64;
        if remaining < header_len {
            return damage(CorruptionKind::Truncated {
                needed: header_len,
                available: remaining,
            });
        }
        // Never look past the end, whatever the caller buffered.
        let bytes = bytes
            .get(..usize::try_from(remaining).unwrap_or(usize::MAX))
            .unwrap_or(bytes);
        if (bytes.len() as u64) < header_len {
            return CursorStep::NeedBytes { needed: header_len };
        }
        let header = match decode_record_header(bytes) {
            Ok(header) => header,
            Err(kind) => return damage(kind),
        };
        if let Err(kind) = header.check_offset(self.next_offset) {
            return damage(kind);
        }
        // No record takes the last offset, so that the one after the last
        // record can be named: a crafted one must not wrap the walk to 0.
        if header.offset == u64::MAX {
            return damage(CorruptionKind::OffsetOverflow {
                found: header.offset,
            });
        }
        if !take(&header) {
            return CursorStep::Declined { header };
        }
        let total = header.encoded_len();
        if total > remaining {
            return damage(CorruptionKind::Truncated {
                needed: total,
                available: remaining,
            });
        }
        let record_bytes = match self.depth {
            ScanDepth::Headers => None,
            ScanDepth::Full => {
                let Some(record) = usize::try_from(total).ok().and_then(|n| bytes.get(..n)) else {
                    return CursorStep::NeedBytes { needed: total };
                };
                // The header verified above: only the rest is checked.
                if let Err(kind) = check_record(header, record, None) {
                    return damage(kind);
                }
                Some(record)
            }
        };
        let position = self.position;
        // `total <= remaining` and `offset < u64::MAX`: neither can wrap.
        self.position += total;
        self.next_offset = header.offset + 1;
        debug_assert!(self.position > position && self.position <= self.end);
        CursorStep::Record(CursorRecord {
            header,
            position,
            bytes: record_bytes,
        })
    }
}

impl RecordCursor {
    /// Steps over the record at the cursor's position by its header alone,
    /// without looking at its payload: what a scrub does after
    /// [`CursorStep::Damage`] with [`CorruptionKind::RecordChecksum`], so
    /// that it reports every rotted payload of a segment, not only the
    /// first. The header is verified as [`Self::step`] verifies it (its own
    /// CRC and length bound, the offset sequence, the length against the
    /// end), so the length stepped by is the writer's.
    ///
    /// `bytes` are the file's bytes from [`Self::position`] on (at least a
    /// record header's worth). Returns the header stepped over, or `None`
    /// when the header itself does not verify (its length cannot be
    /// trusted, so no walk can go on from here) or there are too few bytes;
    /// the cursor then stays.
    ///
    /// ```
    /// use felix_format::{CorruptionKind, CursorStep, RecordCursor, ScanDepth, encode_record_header};
    ///
    /// let mut file = vec![0u8; 32];
    /// for (offset, payload) in [(0, &b"ab"[..]), (1, &b"cd"[..])] {
    ///     file.extend_from_slice(&encode_record_header(offset, 0, payload)?);
    ///     file.extend_from_slice(payload);
    /// }
    /// file[32 + 28] ^= 1; // rot in the first payload
    /// let mut cursor = RecordCursor::new(32, 0, file.len() as u64, ScanDepth::Full);
    /// let at = |c: &RecordCursor| &file[c.position() as usize..];
    /// assert!(matches!(
    ///     cursor.step(at(&cursor)),
    ///     CursorStep::Damage(d) if matches!(d.kind, CorruptionKind::RecordChecksum { .. })
    /// ));
    /// assert_eq!(cursor.skip_damaged_payload(at(&cursor)).map(|h| h.offset), Some(0));
    /// assert!(matches!(cursor.step(at(&cursor)), CursorStep::Record(r) if r.header.offset == 1));
    /// # Ok::<(), felix_format::CorruptionKind>(())
    /// ```
    pub fn skip_damaged_payload(&mut self, bytes: &[u8]) -> Option<RecordHeader> {
        let remaining = self.end - self.position;
        let header = decode_record_header(bytes.get(..RECORD_HEADER_LEN)?).ok()?;
        header.check_offset(self.next_offset).ok()?;
        let total = header.encoded_len();
        if header.offset == u64::MAX || total > remaining {
            return None;
        }
        let position = self.position;
        self.position += total;
        self.next_offset = header.offset + 1;
        debug_assert!(self.position > position && self.position <= self.end);
        Some(header)
    }
}

/// The records of a segment held whole in memory, as an iterator: each item
/// is a verified record or the damage that ends the walk.
///
/// ```
/// use felix_format::{RecordCursor, ScanDepth, SliceRecords, encode_record_header};
///
/// let mut file = vec![0u8; 32]; // stands in for the segment header
/// for (offset, payload) in [(5, &b"a"[..]), (6, &b"bc"[..])] {
///     file.extend_from_slice(&encode_record_header(offset, 0, payload)?);
///     file.extend_from_slice(payload);
/// }
/// let cursor = RecordCursor::new(32, 5, file.len() as u64, ScanDepth::Full);
/// let offsets: Vec<u64> = SliceRecords::new(&file, cursor)
///     .map(|r| r.map(|r| r.header.offset))
///     .collect::<Result<_, _>>()
///     .unwrap();
/// assert_eq!(offsets, [5, 6]);
/// # Ok::<(), felix_format::CorruptionKind>(())
/// ```
#[derive(Debug, Clone)]
pub struct SliceRecords<'a> {
    file: &'a [u8],
    cursor: RecordCursor,
    done: bool,
}

impl<'a> SliceRecords<'a> {
    /// Walks `file` (the whole file, from byte 0) with `cursor`, whose end
    /// must not pass `file`'s length.
    pub fn new(file: &'a [u8], cursor: RecordCursor) -> Self {
        debug_assert!(cursor.end() <= file.len() as u64);
        Self {
            file,
            cursor,
            done: false,
        }
    }

    /// The cursor as the walk has left it.
    pub fn cursor(&self) -> &RecordCursor {
        &self.cursor
    }
}

impl<'a> Iterator for SliceRecords<'a> {
    type Item = Result<CursorRecord<'a>, Damage>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let from = usize::try_from(self.cursor.position()).unwrap_or(usize::MAX);
        let bytes = self.file.get(from..).unwrap_or_default();
        match self.cursor.step(bytes) {
            CursorStep::Record(record) => Some(Ok(record)),
            CursorStep::Damage(damage) => {
                self.done = true;
                Some(Err(damage))
            }
            // The whole file is at hand, so more bytes cannot be had: only
            // an end past the slice asks for them. Nothing declines here.
            CursorStep::End | CursorStep::NeedBytes { .. } | CursorStep::Declined { .. } => {
                self.done = true;
                None
            }
        }
    }
}
