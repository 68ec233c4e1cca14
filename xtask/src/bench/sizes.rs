//! How much data a full and a quick run of the suite move.

use super::MIB;

/// Sizes of a full or a quick run.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sizes {
    pub(super) rounds: usize,
    pub(super) append_b1: u64,
    pub(super) append_b16: u64,
    pub(super) append_b256: u64,
    pub(super) commit_1: u64,
    pub(super) commit_8: u64,
    pub(super) commit_64: u64,
    pub(super) segment_bytes: u64,
    pub(super) read_records: u64,
    pub(super) random_reads: u64,
    pub(super) sealed_segments: u64,
    pub(super) crash_segment_bytes: u64,
    pub(super) crash_newest: [u64; 3],
    pub(super) crash_sealed: [u64; 3],
    pub(super) memory_bytes: [u64; 2],
    /// Sealed segments a scrub reads while on-commit appends are measured.
    pub(super) scrub_sealed_bytes: u64,
    /// Entries written through openraft per run with 64 writers (a
    /// tenth with one writer).
    pub(super) raft_entries: u64,
    /// Acknowledged appends per run of the replicated produce rows (and
    /// of their local limit).
    pub(super) cluster_records: u64,
    /// Records a consumer reads from a follower in the catch-up row (and
    /// from the local shard of its limit).
    pub(super) cluster_catch_up_records: u64,
    /// How long the idle row measures the nodes' CPU.
    pub(super) cluster_idle_seconds: u64,
    /// Leaders killed per run of the failover row.
    pub(super) cluster_kills: u64,
}

/// `cargo xtask bench`.
pub(super) const FULL: Sizes = Sizes {
    rounds: 5,
    append_b1: 2_000_000,
    append_b16: 8_000_000,
    append_b256: 16_000_000,
    commit_1: 3_000,
    commit_8: 24_000,
    commit_64: 64_000,
    segment_bytes: 1 << 30,
    read_records: 10_000_000,
    random_reads: 200_000,
    sealed_segments: 10_000,
    crash_segment_bytes: 256 * MIB,
    crash_newest: [64 * MIB, 256 * MIB, 1024 * MIB],
    crash_sealed: [0, 4, 16],
    memory_bytes: [512 * MIB, 2048 * MIB],
    scrub_sealed_bytes: 1024 * MIB,
    raft_entries: 10_000,
    cluster_records: 50_000,
    cluster_catch_up_records: 1_000_000,
    cluster_idle_seconds: 10,
    cluster_kills: 20,
};

/// `cargo xtask bench --quick`.
pub(super) const QUICK: Sizes = Sizes {
    rounds: 5,
    append_b1: 300_000,
    append_b16: 1_000_000,
    append_b256: 2_000_000,
    commit_1: 800,
    commit_8: 4_000,
    commit_64: 12_800,
    segment_bytes: 128 * MIB,
    read_records: 1_000_000,
    random_reads: 50_000,
    sealed_segments: 10_000,
    crash_segment_bytes: 64 * MIB,
    crash_newest: [16 * MIB, 64 * MIB, 256 * MIB],
    crash_sealed: [0, 4, 16],
    memory_bytes: [128 * MIB, 512 * MIB],
    scrub_sealed_bytes: 256 * MIB,
    raft_entries: 4_000,
    cluster_records: 10_000,
    cluster_catch_up_records: 200_000,
    cluster_idle_seconds: 5,
    cluster_kills: 5,
};
