//! Issue row 11: `EpochHistory`, `LeaderAnswer`, `Recorded`, `FileSystem`
//! and `MAX_PAYLOAD_BYTES` appeared in `Shard`'s signatures but were not
//! re-exported, so a broker needed three more felix crates to name them.
//! Every type a public signature of felix-storage uses is named here
//! through felix-storage alone (this file uses no other felix crate),
//! down to a file system of one's own: `FileSystem::new` takes a `Vfs`,
//! whose methods name `VfsFile`, `OpenMode`, `DirEntry`, `FileType` and
//! `LockGuard`.

#![allow(dead_code, clippy::type_complexity)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use felix_storage::{
    Action, AppendFuture, AppendReceipt, Clock, ConfigError, ConfigField, Divergence, Durability,
    DurableFuture, EpochEntry, EpochHistory, FileSystem, HistoryError, LeaderAnswer,
    MAX_PAYLOAD_BYTES, Note, Offsets, Preallocation, ReadBound, ReadRecord, Record, Recorded,
    RecoveryError, ReplicatedRecord, Retention, RetentionOutcome, SegmentError, SegmentInfo, Shard,
    ShardId, ShardKey, ShardLock, ShardOptions, ShardStats, StorageError, Store, StoreConfig,
    SystemClock, Tail, TailFuture,
};
use felix_storage::{DirEntry, FileType, LockGuard, NotRegularFile, OpenMode, OsFs, Vfs, VfsFile};

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
        felix_storage::SideFileError,
        felix_storage::LockError,
        felix_storage::RepairPolicy,
        felix_storage::SegmentExtent,
        felix_storage::RepairClass,
        felix_storage::NotRegularFile,
        felix_storage::Bytes,
    )> = None;
    let _: [usize; 3] = [
        felix_storage::MAX_EPOCH_ENTRIES,
        felix_storage::MAX_KEY_PART_BYTES,
        felix_storage::MAX_KEY_FILE_BODY_LEN,
    ];
    let _: fn(&std::io::Error) -> Option<NotRegularFile> = felix_storage::not_regular_file;
    let _: fn(&FileSystem, &Path) -> std::io::Result<()> = felix_storage::remove_dir_all;
    let record = Record::new(0, vec![0u8; 4]);
    assert!(record.payload.len() <= MAX_PAYLOAD_BYTES as usize);
}

/// The real file system, counting opens.
#[derive(Debug, Default)]
struct CountingFs {
    opens: Arc<AtomicU64>,
}

impl Vfs for CountingFs {
    fn open(&self, path: &Path, mode: OpenMode) -> std::io::Result<Arc<dyn VfsFile>> {
        self.opens.fetch_add(1, Relaxed);
        OsFs.open(path, mode)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        OsFs.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        OsFs.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> std::io::Result<()> {
        OsFs.remove_dir(path)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        OsFs.sync_dir(dir)
    }
    fn list_dir(&self, dir: &Path) -> std::io::Result<Vec<DirEntry>> {
        OsFs.list_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        OsFs.create_dir_all(dir)
    }
    fn is_dir(&self, path: &Path) -> bool {
        OsFs.is_dir(path)
    }
    fn entry_type(&self, path: &Path) -> std::io::Result<Option<FileType>> {
        OsFs.entry_type(path)
    }
    fn try_lock(&self, path: &Path) -> std::io::Result<Option<LockGuard>> {
        OsFs.try_lock(path)
    }
    fn try_lock_dir(&self, dir: &Path) -> std::io::Result<Option<LockGuard>> {
        OsFs.try_lock_dir(dir)
    }
}

#[test]
fn a_vfs_written_against_felix_storage_alone_serves_a_shard() {
    let dir = tempfile::tempdir().unwrap();
    let counting = CountingFs::default();
    let opens = Arc::clone(&counting.opens);
    let shard = Shard::options(dir.path())
        .file_system(FileSystem::new(counting))
        .open()
        .unwrap();
    shard.append(&[Record::new(1, "a")]).unwrap();
    shard.close().unwrap();
    assert!(
        opens.load(Relaxed) >= 1,
        "the shard's files were opened through it"
    );
}
