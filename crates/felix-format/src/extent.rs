//! [`SegmentExtent`]: which segment, which offsets, how many bytes.

/// One segment's extent: its id, the offsets it holds and the bytes they
/// take. The one description of a segment every layer shares: the
/// clean-shutdown file lists extents, recovery hands the sealed segments
/// on as extents, and a shard lists its segments as extents.
///
/// ```
/// # use felix_format::SegmentExtent;
/// let extent = SegmentExtent { id: 3, base_offset: 100, next_offset: 110, len: 4_096 };
/// assert_eq!(extent.records(), 10);
/// assert!(extent.contains(109));
/// assert!(!extent.contains(110));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SegmentExtent {
    /// Segment id (the number in its file name).
    pub id: u64,
    /// Its first offset, from its header.
    pub base_offset: u64,
    /// One past its last record's offset.
    pub next_offset: u64,
    /// Bytes of header and records.
    pub len: u64,
}

impl SegmentExtent {
    /// Records the segment holds.
    pub const fn records(&self) -> u64 {
        self.next_offset.saturating_sub(self.base_offset)
    }

    /// Whether the segment holds `offset`.
    pub const fn contains(&self, offset: u64) -> bool {
        self.base_offset <= offset && offset < self.next_offset
    }
}
