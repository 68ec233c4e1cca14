//! What an open does once the directory is locked, in named steps: run
//! recovery ([`recover_directory`]), resume or create the writer
//! ([`resume_writer`]), bring the generation history in line with the log
//! ([`load_history`]), and assemble the shard's parts ([`assemble`]).
//! `ShardOptions::open` checks the configuration, creates and locks the
//! directory, and calls [`recover`]; it starts the shard's threads after.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use felix_epochs::{EpochHistory, EpochsFile, LoadStatus, Loaded};
use felix_io::{DirEntry, FileSystem};
use felix_recovery::{
    IndexCheck, InspectOptions, Note, OpenHints, OpenOptions, RecoveredShard, StoredKey,
    open_shard_with,
};
use felix_segment::{ReadBuffers, SegmentError, SegmentWriter};

use super::commit::Commit;
use super::core::Core;
use super::generations::Generations;
use super::log::{CleanShutdown, Log, Sealed, Spare, View, WriterState, segment_config};
use super::shared::{Opened, Shared};
use crate::clock::Clock;
use crate::config::StoreConfig;
use crate::error::{Result, StorageError};
use crate::lock::ShardLock;
use crate::metrics::ShardMetrics;
use crate::pool::SyncPool;
use crate::stats::Counters;

/// What an open brings to recovery, besides the locked directory.
pub(super) struct Recover {
    pub(super) label: Arc<str>,
    pub(super) dir: PathBuf,
    pub(super) config: StoreConfig,
    pub(super) fs: FileSystem,
    pub(super) initial_offset: u64,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) read_buffers: Option<Arc<ReadBuffers>>,
    pub(super) keep_clean_shutdown: bool,
    /// The key file as the store read it, if it did.
    pub(super) key: Option<StoredKey>,
}

/// Recovery's outcome, logged, with the index files it could not write.
struct Recovered {
    shard: RecoveredShard,
    index_write_failures: u64,
}

/// Recovery, then the shard's state, with its directory locked.
pub(super) fn recover(
    mut open: Recover,
    held: &FileSystem,
    lock: ShardLock,
    listing: Option<Vec<DirEntry>>,
    pool: SyncPool,
) -> Result<Core> {
    let started = Instant::now();
    let key = open.key.take();
    let mut recovered = recover_directory(&open, key, held, &lock, listing)?;
    let (writer, next_segment_id) = resume_writer(&open, &mut recovered.shard)?;
    if !writer.index_persisted() {
        // Logged by the writer; served from memory, written at the next
        // roll or close.
        recovered.index_write_failures += 1;
    }
    let log_start = recovered.shard.start_offset.unwrap_or(0);
    let (history, epochs_file) =
        load_history(&open, &recovered.shard, writer.next_offset(), log_start)?;
    Ok(assemble(Parts {
        open,
        recovered,
        writer,
        next_segment_id,
        history,
        epochs_file,
        lock,
        pool,
        started,
    }))
}

/// Runs recovery on the directory and logs what it found and did.
fn recover_directory(
    open: &Recover,
    key: Option<StoredKey>,
    held: &FileSystem,
    lock: &ShardLock,
    listing: Option<Vec<DirEntry>>,
) -> Result<Recovered> {
    let options = OpenOptions {
        inspect: InspectOptions {
            index_spacing_bytes: open.config.index_spacing_bytes,
            full_verify: false,
            // Reads rebuild an index whose entry misleads them, so an
            // open does not read every sealed segment to check them all.
            index_check: IndexCheck::LastEntry,
        },
        repair_policy: open.config.repair_policy,
        use_clean_shutdown: true,
        keep_clean_shutdown: open.keep_clean_shutdown,
    };
    let hints = OpenHints { key, listing };
    let shard = open_shard_with(held, &open.dir, &open.label, &options, lock, hints)?;
    for finding in &shard.inspection.findings {
        tracing::warn!(finding = %finding, "recovery finding");
    }
    for action in &shard.actions {
        tracing::warn!(action = %action, "recovery action");
    }
    let mut index_write_failures = 0;
    for note in &shard.inspection.notes {
        if matches!(note, Note::IndexNotWritten { .. }) {
            index_write_failures += 1;
            tracing::warn!(note = %note, "recovery note");
        } else {
            tracing::info!(note = %note, "recovery note");
        }
    }
    Ok(Recovered {
        shard,
        index_write_failures,
    })
}

/// The writer at the log's end: the newest segment resumed (and synced,
/// unless a clean close left it; taken out of `recovered`), or a first
/// segment created. Also the id the next segment gets (`None` once the
/// last id is in use).
fn resume_writer(
    open: &Recover,
    recovered: &mut RecoveredShard,
) -> Result<(SegmentWriter, Option<u64>)> {
    let segment_config = segment_config(&open.config);
    let seg_err = |source: SegmentError| StorageError::Segment {
        shard: Arc::clone(&open.label),
        source,
    };
    match recovered.newest.take() {
        Some(newest) => {
            let id = newest.file.id();
            let writer = SegmentWriter::resume_with_index_file(
                newest.file,
                newest.next_offset,
                newest.len,
                newest.index,
                newest.time_index,
                segment_config,
                newest.index_file,
            )
            .map_err(seg_err)?;
            // What recovery left may still be only in the page cache (a
            // process crash keeps it there); syncing it once makes
            // `offsets().durable` true from the start. Not needed when the
            // shard is exactly as a clean close left it: that close
            // made all of it durable.
            if !recovered.as_closed {
                writer.sync_handle().sync_data().map_err(seg_err)?;
            }
            Ok((writer, id.checked_add(1)))
        }
        None => {
            // A new shard, or one whose segments all lay below its
            // recorded log start (a reset a crash cut short): the first
            // segment begins at the start, with an id never used.
            let Some(id) = recovered.next_segment_id else {
                return Err(StorageError::SegmentIdsExhausted {
                    shard: Arc::clone(&open.label),
                    last_id: u64::MAX,
                });
            };
            let base = recovered.start_offset.unwrap_or(open.initial_offset);
            let writer = SegmentWriter::create(
                &open.fs,
                &open.dir,
                id,
                base,
                segment_config,
                Arc::clone(&open.label),
            )
            .map_err(seg_err)?;
            Ok((writer, id.checked_add(1)))
        }
    }
}

