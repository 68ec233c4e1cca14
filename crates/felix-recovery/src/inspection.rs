//! How to inspect a shard ([`InspectOptions`]) and what an inspection
//! found ([`Inspection`]): values, holding no file-system handle, built by
//! [`crate::plan`] and read by [`crate::repair`] and the tools.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use felix_format::SegmentExtent;
use felix_format::log_start::LogStart;
use felix_segment::{SparseIndex, TimeIndex};

use crate::classify::RepairPolicy;
use crate::report::{Action, Finding, Note, TemporaryKind};

/// How much of a sealed segment's index an inspection checks against the
/// segment's records. (The newest segment is always scanned in full and its
/// index checked entry by entry.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IndexCheck {
    /// The index file is validated and the segment's tail is scanned from
    /// its last entry to the end of the file: what an open does, reading
    /// only the tail of each sealed segment. A wrong earlier entry is not
    /// looked for; a read that meets one rebuilds the index.
    #[default]
    LastEntry,
    /// Every entry is checked by walking record headers from the first
    /// record (payloads are skipped, not checksummed; see
    /// [`felix_segment::first_stale_entry`]), and an index with an entry the
    /// walk does not vouch for is rebuilt. Costs a read of each sealed
    /// segment up to its last entry; what an operator's check and repair
    /// use, so that a wrong entry anywhere is reported and repaired.
    EveryEntry,
}

/// How to inspect a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InspectOptions {
    /// Spacing of index entries when an index is rebuilt. Default
    /// [`felix_segment::DEFAULT_INDEX_SPACING_BYTES`].
    pub index_spacing_bytes: u64,
    /// Scan every record of every segment in full, not only the newest
    /// segment (sealed segments otherwise get a header check, index
    /// validation and a scan of their tail). Default `false`.
    pub full_verify: bool,
    /// How much of each sealed segment's index is checked against its
    /// records. Default [`IndexCheck::LastEntry`], what an open does; with
    /// `full_verify` every entry is checked whatever this says.
    pub index_check: IndexCheck,
}

impl Default for InspectOptions {
    fn default() -> Self {
        Self {
            index_spacing_bytes: felix_segment::DEFAULT_INDEX_SPACING_BYTES,
            full_verify: false,
            index_check: IndexCheck::LastEntry,
        }
    }
}

/// What one segment holds, as it will be after the planned repairs.
///
/// It holds the parts of the segment's extent that are known, not a
/// [`SegmentExtent`]: damage can hide its first offset (a damaged header)
/// or its next one (damage in a sealed segment), while its id and lengths
/// are always known. [`Self::extent`] is the extent when every part is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentSummary {
    /// Segment id.
    pub id: u64,
    /// First offset, from the header (`None` when the header is damaged).
    pub base_offset: Option<u64>,
    /// One past the last intact record (`None` when unknown).
    pub next_offset: Option<u64>,
    /// The file's length now.
    pub file_len: u64,
    /// Where its intact records end: its length after the plan's repairs.
    pub valid_len: u64,
    /// Whether it is the newest segment (the one a writer continues).
    pub newest: bool,
    /// Whether its index can be used as it is.
    pub index_ok: bool,
    /// Whether the segment is removed by the plan (abandoned creation).
    pub removed: bool,
}

impl SegmentSummary {
    /// Records the segment holds, when known.
    pub fn records(&self) -> Option<u64> {
        self.extent().map(|extent| extent.records())
    }

    /// The segment's extent after the plan (its length is
    /// [`Self::valid_len`]), when both its offsets are known.
    pub fn extent(&self) -> Option<SegmentExtent> {
        Some(SegmentExtent {
            id: self.id,
            base_offset: self.base_offset?,
            next_offset: self.next_offset?,
            len: self.valid_len,
        })
    }

    /// A sealed segment as a trusted clean-shutdown record lists it.
    pub(crate) fn trusted(extent: SegmentExtent) -> Self {
        Self {
            id: extent.id,
            base_offset: Some(extent.base_offset),
            next_offset: Some(extent.next_offset),
            file_len: extent.len,
            valid_len: extent.len,
            newest: false,
            // Not loaded here: a read loads (or rebuilds) it on first use.
            index_ok: true,
            removed: false,
        }
    }
}

