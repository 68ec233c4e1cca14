//! Scrubbing: every record checksum of a segment, every damaged record
//! reported, nothing written.
//!
//! An open reads sealed segments' payloads only where it must (see
//! [`crate::scan`]), so rot in the middle of a sealed segment stays hidden
//! until a reader — often a replica catching up — needs the record. A scrub
//! finds it first: the one record walk ([`RecordWalk`], felix-format's
//! cursor) at [`ScanDepth::Full`], going on past each record whose payload
//! failed its checksum (its header verified, so its length is the
//! writer's) and stopping only where a header itself is damaged, since no
//! length after it can be trusted. Such a segment must be replaced whole
//! anyway, so the walk loses nothing an operator acts on.
//!
//! It only reads: the caller opens the segment (read-only, a descriptor of
//! its own) and paces the walk through the callback it gives, which sees
//! the bytes checked so far after every chunk and may stop the walk.

use std::ops::ControlFlow;

use felix_format::{CorruptionKind, CorruptionSite, ScanDepth, SegmentExtent};
use felix_io::IoError;
use felix_segment::{CHUNK_BYTES, RecordWalk, SegmentFile, WalkStep};

/// One damaged record a scrub found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrubDamage {
    /// What is wrong.
    pub kind: CorruptionKind,
    /// Where the damaged record (or the segment header) begins.
    pub site: CorruptionSite,
    /// The offset the record at the site carries (for a damaged header,
    /// the offset it must carry: the one after its predecessor's).
    pub offset: u64,
}

/// What a scrub of one segment found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentScrub {
    /// The segment id.
    pub segment: u64,
    /// Bytes of records walked (headers and payloads checked, damaged
    /// payloads included).
    pub bytes: u64,
    /// Records whose checksums all verified.
    pub intact_records: u64,
    /// One past the last record walked (damaged payloads included): the
    /// segment's next offset when the walk reached its end.
    pub next_offset: u64,
    /// Every damaged record, in file order.
    pub damage: Vec<ScrubDamage>,
    /// Where the walk had to stop short of the segment's end (a damaged
    /// header, whose length cannot be trusted): the bytes from here on
    /// were not checked. `None` when it reached the end.
    pub unchecked_from: Option<u64>,
    /// Whether the walk ran to the end (or to a damaged header); `false`
    /// when the pacing callback stopped it first.
    pub finished: bool,
}

/// Scrubs `segment` (a file of `file_len` bytes) from its first record,
/// checking every checksum: to its end, or with `expected` (the extent a
/// sealed segment was recorded with) to the extent's length, and a walk
/// that ends short of the extent's next offset (the file lost its last
/// records) reports a [`CorruptionKind::Truncated`] where it ended.
///
/// `pace` is called with the bytes walked so far after each chunk
/// ([`CHUNK_BYTES`]) and once at the end; returning
/// [`ControlFlow::Break`] stops the walk (the result says so in
/// [`SegmentScrub::finished`]).
///
/// ```
/// use std::ops::ControlFlow;
/// use felix_io::FileSystem;
/// use felix_recovery::scrub_segment;
/// use felix_segment::{Record, SegmentConfig, SegmentWriter};
///
/// let dir = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// let mut writer = SegmentWriter::create(&fs, dir.path(), 0, 0, SegmentConfig::default(), "doc".into())?;
/// writer.append(&[Record::new(1, "a"), Record::new(2, "b")])?;
/// let scrub = scrub_segment(writer.segment(), writer.len(), None, &mut |_| ControlFlow::Continue(()))?;
/// assert_eq!((scrub.intact_records, scrub.damage.len(), scrub.finished), (2, 0, true));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn scrub_segment(
    segment: &SegmentFile,
    file_len: u64,
    expected: Option<SegmentExtent>,
    pace: &mut dyn FnMut(u64) -> ControlFlow<()>,
) -> Result<SegmentScrub, IoError> {
    let end = expected.map_or(file_len, |e| e.len.min(file_len));
    let mut walk = RecordWalk::from_first_record(segment, end, ScanDepth::Full);
    let start = walk.cursor().position();
    let mut scrub = SegmentScrub {
        segment: segment.id(),
        bytes: 0,
        intact_records: 0,
        next_offset: segment.base_offset(),
        damage: Vec::new(),
        unchecked_from: None,
        finished: true,
    };
    let mut paced_at = start;
    loop {
        let position = walk.cursor().position();
        if position - paced_at >= CHUNK_BYTES {
            paced_at = position;
            if pace(position - start).is_break() {
                scrub.finished = false;
                break;
            }
        }
        match walk.step()? {
            WalkStep::Record(_) => scrub.intact_records += 1,
            WalkStep::End => {
                let cursor = walk.cursor();
                if let Some(extent) = expected
                    && cursor.next_offset() < extent.next_offset
                {
                    scrub.damage.push(ScrubDamage {
                        kind: CorruptionKind::Truncated {
                            needed: extent.len.saturating_sub(cursor.position()),
                            available: 0,
                        },
                        site: segment.site(cursor.position()),
                        offset: cursor.next_offset(),
                    });
                }
                break;
            }
            WalkStep::Damage(damage) => {
                let offset = walk.cursor().next_offset();
                scrub.damage.push(ScrubDamage {
                    kind: damage.kind,
                    site: segment.site(damage.position),
                    offset,
                });
                let payload_only = matches!(damage.kind, CorruptionKind::RecordChecksum { .. });
                if !payload_only || walk.skip_damaged_payload()?.is_none() {
                    scrub.unchecked_from = Some(damage.position);
                    break;
                }
            }
        }
    }
    scrub.bytes = walk.cursor().position() - start;
    scrub.next_offset = walk.cursor().next_offset();
    if scrub.finished {
        // The end is paced too, so a rate holds across segments.
        let _ = pace(scrub.bytes);
    }
    Ok(scrub)
}
