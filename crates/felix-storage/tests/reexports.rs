//! Issue row 11: `EpochHistory`, `LeaderAnswer`, `Recorded`, `FileSystem`
//! and `MAX_PAYLOAD_BYTES` appeared in `Shard`'s signatures but were not
//! re-exported, so a broker needed three more felix crates to name them.
//! Every type a public signature of felix-storage uses is named here
//! through felix-storage alone (this file uses no other felix crate),
//! down to a file system of one's own: `FileSystem::new` takes a `Vfs`,
//! whose methods name `VfsFile`, `OpenMode`, `DirEntry`, `FileType` and
//! `LockGuard`. The names a broker's own signatures need are at the top
//! level; the rest in `limits`, `lock`, `recovery`, `io`, `epochs` and
//! `key_file`.

#![allow(dead_code, clippy::type_complexity)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use felix_storage::epochs::{
    Divergence, EpochEntry, EpochHistory, HistoryError, LeaderAnswer, Recorded,
};
use felix_storage::io::{
    DirEntry, FileSystem, FileType, LockGuard, NotRegularFile, OpenMode, OsFs, Vfs, VfsFile,
};
use felix_storage::limits::MAX_PAYLOAD_BYTES;
use felix_storage::lock::ShardLock;
use felix_storage::recovery::{Action, Note, RecoveryError, SegmentError};
use felix_storage::{
    Append, AppendFuture, AppendReceipt, Clock, ConfigError, ConfigField, Durability,
    DurableFuture, DurableWait, ErrorKind, Offsets, Preallocation, ReadBound, ReadRecord, Record,
    ReplicatedRecord, Retention, RetentionOutcome, SegmentInfo, Shard, ShardId, ShardKey,
    ShardOptions, ShardStats, StorageError, Store, StoreConfig, SystemClock, Tail, TailFuture,
    TailWait,
};