/// The generation history from the epochs file, cut to the log that is
/// there: generations past its end (a truncation the crash interrupted)
/// and below its start go, durably.
fn load_history(
    open: &Recover,
    recovered: &RecoveredShard,
    next_offset: u64,
    log_start: u64,
) -> Result<(EpochHistory, EpochsFile)> {
    let epochs_file = EpochsFile::new(&open.fs, &open.dir);
    // The listing saw neither the file nor its temporary: nothing to
    // read or remove (the lock keeps every other writer out).
    let loaded = match recovered.epochs_absent {
        true => Loaded::absent(),
        false => epochs_file.load(),
    };
    if let LoadStatus::Discarded(reason) = &loaded.status {
        tracing::warn!(reason = %reason, "epochs file unusable; generation history reads as empty");
    }
    let mut history = loaded.history;
    // A history that runs past the log end describes records that are
    // gone (a truncation the crash interrupted): cut it back. A
    // generation that begins exactly at the log end is a leader that has
    // not written yet, and stays.
    // Generations below the log start cannot be where two replicas part.
    let cut_above = history.truncate_from(next_offset.saturating_add(1));
    let pruned_below = history.truncate_before(log_start.min(next_offset));
    if cut_above + pruned_below > 0 {
        epochs_file
            .store(&history)
            .map_err(|source| StorageError::Epochs {
                shard: Arc::clone(&open.label),
                source,
            })?;
    }
    Ok((history, epochs_file))
}

/// What the steps before [`assemble`] produced.
struct Parts {
    open: Recover,
    recovered: Recovered,
    /// The resumed (or new) active segment's writer.
    writer: SegmentWriter,
    /// The id the next segment gets; `None` once the active segment's id
    /// is the last there is.
    next_segment_id: Option<u64>,
    history: EpochHistory,
    epochs_file: EpochsFile,
    lock: ShardLock,
    pool: SyncPool,
    /// When the open began, for [`Opened::time`].
    started: Instant,
}

/// The shard's parts, put together: the log (writer and readers' view),
/// group commit, the generations, and what the open learned.
fn assemble(parts: Parts) -> Core {
    let Parts {
        open,
        recovered,
        writer,
        next_segment_id,
        history,
        epochs_file,
        lock,
        pool,
        started,
    } = parts;
    let Recover {
        label,
        dir,
        config,
        fs,
        clock,
        read_buffers,
        ..
    } = open;
    let Recovered {
        shard: recovered,
        index_write_failures,
    } = recovered;
    // Under a trusted clean-shutdown record the sealed segments' time
    // index files are the ones their shard wrote (see `log/time.rs`).
    let trusted = recovered.clean_shutdown_trusted;
    let view = View {
        sealed: recovered
            .sealed
            .iter()
            .map(|&extent| Arc::new(Sealed::new(extent, trusted)))
            .collect(),
        active: Arc::clone(writer.segment()),
        active_limit: writer.read_limit(),
        active_index: writer.active_index(),
        active_time_index: writer.active_time_index(),
        active_max_timestamp: writer.max_timestamp_micros(),
        log_start: recovered.start_offset.unwrap_or(0),
    };
    // The kept record's newest segment is the one found, so a close
    // with nothing appended need not write it again.
    let record_newest =
        (recovered.clean_shutdown_kept && recovered.as_closed).then(|| view.active_extent());
    let next_offset = writer.next_offset();
    let metrics = ShardMetrics::new(&label, config.durability);
    let commit = Commit::new(
        Arc::clone(&label),
        config.durability,
        next_offset,
        writer.sync_handle(),
        pool,
        config.max_appends_in_flight,
        metrics.clone(),
    );
    tracing::info!(
        base_offset = view.base_offset(),
        next_offset,
        segments = view.sealed.len() + 1,
        "shard opened"
    );
    let shared = Arc::new(Shared::new(
        fs,
        Arc::clone(&label),
        dir,
        config,
        clock,
        read_buffers.unwrap_or_default(),
        Counters {
            index_write_failures: index_write_failures.into(),
            ..Counters::default()
        },
        metrics,
        Opened {
            time: started.elapsed(),
            actions: recovered.actions,
            notes: recovered.inspection.notes,
        },
    ));
    let generations = Generations::new(history, epochs_file, label, Arc::clone(&commit));
    let log = Log::new(
        Arc::clone(&shared),
        Arc::clone(&commit),
        WriterState {
            writer,
            next_segment_id,
            spare: Spare::default(),
            unsynced_bytes: 0,
        },
        view,
        CleanShutdown::new(lock, recovered.clean_shutdown_kept, record_newest),
    );
    Core::new(shared, log, commit, generations)
}
