//! Per-shard counters, readable at any time without a lock.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use felix_recovery::{Action, Note};

/// A snapshot of a shard's counters since it was opened.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShardStats {
    /// Records appended. Counted once written: a batch queued for the
    /// sync pending (an on-commit append with a future or a callback)
    /// counts when the sync worker writes it.
    pub records_appended: u64,
    /// Payload and header bytes appended (counted once written, as
    /// `records_appended`).
    pub bytes_appended: u64,
    /// Append calls (batches), counted once written.
    pub appends: u64,
    /// `write` calls those appends made: fewer than `appends` when
    /// concurrent on-commit appends were combined into one `write`.
    pub writes: u64,
    /// Times a write-combining leader handed the lead to a waiting
    /// appender after its rounds, so that none leads indefinitely.
    pub lead_handoffs: u64,
    /// `fdatasync` calls made for durability (group commits, explicit syncs
    /// and background writeback; seals not included).
    pub syncs: u64,
    /// Appends whose durability waited on a sync.
    pub synced_appends: u64,
    /// Segments rolled over.
    pub rolls: u64,
    /// Segments deleted by retention.
    pub segments_deleted: u64,
    /// Times an index could not be written to disk (a full disk, or its
    /// name taken by something that is not a regular file): rebuilt ones
    /// on open and on a read, and retries of the active segment's at a roll
    /// or a close. Indexes only speed reads up, so nothing fails for it:
    /// the index is held in memory (or rebuilt when read), and the active
    /// segment's is written again at the next roll or close.
    pub index_write_failures: u64,
    /// Bytes of sealed segments' records scrubbed
    /// ([`Shard::scrub`](crate::Shard::scrub), or the background scrub).
    pub scrubbed_bytes: u64,
    /// Damaged records scrubs found (each time one is found: a damaged
    /// record not yet replaced counts again at the next scrub).
    pub scrub_damaged_records: u64,
    /// How long opening (recovery included) took.
    pub recovery_time: Duration,
    /// What recovery did on open.
    pub recovery_actions: Vec<Action>,
    /// Facts that are not damage: recovery's notes on open (indexes
    /// rebuilt, stray files left alone), then one for each sealed segment
    /// whose index a read found stale (an entry not where the records put
    /// its offset) and rebuilt from the records in memory.
    pub notes: Vec<Note>,
}

impl ShardStats {
    /// Average appends made durable by one sync: the measure of how well
    /// group commit shares `fdatasync` among concurrent appenders.
    pub fn appends_per_sync(&self) -> f64 {
        if self.syncs == 0 {
            0.0
        } else {
            self.synced_appends as f64 / self.syncs as f64
        }
    }

    /// Average appends written by one `write`: the measure of how well
    /// concurrent on-commit appends are combined.
    pub fn appends_per_write(&self) -> f64 {
        if self.writes == 0 {
            0.0
        } else {
            self.appends as f64 / self.writes as f64
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) records_appended: AtomicU64,
    pub(crate) bytes_appended: AtomicU64,
    pub(crate) appends: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) lead_handoffs: AtomicU64,
    pub(crate) rolls: AtomicU64,
    pub(crate) segments_deleted: AtomicU64,
    pub(crate) index_write_failures: AtomicU64,
    pub(crate) scrubbed_bytes: AtomicU64,
    pub(crate) scrub_damage: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    /// [`Counters::add`] for a counter only ever updated with the writer
    /// lock held: a plain load and store, no locked read-modify-write on
    /// the append path. Readers may see it a moment late, never torn.
    pub(crate) fn add_exclusive(counter: &AtomicU64, n: u64) {
        counter.store(counter.load(Relaxed) + n, Relaxed);
    }

    /// The counters, with group commit's `(syncs, synced_appends)`, which
    /// its syncs keep.
    pub(crate) fn snapshot(
        &self,
        recovery_time: Duration,
        recovery_actions: Vec<Action>,
        notes: Vec<Note>,
        (syncs, synced_appends): (u64, u64),
    ) -> ShardStats {
        ShardStats {
            records_appended: self.records_appended.load(Relaxed),
            bytes_appended: self.bytes_appended.load(Relaxed),
            appends: self.appends.load(Relaxed),
            writes: self.writes.load(Relaxed),
            lead_handoffs: self.lead_handoffs.load(Relaxed),
            syncs,
            synced_appends,
            rolls: self.rolls.load(Relaxed),
            segments_deleted: self.segments_deleted.load(Relaxed),
            index_write_failures: self.index_write_failures.load(Relaxed),
            scrubbed_bytes: self.scrubbed_bytes.load(Relaxed),
            scrub_damaged_records: self.scrub_damage.load(Relaxed),
            recovery_time,
            recovery_actions,
            notes,
        }
    }
}
