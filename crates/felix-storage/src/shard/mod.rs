//! One stream shard: a directory of segments with one writer and any number
//! of concurrent readers.
//!
//! Locking, in the order they may be taken:
//!
//! 1. `writer` — held by appends, rolls, truncation and retention, across
//!    the `write` system call. Readers never take it.
//! 2. `queue` — on-commit appends waiting to be written (see `combine.rs`).
//!    Appenders take it alone, briefly; holders of `writer` take it after.
//! 3. `view` — what readers see (segments, the active segment's limit and
//!    index). Held only to copy a few fields out or to publish an append;
//!    never across a system call, so a slow disk never blocks a reader.
//! 4. `commit` — group commit's state (see `commit.rs`). Never held across
//!    `fdatasync`: the syncing thread (the flusher, or a lone appender)
//!    releases it, so appenders keep writing while a sync is in flight, and
//!    the next sync covers everything they wrote.

mod append;
mod combine;
mod commit;
mod read;
mod replica;
mod retention;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use felix_epochs::{EpochHistory, EpochsFile, LoadStatus};
use felix_format::SegmentExtent;
use felix_io::FileSystem;
use felix_recovery::{Action, IndexCheck, InspectOptions, Note, OpenOptions, open_shard};
use felix_segment::{
    ActiveIndex, ReadLimit, SegmentConfig, SegmentFile, SegmentWriter, SparseIndex,
};

use crate::config::StoreConfig;
use crate::error::{Result, StorageError};
use crate::lock::ShardLock;
use crate::stats::{Counters, ShardStats};

use self::commit::{Commit, CommitState};

pub use append::AppendReceipt;
pub use read::ReadRecord;
pub use replica::ReplicatedRecord;
pub use retention::RetentionOutcome;

/// A sealed segment as readers and retention see it. Its file and index are
/// opened on first read, so an idle shard of many segments costs neither
/// descriptors nor index memory.
#[derive(Debug)]
pub(crate) struct Sealed {
    pub(crate) extent: SegmentExtent,
    /// The newest record's timestamp, when known (set for segments sealed by
    /// this process; read from the last record on demand otherwise).
    pub(crate) max_timestamp_micros: Mutex<Option<u64>>,
    pub(crate) opened: Mutex<Option<Arc<OpenedSegment>>>,
}

/// A sealed segment's descriptor and index, once loaded.
#[derive(Debug)]
pub(crate) struct OpenedSegment {
    pub(crate) file: Arc<SegmentFile>,
    pub(crate) index: SparseIndex,
    /// Whether the index was built from the segment's records (so every
    /// entry is a record boundary), not loaded from its file.
    pub(crate) vouched: bool,
}

/// What readers see; replaced piecewise under the `view` lock.
#[derive(Debug)]
pub(crate) struct View {
    pub(crate) sealed: Vec<Arc<Sealed>>,
    pub(crate) active: Arc<SegmentFile>,
    pub(crate) active_limit: ReadLimit,
    /// The active segment's index, shared with its writer.
    pub(crate) active_index: ActiveIndex,
}

impl View {
    pub(crate) fn base_offset(&self) -> u64 {
        self.sealed
            .first()
            .map_or(self.active.base_offset(), |s| s.extent.base_offset)
    }
}

#[derive(Debug)]
pub(crate) struct WriterState {
    pub(crate) writer: SegmentWriter,
    /// The id the next segment gets; `None` once the active segment's id is
    /// `u64::MAX`, the last there is (a roll is then refused).
    pub(crate) next_segment_id: Option<u64>,
    pub(crate) active_max_timestamp: Option<u64>,
    /// Buffers for writing queued batches, kept between uses.
    pub(crate) spare: combine::Spare,
    /// Bytes appended since the last background writeback was requested.
    pub(crate) unsynced_bytes: u64,
}

impl Drop for Shard {
    /// Stops the flusher thread; nothing is synced here (call
    /// [`Shard::close`] or [`Shard::sync`], or close the store, for that).
    fn drop(&mut self) {
        self.commit.stop();
    }
}

/// One segment of a shard, as [`Shard::segments`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Its id, offsets and length (the active segment's as far as it is
    /// written).
    pub extent: SegmentExtent,
    /// Whether it is the segment appends go to.
    pub active: bool,
}

