//! Issue row 11: `EpochHistory`, `LeaderAnswer`, `Recorded`, `FileSystem`
//! and `MAX_PAYLOAD_BYTES` appeared in `Shard`'s signatures but were not
//! re-exported, so a broker needed three more felix crates to name them.
//! Every type a public signature of felix-storage uses is named here
//! through felix-storage alone (this file uses no other felix crate).

#![allow(dead_code, clippy::type_complexity)]

use std::sync::Arc;

use felix_storage::{
    Action, AppendFuture, AppendReceipt, Clock, ConfigError, ConfigField, Divergence, Durability,
    DurableFuture, EpochEntry, EpochHistory, FileSystem, HistoryError, LeaderAnswer,
    MAX_PAYLOAD_BYTES, Note, Offsets, Preallocation, ReadBound, ReadRecord, Record, Recorded,
    RecoveryError, ReplicatedRecord, Retention, RetentionOutcome, SegmentError, SegmentInfo, Shard,
    ShardId, ShardKey, ShardLock, ShardOptions, ShardStats, StorageError, Store, StoreConfig,
    SystemClock, Tail, TailFuture,
};

/// The signatures, spelled out: this compiles only if every type is there.
struct Signatures {
    options: fn(&str) -> ShardOptions,
    open: fn(ShardOptions) -> Result<Shard, StorageError>,
    file_system: fn(ShardOptions, FileSystem) -> ShardOptions,
    clock: fn(ShardOptions, Arc<dyn Clock>) -> ShardOptions,
    append: fn(&Shard, &[Record]) -> Result<AppendReceipt, StorageError>,
    read_bounded: fn(&Shard, u64, u64, ReadBound) -> Result<Vec<ReadRecord>, StorageError>,
    wait: fn(&Shard, u64, ReadBound, std::time::Duration) -> Result<Tail, StorageError>,
    offsets: fn(&Shard) -> Offsets,
    segments: fn(&Shard) -> Vec<SegmentInfo>,
    stats: fn(&Shard) -> ShardStats,
    retention: fn(&Shard) -> Result<RetentionOutcome, StorageError>,
    begin_generation: fn(&Shard, u64) -> Result<Recorded, StorageError>,
    generations: fn(&Shard) -> EpochHistory,
    end_offset_for: fn(&Shard, u64) -> Option<LeaderAnswer>,
    reconcile: fn(&Shard, LeaderAnswer) -> Result<Divergence, StorageError>,
    read_replicated: fn(&Shard, u64, u64, ReadBound) -> Result<Vec<ReplicatedRecord>, StorageError>,
    store_shard: fn(&Store, &ShardKey) -> Result<Arc<Shard>, StorageError>,
    store_keys: fn(&Store) -> Result<Vec<ShardId>, StorageError>,
    validate: fn(&StoreConfig) -> Result<(), ConfigError>,
    append_async: fn(&Shard, &[Record]) -> Result<AppendFuture, StorageError>,
    wait_durable_async: fn(&Shard, u64) -> DurableFuture,
    wait_readable_async: fn(&Shard, u64, ReadBound) -> TailFuture,
}

#[test]
fn every_type_in_a_public_signature_is_reachable_from_felix_storage() {
    let _ = Signatures {
        options: |dir| Shard::options(dir),
        open: ShardOptions::open,
        file_system: ShardOptions::file_system,
        clock: ShardOptions::clock,
        append: Shard::append,
        read_bounded: Shard::read_bounded,
        wait: Shard::wait_readable,
        offsets: Shard::offsets,
        segments: Shard::segments,
        stats: Shard::stats,
        retention: Shard::apply_retention,
        begin_generation: Shard::begin_generation,
        generations: Shard::generations,
        end_offset_for: Shard::end_offset_for,
        reconcile: Shard::reconcile,
        read_replicated: Shard::read_replicated,
        store_shard: Store::open_shard,
        store_keys: Store::keys,
        validate: StoreConfig::validate,
        append_async: Shard::append_async,
        wait_durable_async: Shard::wait_durable_async,
        wait_readable_async: Shard::wait_readable_async,
    };
    // Types that appear inside other public types.
    let _: Option<(
        Action,
        Note,
        RecoveryError,
        SegmentError,
        HistoryError,
        EpochEntry,
        ConfigField,
        Durability,
        Preallocation,
        Retention,
        ShardLock,
        SystemClock,
        felix_storage::IoError,
        felix_storage::KeyFileDecodeError,
        felix_storage::LockError,
        felix_storage::RepairPolicy,
        felix_storage::SegmentExtent,
    )> = None;
    let record = Record::new(0, vec![0u8; 4]);
    assert!(record.payload.len() <= MAX_PAYLOAD_BYTES as usize);
}
