//! The two-segment shard the classification tests damage: a sealed
//! segment (offsets 0..3) and the newest (offsets 3..6).

use felix_format::SegmentExtent;
use felix_recovery::InspectOptions;

use super::{RecordAt, build_shard, shard_layout};

/// Records per segment.
pub(crate) const SEGMENTS: &[u64] = &[3, 3];
/// Index spacing: one entry per segment.
pub(crate) const SPACING: u64 = 4096;
/// The sealed segment's id.
pub(crate) const SEALED: u64 = 0;
/// The newest segment's id.
pub(crate) const NEWEST: u64 = 1;

/// Inspection at the shard's spacing, shallow or full.
pub(crate) fn inspect_options(full_verify: bool) -> InspectOptions {
    InspectOptions {
        index_spacing_bytes: SPACING,
        full_verify,
        ..InspectOptions::default()
    }
}

/// The shard, built in a fresh directory, and where its records are.
pub(crate) fn shard() -> (tempfile::TempDir, Vec<Vec<RecordAt>>) {
    let dir = tempfile::tempdir().unwrap();
    build_shard(dir.path(), 0, SEGMENTS, SPACING);
    (dir, shard_layout(0, SEGMENTS))
}

/// The sealed segment's extent.
pub(crate) fn sealed_info(layout: &[Vec<RecordAt>]) -> SegmentExtent {
    SegmentExtent {
        id: SEALED,
        base_offset: 0,
        next_offset: 3,
        len: super::segment_len(&layout[SEALED as usize]),
    }
}