/// One stream shard. Thread-safe: share it in an `Arc` (as [`crate::Store`]
/// does) and call it from any thread.
///
/// ```
/// use felix_storage::{Record, Shard, StoreConfig};
///
/// let dir = tempfile::tempdir()?;
/// let shard = Shard::open(dir.path(), "doc", StoreConfig::default())?;
/// let receipt = shard.append(&[Record::new(1, "hello"), Record::new(2, "world")])?;
/// assert_eq!((receipt.first_offset, receipt.last_offset), (0, 1));
/// assert_eq!(shard.durable_offset(), 2);
/// let records = shard.read(0, 1 << 20)?;
/// assert_eq!(records[1].payload, "world");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Shard {
    fs: FileSystem,
    label: Arc<str>,
    dir: PathBuf,
    config: StoreConfig,
    writer: Mutex<WriterState>,
    queue: Mutex<combine::Queue>,
    /// Rounds a write-combining leader makes before handing over (a
    /// constant, but tests lower it to make handovers frequent).
    max_lead_rounds: std::sync::atomic::AtomicUsize,
    view: RwLock<View>,
    commit: Arc<Commit>,
    epochs: Mutex<EpochHistory>,
    epochs_file: EpochsFile,
    counters: Counters,
    recovery_time: Duration,
    recovery_actions: Vec<Action>,
    /// Recovery's notes, then one per index a read found stale.
    notes: Mutex<Vec<Note>>,
    /// Set once by [`Shard::close_for_store`]: every later call fails with
    /// [`StorageError::Closed`].
    closed: std::sync::atomic::AtomicBool,
    /// The writer's lock, released when the shard is closed for good.
    lock: Mutex<Option<ShardLock>>,
}

impl Shard {
    /// Opens (creating if needed) the shard directory `dir`, running recovery.
    ///
    /// A new shard's log begins at offset 0; see [`Shard::open_at`].
    pub fn open(dir: &Path, label: &str, config: StoreConfig) -> Result<Self> {
        Self::open_at(dir, label, config, 0)
    }

    /// Opens the shard directory `dir`; if it holds no segments, the log
    /// begins at `initial_offset` (a replica given a shard whose early
    /// history is gone everywhere).
    ///
    /// Recovery runs first: a torn tail is truncated, indexes are rebuilt,
    /// and damage the configured policy may not repair fails the open with
    /// [`StorageError::Recovery`] having modified nothing. The newest segment
    /// is then synced, so everything the shard holds is durable.
    pub fn open_at(
        dir: &Path,
        label: &str,
        config: StoreConfig,
        initial_offset: u64,
    ) -> Result<Self> {
        Self::open_in(&FileSystem::os(), dir, label, config, initial_offset)
    }

    /// [`Shard::open_at`] on the file system `fs`: every file operation of
    /// the shard, for its whole life, goes through it.
    pub fn open_in(
        fs: &FileSystem,
        dir: &Path,
        label: &str,
        config: StoreConfig,
        initial_offset: u64,
    ) -> Result<Self> {
        let started = Instant::now();
        let label: Arc<str> = Arc::from(label);
        let span = tracing::info_span!("shard_open", shard = %label);
        let _entered = span.enter();
        create_dir(fs, dir, &label)?;
        let lock = ShardLock::acquire(fs, dir)?;
        let options = OpenOptions {
            inspect: InspectOptions {
                index_spacing_bytes: config.index_spacing_bytes,
                full_verify: false,
                // Reads rebuild an index whose entry misleads them, so an
                // open does not read every sealed segment to check them all.
                index_check: IndexCheck::LastEntry,
            },
            repair_policy: config.repair_policy,
            use_clean_shutdown: true,
        };
        let recovered = open_shard(fs, dir, &label, &options, &lock)?;
        for finding in &recovered.inspection.findings {
            tracing::warn!(finding = %finding, "recovery finding");
        }
        for action in &recovered.actions {
            tracing::warn!(action = %action, "recovery action");
        }
        let mut index_write_failures = 0;
        for note in &recovered.inspection.notes {
            if matches!(note, Note::IndexNotWritten { .. }) {
                index_write_failures += 1;
                tracing::warn!(note = %note, "recovery note");
            } else {
                tracing::info!(note = %note, "recovery note");
            }
        }
        let segment_config = segment_config(&config);
        let seg_err = |source| StorageError::Segment {
            shard: Arc::clone(&label),
            source,
        };
        let sealed: Vec<Arc<Sealed>> = recovered
            .sealed
            .iter()
            .map(|&extent| {
                Arc::new(Sealed {
                    extent,
                    max_timestamp_micros: Mutex::new(None),
                    opened: Mutex::new(None),
                })
            })
            .collect();
        let (writer, next_segment_id) = match recovered.newest {
            Some(newest) => {
                let id = newest.file.id();
                let writer = SegmentWriter::resume(
                    newest.file,
                    newest.next_offset,
                    newest.len,
                    newest.index,
                    segment_config,
                )
                .map_err(seg_err)?;
                // What recovery left may still be only in the page cache (a
                // process crash keeps it there); syncing it once makes
                // `durable_offset` true from the start.
                writer.sync_handle().sync_data().map_err(seg_err)?;
                (writer, id.checked_add(1))
            }
            None => {
                let writer = SegmentWriter::create(
                    fs,
                    dir,
                    0,
                    initial_offset,
                    segment_config,
                    Arc::clone(&label),
                )
                .map_err(seg_err)?;
                (writer, Some(1))
            }
        };
        if !writer.index_persisted() {
            // Logged by the writer; served from memory, written at the next
            // roll or close.
            index_write_failures += 1;
        }
        let next_offset = writer.next_offset();
        let epochs_file = EpochsFile::new(fs, dir);
        let loaded = epochs_file.load();
        if let LoadStatus::Discarded(reason) = &loaded.status {
            tracing::warn!(reason = %reason, "epochs file unusable; generation history reads as empty");
        }
        let mut history = loaded.history;
        // A history that runs past the log end describes records that are
        // gone (a truncation the crash interrupted): cut it back. A
        // generation that begins exactly at the log end is a leader that has
        // not written yet, and stays.
        if history.truncate_from(next_offset.saturating_add(1)) > 0 {
            epochs_file
                .store(&history)
                .map_err(|source| StorageError::Epochs {
                    shard: Arc::clone(&label),
                    source,
                })?;
        }
        let view = View {
            sealed,
            active: Arc::clone(writer.segment()),
            active_limit: writer.read_limit(),
            active_index: writer.active_index(),
        };
        let commit = Arc::new(Commit::new(
            Arc::clone(&label),
            next_offset,
            writer.sync_handle(),
        ));
        tracing::info!(
            base_offset = view.base_offset(),
            next_offset,
            segments = view.sealed.len() + 1,
            "shard opened"
        );
        Ok(Self {
            fs: fs.clone(),
            dir: dir.to_path_buf(),
            config,
            writer: Mutex::new(WriterState {
                writer,
                next_segment_id,
                active_max_timestamp: None,
                spare: combine::Spare::default(),
                unsynced_bytes: 0,
            }),
            queue: Mutex::new(combine::Queue::new(next_offset)),
            max_lead_rounds: std::sync::atomic::AtomicUsize::new(combine::MAX_LEAD_ROUNDS),
            view: RwLock::new(view),
            commit,
            epochs: Mutex::new(history),
            epochs_file,
            counters: Counters {
                index_write_failures: index_write_failures.into(),
                ..Counters::default()
            },
            recovery_time: started.elapsed(),
            recovery_actions: recovered.actions,
            notes: Mutex::new(recovered.inspection.notes),
            label,
            closed: std::sync::atomic::AtomicBool::new(false),
            lock: Mutex::new(Some(lock)),
        })
    }

