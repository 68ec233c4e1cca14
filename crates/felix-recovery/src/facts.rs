//! What a shard directory holds, as values: the listing, and per segment
//! what its header, its records and its index turned out to be — measured
//! by [`crate::scan`], before anything is decided about them.
//!
//! Nothing here holds a file-system handle or a descriptor: the decisions
//! ([`crate::classify`], [`crate::location`]) and the plan
//! ([`crate::plan`]) read facts only, so they can be tested with values.

use felix_format::{CorruptionKind, Damage, IndexEntry, SegmentExtent};
use felix_segment::TimeIndex;

use crate::classify::Role;
use crate::key_file::StoredKey;
use crate::listing::Listing;
use crate::location::TailFacts;
use crate::log_start::StoredLogStart;
use crate::raft_state::{StoredRaftSnapshot, StoredRaftState};
use crate::report::{IndexProblem, Note, TimeIndexProblem};

/// Everything measured about a shard directory.
#[derive(Debug)]
pub(crate) struct ShardFacts {
    /// The directory's names.
    pub(crate) listing: Listing,
    /// Whether a clean-shutdown record listed the sealed segments, which
    /// were then taken from it rather than opened.
    pub(crate) trusted_clean_shutdown: bool,
    /// The newest segment as the trusted clean-shutdown record lists it.
    pub(crate) clean_newest: Option<SegmentExtent>,
    /// What became of a clean-shutdown file (used, or why not), if one was
    /// looked at.
    pub(crate) clean_shutdown_note: Option<Note>,
    /// What the key file says, when the listing holds one (a regular file).
    pub(crate) key: Option<StoredKey>,
    /// What the log-start file says.
    pub(crate) log_start: StoredLogStart,
    /// What the raft-state file says, when there is one.
    pub(crate) raft_state: Option<StoredRaftState>,
    /// What the raft-snapshot file says, when there is one.
    pub(crate) raft_snapshot: Option<StoredRaftSnapshot>,
    /// One entry per segment, in id order.
    pub(crate) segments: Vec<SegmentFacts>,
}

/// What one segment turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SegmentFacts {
    /// Its id.
    pub(crate) id: u64,
    /// Its place in the shard.
    pub(crate) role: Role,
    /// What was found.
    pub(crate) state: SegmentState,
}

/// What a segment's file held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SegmentState {
    /// A sealed segment as a trusted clean-shutdown record lists it: not
    /// opened.
    Trusted(SegmentExtent),
    /// Its 32-byte header did not decode.
    HeaderDamaged {
        /// The file's length.
        file_len: u64,
        /// What is wrong with the header.
        kind: CorruptionKind,
        /// Whether the file has the shape of an interrupted creation:
        /// shorter than a header, or a header's length of zeros (measured
        /// for the last segment only, the one creation can leave).
        abandoned_shape: bool,
    },
    /// Its header decoded and its records were walked. (Boxed: a shard of
    /// ten thousand segments taken from a clean-shutdown record would
    /// otherwise carry room for this in every entry.)
    Scanned(Box<ScannedSegment>),
}

/// What a segment whose header decoded turned out to hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScannedSegment {
    /// Its first offset, from the header.
    pub(crate) base_offset: u64,
    /// The file's length.
    pub(crate) file_len: u64,
    /// What the walk of its records found.
    pub(crate) records: RecordFacts,
    /// Whether its index can be used as it is.
    pub(crate) index: IndexFacts,
    /// Why its time index file cannot be used, when the walk could tell
    /// and it cannot (see `scan::check_time_index`).
    pub(crate) time_index: Option<TimeIndexProblem>,
    /// What follows the first damage, when there is damage.
    pub(crate) tail: Option<TailFacts>,
}

/// What a walk of a segment's records found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordFacts {
    /// One past the last intact record's offset.
    pub(crate) next_offset: u64,
    /// One past the last intact record's last byte.
    pub(crate) valid_len: u64,
    /// Index entries rebuilt from the records (every entry from the first
    /// record when the walk began there).
    pub(crate) entries: Vec<IndexEntry>,
    /// The time index built on the way, when the walk began at the first
    /// record.
    pub(crate) time_index: Option<TimeIndex>,
    /// The first damage, if the walk did not reach the end cleanly.
    pub(crate) damage: Option<Damage>,
}

/// Whether a segment's index can be used as it is, and why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexFacts {
    /// It loaded and the records vouch for what was checked of it.
    pub(crate) usable: bool,
    /// Why not, when there is something to say (an index with damage
    /// before its entries is not usable, but the damage is what is
    /// reported).
    pub(crate) problem: Option<IndexProblem>,
}
