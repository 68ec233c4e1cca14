//! The flags `write` and `bench` share with the reference implementation's
//! log tool, so one script can drive either binary, and what they share at
//! run time: opening the shard and printing acks.
//!
//! An ack always means durable: whatever the fsync policy, a batch is
//! acknowledged only once `Shard::offsets().durable` covers it. With
//! `on_commit` that is when the append returns; with `periodic` after the
//! next background sync; with `none` only at a clean shutdown's final sync
//! (or never, without `--clean-shutdown`).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use felix_storage::{AppendReceipt, Durability, Preallocation, Shard, ShardStats, StoreConfig};
use serde_json::json;

use crate::error::CliError;
use crate::output::Out;
use crate::target::shard_dir;

/// When appends are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Fsync {
    /// Never by the writer: the page cache only, until a clean shutdown.
    #[value(name = "none")]
    None,
    /// A background thread syncs every `--fsync-interval-ms`.
    #[value(name = "periodic")]
    Periodic,
    /// Each append returns once an fdatasync covers it (group commit).
    #[value(name = "on_commit")]
    OnCommit,
}

impl Fsync {
    /// The name as the flag and the JSON lines spell it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Periodic => "periodic",
            Self::OnCommit => "on_commit",
        }
    }
}

/// The most payload bytes a command's appends may hold in memory at once:
/// 256 MiB. `write` builds each batch (`--batch` records of
/// `--payload-bytes`) before appending it, and the append encodes it into
/// one buffer for its one `write`, so a batch costs about twice its payload;
/// `bench` holds one batch per thread (`--concurrency`) and a pool of
/// payloads sized to fit the same bound. Anything over it is refused, with
/// a message, before anything is allocated: an allocation that fails aborts
/// the process.
pub(crate) const MAX_HELD_PAYLOAD_BYTES: u64 = 256 * 1024 * 1024;

/// Flags shared by `write` and `bench`, named as the reference tool names
/// them.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LogArgs {
    /// The shard directory itself (created if missing).
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// When appends become durable.
    #[arg(long, value_enum, default_value_t = Fsync::OnCommit)]
    pub(crate) fsync: Fsync,
    /// Interval of `--fsync periodic`.
    #[arg(long, default_value_t = 50)]
    pub(crate) fsync_interval_ms: u64,
    /// Roll to a new segment before one would grow past this size.
    #[arg(long, default_value_t = StoreConfig::default().segment_size_bytes)]
    pub(crate) segment_bytes: u64,
    /// Spacing of sparse index entries.
    #[arg(long, default_value_t = StoreConfig::default().index_spacing_bytes)]
    pub(crate) index_spacing_bytes: u64,
    /// Do not reserve disk space ahead of the writes.
    #[arg(long)]
    pub(crate) no_preallocate: bool,
    /// Records to append.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) records: u64,
    /// Payload size of every record.
    #[arg(long, default_value_t = 100)]
    pub(crate) payload_bytes: usize,
    /// Records per append call. `--batch` × `--payload-bytes` (times
    /// `--concurrency` for `bench`) may be at most 256 MiB, the payload a
    /// command holds in memory at once.
    #[arg(long, default_value_t = 1)]
    pub(crate) batch: u64,
    /// Print `{"event":"ack","first_offset":A,"last_offset":B}` for every
    /// batch once it is durable.
    #[arg(long)]
    pub(crate) report_acks: bool,
    /// Sync and close the shard at the end (printing `{"event":"closed"}`);
    /// without it the process exits without a final sync, like a crash
    /// minus the kill.
    #[arg(long)]
    pub(crate) clean_shutdown: bool,
}

impl LogArgs {
    /// Rejects values that cannot work, before anything is opened.
    pub(crate) fn check(&self) -> Result<(), CliError> {
        if self.batch == 0 {
            return Err(CliError::Usage("--batch must be at least 1".into()));
        }
        if self.fsync == Fsync::Periodic && self.fsync_interval_ms == 0 {
            return Err(CliError::Usage(
                "--fsync-interval-ms must be at least 1 with --fsync periodic".into(),
            ));
        }
        if self.payload_bytes > felix_format::MAX_PAYLOAD_BYTES as usize {
            return Err(CliError::Usage(format!(
                "--payload-bytes {} is over the format's limit of {} bytes",
                self.payload_bytes,
                felix_format::MAX_PAYLOAD_BYTES
            )));
        }
        self.check_held(None)
    }