    /// The shard's label (its directory name, normally).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The shard directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The oldest offset still held.
    pub fn base_offset(&self) -> u64 {
        self.view().base_offset()
    }

    /// The offset the next appended record will get.
    pub fn next_offset(&self) -> u64 {
        self.view().active_limit.next_offset
    }

    /// Exclusive bound of what a crash cannot lose: every record below it
    /// has been covered by a successful `fdatasync`.
    pub fn durable_offset(&self) -> u64 {
        self.commit_state().durable
    }

    /// The failure that stopped writes, if any.
    pub fn poisoned(&self) -> Option<&Arc<StorageError>> {
        self.commit.poisoned()
    }

    /// Number of segments (sealed and active).
    pub fn segment_count(&self) -> usize {
        self.view().sealed.len() + 1
    }

    /// The shard's segments in offset order, the active one last.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        let view = self.view();
        let mut out: Vec<SegmentInfo> = view
            .sealed
            .iter()
            .map(|s| SegmentInfo {
                extent: s.extent,
                active: false,
            })
            .collect();
        out.push(SegmentInfo {
            extent: SegmentExtent {
                id: view.active.id(),
                base_offset: view.active.base_offset(),
                next_offset: view.active_limit.next_offset,
                len: view.active_limit.end_position,
            },
            active: true,
        });
        out
    }

    /// A snapshot of the shard's counters.
    pub fn stats(&self) -> ShardStats {
        let syncs = (
            self.commit.syncs.load(Relaxed),
            self.commit.synced_appends.load(Relaxed),
        );
        let notes = self
            .notes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        self.counters.snapshot(
            self.recovery_time,
            self.recovery_actions.clone(),
            notes,
            syncs,
        )
    }

    /// Records a fact about the shard that is not damage (see
    /// [`ShardStats::notes`]).
    pub(crate) fn add_note(&self, note: Note) {
        self.notes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(note);
    }

    fn view(&self) -> RwLockReadGuard<'_, View> {
        // A panic while holding the lock cannot leave the view half-updated
        // in a way readers could misuse (each update is a few assignments),
        // so a poisoned lock is recovered rather than propagated.
        self.view
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn view_mut(&self) -> RwLockWriteGuard<'_, View> {
        self.view
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn commit_state(&self) -> MutexGuard<'_, CommitState> {
        self.commit.lock()
    }

    fn segment_error(&self, source: felix_segment::SegmentError) -> StorageError {
        StorageError::Segment {
            shard: Arc::clone(&self.label),
            source,
        }
    }
}

pub(crate) fn segment_config(config: &StoreConfig) -> SegmentConfig {
    SegmentConfig {
        index_spacing_bytes: config.index_spacing_bytes,
        preallocate_bytes: config.preallocate.then_some(config.segment_size_bytes),
    }
}

/// Creates the shard directory, and any missing ancestor, durably: every
/// new directory's entry is synced into its parent before a record can be
/// acknowledged inside it.
fn create_dir(fs: &FileSystem, dir: &Path, label: &Arc<str>) -> Result<()> {
    felix_segment::fs::create_dir_all_durable(fs, dir).map_err(|source| StorageError::Segment {
        shard: Arc::clone(label),
        source: source.into(),
    })
}
