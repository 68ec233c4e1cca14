//! How a store lays out and protects its shards.

use std::time::Duration;

use felix_recovery::RepairPolicy;

/// When appended records become durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Records live in the page cache until a segment is sealed or the caller
    /// syncs: a power loss may lose them, a process crash does not.
    None,
    /// A background thread syncs every shard at this interval.
    Periodic(Duration),
    /// `append` returns only once an `fdatasync` covers the batch. Concurrent
    /// appenders share syncs (group commit).
    OnCommit,
}

/// When sealed segments are deleted from the head of a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Retention {
    /// Keep the shard at or below this many bytes (whole segments only; the
    /// active segment is never deleted).
    pub max_bytes: Option<u64>,
    /// Delete a sealed segment once its newest record is older than this.
    pub max_age: Option<Duration>,
    /// Run retention on every shard at this interval, on a store thread.
    pub interval: Option<Duration>,
}

/// Configuration of every shard a store opens.
///
/// ```
/// use felix_storage::{Durability, StoreConfig};
/// let config = StoreConfig { durability: Durability::OnCommit, ..StoreConfig::default() };
/// assert_eq!(config.segment_size_bytes, 1 << 30);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreConfig {
    /// A batch that would take the active segment past this size goes to a
    /// new segment.
    pub segment_size_bytes: u64,
    /// Spacing of sparse index entries.
    pub index_spacing_bytes: u64,
    /// Reserve `segment_size_bytes` of disk for each new segment up front.
    pub preallocate: bool,
    /// When appends become durable.
    pub durability: Durability,
    /// With [`Durability::None`] or [`Durability::Periodic`], sync in the
    /// background after every this many bytes appended, so dirty data does
    /// not pile up: a roll must make the whole segment durable before the
    /// next one exists, and without this a 1 GiB segment's seal stalls
    /// appends for the time it takes to write 1 GiB. `None`: never.
    pub writeback_bytes: Option<u64>,
    /// When old segments are deleted.
    pub retention: Retention,
    /// Which damage an open may repair. Default [`RepairPolicy::Default`]:
    /// only what is provably an unfinished write; with
    /// [`RepairPolicy::ChecksumTail`] an open also truncates damage that
    /// may be rot of an acknowledged record when it is confined to the
    /// newest segment's tail.
    pub repair_policy: RepairPolicy,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            segment_size_bytes: 1 << 30,
            index_spacing_bytes: felix_segment::DEFAULT_INDEX_SPACING_BYTES,
            preallocate: true,
            durability: Durability::OnCommit,
            writeback_bytes: Some(64 << 20),
            retention: Retention::default(),
            repair_policy: RepairPolicy::Default,
        }
    }
}
