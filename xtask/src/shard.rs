//! The smallest reader that can say what a fixture decodes as, built only
//! from `felix-format`'s decoders and its record cursor (the walk every
//! reader of the project shares).
//!
//! Generation uses it to prove each damaged fixture fails with the variant
//! and at the byte it was built for, and the README and manifest quote its
//! verdicts, so the documentation of a fixture is what the decoders say
//! rather than what the generator intended.

use std::fmt;

use felix_format::{
    CorruptionKind, IndexView, RecordCursor, SEGMENT_HEADER_LEN, ScanDepth, SegmentHeader,
    SliceRecords, parse_index,
};

/// A segment that decoded end to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scan {
    /// The base offset from the segment header.
    pub(crate) base_offset: u64,
    /// Whole, verified records.
    pub(crate) records: u64,
}

/// The first damage a reader meets, and the byte where the damaged structure
/// (the header or the record) begins, as a `CorruptionSite` would say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) position: u64,
    pub(crate) kind: CorruptionKind,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at byte {}: {}",
            self.kind.name(),
            self.position,
            self.kind
        )
    }
}

impl fmt::Display for Scan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.records {
            0 => write!(f, "ok: no records, base offset {}", self.base_offset),
            n => write!(
                f,
                "ok: {n} records, offsets {}..={}",
                self.base_offset,
                self.base_offset + n - 1
            ),
        }
    }
}

/// Decodes the header and walks every record in full, stopping at the first
/// failure the way a reader does; offsets must ascend by one from the base
/// offset.
pub(crate) fn scan_segment(bytes: &[u8]) -> Result<Scan, Failure> {
    let header = SegmentHeader::decode(bytes).map_err(|kind| Failure { position: 0, kind })?;
    let cursor = RecordCursor::new(
        SEGMENT_HEADER_LEN as u64,
        header.base_offset,
        bytes.len() as u64,
        ScanDepth::Full,
    );
    let mut walk = SliceRecords::new(bytes, cursor);
    for step in walk.by_ref() {
        step.map_err(|damage| Failure {
            position: damage.position,
            kind: damage.kind,
        })?;
    }
    Ok(Scan {
        base_offset: header.base_offset,
        records: walk.cursor().next_offset() - header.base_offset,
    })
}

/// Parses an index against the segment beside it, as a reader loading the
/// shard would. A segment that does not decode has no base offset to check
/// against, so the index then is checked against base offset 0.
pub(crate) fn load_index<'a>(
    index: &'a [u8],
    segment: &[u8],
) -> Result<IndexView<'a>, CorruptionKind> {
    let base = SegmentHeader::decode(segment).map_or(0, |h| h.base_offset);
    parse_index(index, base, segment.len() as u64)
}

/// One line saying how an index loads.
pub(crate) fn index_verdict(index: &[u8], segment: &[u8]) -> String {
    match load_index(index, segment) {
        Ok(view) => {
            let entries = view
                .iter()
                .map(|e| format!("({}, {})", e.offset, e.position));
            let mut text = format!(
                "ok: {} entries [{}]",
                view.len(),
                entries.collect::<Vec<_>>().join(", ")
            );
            if view.torn_bytes > 0 {
                text.push_str(&format!(
                    ", torn final entry of {} bytes dropped",
                    view.torn_bytes
                ));
            }
            text
        }
        Err(kind) => format!("{}: {kind}", kind.name()),
    }
}