    /// Refuses batches that together hold more than
    /// [`MAX_HELD_PAYLOAD_BYTES`]: one batch, or one per thread for
    /// `bench`'s `concurrency` threads.
    pub(crate) fn check_held(&self, concurrency: Option<u64>) -> Result<(), CliError> {
        let batch = self.batch;
        let held = concurrency
            .unwrap_or(1)
            .saturating_mul(batch)
            .saturating_mul(self.payload_bytes as u64);
        if held <= MAX_HELD_PAYLOAD_BYTES {
            return Ok(());
        }
        let (product, smaller) = match concurrency {
            Some(threads) => (
                format!(
                    "--concurrency {threads} × --batch {batch} × --payload-bytes {}",
                    self.payload_bytes
                ),
                "--concurrency, --batch or --payload-bytes",
            ),
            None => (
                format!("--batch {batch} × --payload-bytes {}", self.payload_bytes),
                "--batch or --payload-bytes",
            ),
        };
        Err(CliError::Usage(format!(
            "{product} is {held} bytes of payload held in memory at once, over the limit of {MAX_HELD_PAYLOAD_BYTES} bytes (256 MiB); use a smaller {smaller}"
        )))
    }

    /// The store configuration the flags describe. `periodic` is run by
    /// the shard's own background thread.
    pub(crate) fn config(&self) -> StoreConfig {
        StoreConfig {
            segment_size_bytes: self.segment_bytes,
            index_spacing_bytes: self.index_spacing_bytes,
            preallocate: if self.no_preallocate {
                Preallocation::Off
            } else {
                Preallocation::Stepped
            },
            durability: match self.fsync {
                Fsync::OnCommit => Durability::OnCommit,
                Fsync::Periodic => {
                    Durability::Periodic(Duration::from_millis(self.fsync_interval_ms))
                }
                Fsync::None => Durability::None,
            },
            ..StoreConfig::default()
        }
    }

    /// Opens (recovering) the shard in `--dir`, labelled with its name.
    pub(crate) fn open(&self) -> Result<Arc<Shard>, CliError> {
        let label = shard_dir(self.dir.clone()).name;
        let shard = Shard::options(&self.dir)
            .config(self.config())
            .label(&label)
            .open()?;
        Ok(Arc::new(shard))
    }
}

/// Batches appended but not yet acknowledged, printed once durable.
#[derive(Debug, Default)]
pub(crate) struct Acks {
    pending: VecDeque<AppendReceipt>,
}

impl Acks {
    /// Remembers an appended batch.
    pub(crate) fn push(&mut self, receipt: AppendReceipt) {
        self.pending.push_back(receipt);
    }

    /// Prints an ack line for every pending batch the durable offset covers.
    pub(crate) fn flush(&mut self, durable_offset: u64, out: &mut Out) -> Result<(), CliError> {
        while let Some(receipt) = self.pending.front() {
            if receipt.last_offset >= durable_offset {
                break;
            }
            out.json(&json!({
                "event": "ack",
                "first_offset": receipt.first_offset,
                "last_offset": receipt.last_offset,
            }))?;
            self.pending.pop_front();
        }
        Ok(())
    }
}

/// Appends per `fdatasync` between two snapshots of a shard's counters.
///
/// With `on_commit` this is group commit's figure from the shard's own
/// counters (appends that waited on a sync, per sync). With `periodic` or
/// `none` no append waits, so it is the appends made between the snapshots
/// per sync made meanwhile; 0 when nothing was synced.
pub(crate) fn appends_per_sync(fsync: Fsync, before: &ShardStats, after: &ShardStats) -> f64 {
    let syncs = after.syncs - before.syncs;
    if syncs == 0 {
        return 0.0;
    }
    let appends = match fsync {
        Fsync::OnCommit => after.synced_appends - before.synced_appends,
        Fsync::None | Fsync::Periodic => after.appends - before.appends,
    };
    appends as f64 / syncs as f64
}

/// Wall-clock microseconds, for record timestamps.
pub(crate) fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}