/// The result of inspecting a shard directory.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The shard directory.
    pub dir: PathBuf,
    /// The label errors carry.
    pub shard: Arc<str>,
    /// Segments in id order.
    pub segments: Vec<SegmentSummary>,
    /// Damage to data, in the order found.
    pub findings: Vec<Finding>,
    /// Facts that are not damage.
    pub notes: Vec<Note>,
    /// What a repair would do.
    pub plan: Vec<Action>,
    /// The shard's exact key, from its key file, when the directory has a
    /// usable one naming a key whose directory name is the directory's own
    /// (see [`Note::KeyFileUnusable`] and [`Note::KeyFileDisagrees`] for
    /// why it may be `None` with a file present).
    pub key: Option<felix_format::ShardKey>,
    /// Where the log-start file says the log begins, when the directory has
    /// a usable one (see [`Self::start_offset`] for where it begins).
    pub log_start: Option<LogStart>,
    /// Rebuilt indexes by segment id, for the plan's `RebuildIndex` actions
    /// and for the newest segment.
    pub(crate) rebuilt: BTreeMap<u64, SparseIndex>,
    /// Time indexes built from the records: the newest segment's (for its
    /// writer) and, sealed, those the plan's `RebuildTimeIndex` writes.
    pub(crate) time_indexes: BTreeMap<u64, TimeIndex>,
    /// Whether a clean-shutdown record stood for the sealed segments.
    pub(crate) trusted_clean_shutdown: bool,
    /// An id above every segment the directory held and at or above the
    /// log-start file's first segment id: a new first segment's, so that an
    /// id is never used twice. `None` past `u64::MAX`.
    pub(crate) next_segment_id: Option<u64>,
    /// Whether the directory holds a clean-shutdown file, which an open for
    /// writing removes.
    pub(crate) clean_shutdown_present: bool,
    /// The newest segment as a trusted clean-shutdown record lists it.
    pub(crate) clean_newest: Option<felix_format::SegmentExtent>,
    /// Our temporaries, which an open for writing removes.
    pub(crate) temporaries: Vec<(PathBuf, TemporaryKind)>,
    /// Index and time index files of removed segments, below every
    /// segment held ([`Note::IndexOfRemovedSegment`]), which an open for
    /// writing removes.
    pub(crate) leftover_indexes: Vec<PathBuf>,
}

impl Inspection {
    /// Findings `policy` does not allow repairing: if any, opening fails.
    pub fn blocking(&self, policy: RepairPolicy) -> Vec<&Finding> {
        self.findings
            .iter()
            .filter(|f| !policy.allows(f.repair))
            .collect()
    }

    /// Whether opening with `policy` would succeed.
    pub fn would_open(&self, policy: RepairPolicy) -> bool {
        self.blocking(policy).is_empty()
    }

    /// The segments that remain after the plan.
    pub fn live_segments(&self) -> impl Iterator<Item = &SegmentSummary> {
        self.segments.iter().filter(|s| !s.removed)
    }

    /// The shard's first offset after the plan, if any segment remains.
    pub fn base_offset(&self) -> Option<u64> {
        self.live_segments().next()?.base_offset
    }

    /// Where the log begins after the plan: the log-start file's offset,
    /// unless the first remaining segment begins later (or, without a
    /// usable file, that segment's base offset). With no segment left, the
    /// file's offset, where the open creates the first segment.
    pub fn start_offset(&self) -> Option<u64> {
        match (self.log_start, self.base_offset()) {
            (Some(start), Some(base)) => Some(start.start_offset.max(base)),
            (Some(start), None) if self.live_segments().next().is_none() => {
                Some(start.start_offset)
            }
            (_, base) => base,
        }
    }

    /// Whether a clean-shutdown record stood for the sealed segments (they
    /// were taken as it lists them, not opened).
    pub fn trusted_clean_shutdown(&self) -> bool {
        self.trusted_clean_shutdown
    }

    /// The shard's next offset after the plan, if known.
    pub fn next_offset(&self) -> Option<u64> {
        self.live_segments().last()?.next_offset
    }

    /// Records across the remaining segments, if every count is known.
    pub fn records(&self) -> Option<u64> {
        self.live_segments().map(SegmentSummary::records).sum()
    }
}