/// The signatures, spelled out: this compiles only if every type is there.
struct Signatures {
    options: fn(&str) -> ShardOptions,
    open: fn(ShardOptions) -> Result<Shard, StorageError>,
    file_system: fn(ShardOptions, FileSystem) -> ShardOptions,
    clock: fn(ShardOptions, Arc<dyn Clock>) -> ShardOptions,
    append: for<'a> fn(&'a Shard, &'a [Record]) -> Append<'a>,
    append_wait: fn(Append<'_>) -> Result<AppendReceipt, StorageError>,
    append_submit: fn(Append<'_>) -> Result<AppendFuture, StorageError>,
    append_future_wait: fn(AppendFuture) -> Result<AppendReceipt, StorageError>,
    read: fn(&Shard, u64, u64, ReadBound) -> Result<Vec<ReadRecord>, StorageError>,
    wait: fn(&Shard, u64, ReadBound) -> TailWait<'_>,
    wait_timeout: fn(TailWait<'_>, std::time::Duration) -> Result<Tail, StorageError>,
    wait_durable: fn(&Shard, u64) -> DurableWait<'_>,
    wait_durable_wait: fn(DurableWait<'_>) -> Result<(), StorageError>,
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
    durable_future: fn(DurableWait<'_>) -> DurableFuture,
    tail_future: fn(TailWait<'_>) -> TailFuture,
    kind: fn(&StorageError) -> ErrorKind,
}

#[test]
fn every_type_in_a_public_signature_is_reachable_from_felix_storage() {
    let _ = Signatures {
        options: |dir| Shard::options(dir),
        open: ShardOptions::open,
        file_system: ShardOptions::file_system,
        clock: ShardOptions::clock,
        append: Shard::append,
        append_wait: |append| append.wait(),
        append_submit: |append| append.submit(),
        append_future_wait: AppendFuture::wait,
        read: Shard::read,
        wait: Shard::wait_readable,
        wait_timeout: |wait, timeout| wait.wait_timeout(timeout),
        wait_durable: Shard::wait_durable,
        wait_durable_wait: |wait| wait.wait(),
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
        durable_future: |wait| wait.into_future(),
        tail_future: |wait| wait.into_future(),
        kind: StorageError::kind,
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
        felix_storage::io::IoError,
        felix_storage::key_file::SideFileError,
        felix_storage::key_file::SideFileDefect,
        felix_storage::key_file::SideFileKind,
        felix_storage::key_file::KeyPart,
        felix_storage::key_file::KeyPartProblem,
        felix_storage::recovery::CorruptionKind,
        felix_storage::recovery::CorruptionSite,
        felix_storage::recovery::ScrubDamage,
        felix_storage::recovery::SegmentScrub,
        felix_storage::lock::StoreLock,
        felix_storage::MovedBy,
        felix_storage::TimestampHit,
        felix_storage::CopyProblem,
        felix_storage::lock::LockError,
        felix_storage::recovery::RepairPolicy,
        felix_storage::recovery::SegmentExtent,
        felix_storage::recovery::RepairClass,
        felix_storage::io::NotRegularFile,
        felix_storage::Bytes,
    )> = None;
    // What recovery's error, notes and findings hold, the segment error's
    // index entry, and the side-file error's parts and layout.
    let _: Option<(
        (
            felix_storage::recovery::Finding,
            felix_storage::recovery::FindingContext,
            felix_storage::recovery::DamageLocation,
            felix_storage::recovery::UnwrittenBlocks,
            felix_storage::recovery::IndexProblem,
            felix_storage::recovery::CleanShutdownUnused,
            felix_storage::recovery::TemporaryKind,
            felix_storage::recovery::SideFileProblem,
            felix_storage::recovery::TimeIndexProblem,
            felix_storage::recovery::TimeIndexHeader,
            felix_storage::recovery::IndexEntry,
        ),
        (
            felix_storage::recovery::IndexLoadError,
            felix_storage::recovery::TimeIndexLoadError,
            felix_storage::key_file::EmbeddedError,
            felix_storage::key_file::SideFileUnread,
            felix_storage::key_file::CleanEntryProblem,
            &'static felix_storage::key_file::SideFileLayout,
            felix_storage::key_file::SideFileVersion,
            felix_storage::key_file::SideFileBody,
            felix_storage::key_file::SideFileChecksum,
            felix_storage::key_file::SideFileHeader<'static>,
            felix_storage::key_file::SideFileFrame<'static>,
        ),
    )> = None;
    // Where some are named: the findings an open refused over, a stale
    // index's entry, a side-file error's embedded file and a kind's layout,
    // reached through felix-storage's names alone.
    let _: fn(&RecoveryError) -> Option<&felix_storage::recovery::Finding> = |err| match err {
        RecoveryError::Unrepairable { blocking, .. } => blocking.first(),
        _ => None,
    };
    let _: fn(&SegmentError) -> Option<felix_storage::recovery::IndexEntry> = |err| match err {
        SegmentError::StaleIndex { entry, .. } => Some(*entry),
        _ => None,
    };
    let _: fn(
        &felix_storage::key_file::SideFileError,
    ) -> Option<felix_storage::key_file::EmbeddedError> = |err| err.embedded;
    let _: fn(
        felix_storage::key_file::SideFileKind,
    ) -> &'static felix_storage::key_file::SideFileLayout =
        felix_storage::key_file::SideFileKind::layout;
    let _: fn(
        felix_storage::key_file::SideFileKind,
        felix_storage::key_file::SideFileUnread,
    ) -> &'static str = felix_storage::key_file::SideFileKind::unread_name;
    let _: [usize; 3] = [
        felix_storage::epochs::MAX_EPOCH_ENTRIES,
        felix_storage::key_file::MAX_KEY_PART_BYTES,
        felix_storage::key_file::MAX_KEY_FILE_BODY_LEN,
    ];
    let _: fn(&std::io::Error) -> Option<NotRegularFile> = felix_storage::io::not_regular_file;
    let _: fn(&FileSystem, &Path) -> std::io::Result<()> = felix_storage::io::remove_dir_all;
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
    shard.append(&[Record::new(1, "a")]).wait().unwrap();
    shard.close().unwrap();
    assert!(
        opens.load(Relaxed) >= 1,
        "the shard's files were opened through it"
    );
}
