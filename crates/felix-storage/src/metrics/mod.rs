//! What the shard reports through the [`metrics`](https://docs.rs/metrics)
//! facade, behind the `metrics` feature: every metric's name and the one
//! place each is recorded.
//!
//! The library only records; the application installs a recorder (a
//! Prometheus exporter, say) and chooses where the figures go: through the
//! `metrics` crate 0.24, before any shard opens (the crate docs' "Metrics"
//! section, and `examples/metrics.rs`). Without a
//! recorder every call is a no-op, and without the feature this module is
//! empty methods the compiler removes. Handles are registered once per
//! shard at open, labelled `shard` with the shard's label, so recording is
//! a call through a handle: nothing is looked up on the append path.
//!
//! **Freshness.** What changes with every write (the appended records and
//! bytes, the batch sizes, the shard's size, and the readable offset when
//! reads do not wait for durability) is kept by the writer in plain
//! per-shard figures and published in bulk: at once for a write an
//! on-commit appender waits to sync (it pays for a sync anyway), else
//! every 64th write, and at each sync, roll, read of the shard's stats and
//! close (batch sizes: every 64th write, an explicit sync, a close, and
//! when the size changes). A shard that stops writing without
//! a sync is thus at most 63 writes behind until one of these happens. At
//! batch-1 appends without durability an update through a handle per
//! figure per write cost a few per cent of each append; the bulk
//! publication costs one plain store per figure (measured in
//! docs/performance.md, "What the metrics feature costs").
//! Everything else is recorded when it happens.
//!
//! Names follow the facade's conventions (Prometheus style: the unit as a
//! suffix, `_total` on counters). They are listed in the crate docs and
//! exported as constants under `names` (with the feature), and
//! `describe` registers each with its unit and meaning.

use std::sync::Arc;
#[cfg(not(feature = "metrics"))]
use std::time::Duration;

/// The name of every metric, as constants (with the `metrics` feature).
#[cfg(feature = "metrics")]
pub mod names {
    /// Histogram, seconds: each `fdatasync` made for durability (group
    /// commits, explicit syncs, background writeback; seals not included).
    pub const FDATASYNC_SECONDS: &str = "felix_storage_fdatasync_seconds";
    /// Histogram, seconds: from an on-commit append call to its batch
    /// being durable. For [`Append::wait`](crate::Append::wait), to its
    /// return; for [`Append::submit`](crate::Append::submit), `.await` and
    /// [`Append::then`](crate::Append::then), from the call (a wait for a
    /// place in flight included) to the sync that settled it, sampled then,
    /// before the future is woken or the callback runs. Appends that fail
    /// or are closed are not sampled; without on-commit durability an
    /// append is acknowledged when written and nothing is sampled.
    pub const APPEND_DURABLE_SECONDS: &str = "felix_storage_append_durable_seconds";
    /// Histogram, records: the records of each append call written, one
    /// sample per call (consecutive calls of one size delivered together,
    /// as `record_many`; see the module's freshness note).
    pub const APPEND_BATCH_RECORDS: &str = "felix_storage_append_batch_records";
    /// Histogram, appends: the append calls written since the previous
    /// durability sync, which each one makes durable.
    pub const APPENDS_PER_SYNC: &str = "felix_storage_appends_per_sync";
    /// Histogram, seconds: each open of a shard, recovery included.
    pub const OPEN_SECONDS: &str = "felix_storage_open_seconds";
    /// Counter, bytes: records appended, headers included (published in
    /// bulk: see the module's freshness note).
    pub const APPENDED_BYTES_TOTAL: &str = "felix_storage_appended_bytes_total";
    /// Counter: records appended (published in bulk).
    pub const APPENDED_RECORDS_TOTAL: &str = "felix_storage_appended_records_total";
    /// Counter: segments rolled over.
    pub const ROLLS_TOTAL: &str = "felix_storage_rolls_total";
    /// Counter: sealed segments deleted by retention.
    pub const SEGMENTS_DELETED_TOTAL: &str = "felix_storage_segments_deleted_total";
    /// Counter: truncations and resets of the log.
    pub const TRUNCATIONS_TOTAL: &str = "felix_storage_truncations_total";
    /// Counter: actions recovery took on open (truncations, removals,
    /// index rebuilds).
    pub const RECOVERY_ACTIONS_TOTAL: &str = "felix_storage_recovery_actions_total";
    /// Counter: times a failed write or sync stopped the shard.
    pub const POISONS_TOTAL: &str = "felix_storage_poisons_total";
    /// Counter: damaged records scrubs found in sealed segments.
    pub const SCRUB_DAMAGED_RECORDS_TOTAL: &str = "felix_storage_scrub_damaged_records_total";
    /// Counter, bytes: sealed segments' records scrubbed.
    pub const SCRUBBED_BYTES_TOTAL: &str = "felix_storage_scrubbed_bytes_total";
    /// Gauge, bytes: the shard's segment files (the active one as far as
    /// written; published in bulk).
    pub const SHARD_BYTES: &str = "felix_storage_shard_bytes";
    /// Gauge: the shard's segments, the active one included.
    pub const SHARD_SEGMENTS: &str = "felix_storage_shard_segments";
    /// Gauge: the oldest offset held.
    pub const BASE_OFFSET: &str = "felix_storage_base_offset";
    /// Gauge: one past the last record a `Committed` read returns (with
    /// on-commit durability set at each sync, otherwise published in
    /// bulk).
    pub const READABLE_OFFSET: &str = "felix_storage_readable_offset";
    /// Gauge: one past the last durable record.
    pub const DURABLE_OFFSET: &str = "felix_storage_durable_offset";
    /// The label every metric carries: the shard's label.
    pub const SHARD_LABEL: &str = "shard";
}

/// Registers every metric's unit and description with the installed
/// recorder (with the `metrics` feature). Optional: a recorder records
/// without it; exporters use it for their help text.
#[cfg(feature = "metrics")]
pub fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    use names::*;
    describe_histogram!(
        FDATASYNC_SECONDS,
        Unit::Seconds,
        "fdatasync latency, for durability"
    );
    describe_histogram!(
        APPEND_DURABLE_SECONDS,
        Unit::Seconds,
        "on-commit append latency, to durable"
    );
    describe_histogram!(APPEND_BATCH_RECORDS, Unit::Count, "records per append call");
    describe_histogram!(
        APPENDS_PER_SYNC,
        Unit::Count,
        "append calls made durable by one sync"
    );
    describe_histogram!(
        OPEN_SECONDS,
        Unit::Seconds,
        "shard open time, recovery included"
    );
    describe_counter!(
        APPENDED_BYTES_TOTAL,
        Unit::Bytes,
        "bytes of records appended"
    );
    describe_counter!(APPENDED_RECORDS_TOTAL, Unit::Count, "records appended");
    describe_counter!(ROLLS_TOTAL, Unit::Count, "segments rolled over");
    describe_counter!(
        SEGMENTS_DELETED_TOTAL,
        Unit::Count,
        "segments deleted by retention"
    );
    describe_counter!(
        TRUNCATIONS_TOTAL,
        Unit::Count,
        "truncations and resets of the log"
    );
    describe_counter!(
        RECOVERY_ACTIONS_TOTAL,
        Unit::Count,
        "recovery actions taken on open"
    );
    describe_counter!(
        POISONS_TOTAL,
        Unit::Count,
        "failures that stopped the shard's writes"
    );
    describe_counter!(
        SCRUB_DAMAGED_RECORDS_TOTAL,
        Unit::Count,
        "damaged records scrubs found"
    );
    describe_counter!(
        SCRUBBED_BYTES_TOTAL,
        Unit::Bytes,
        "bytes of sealed segments scrubbed"
    );
    describe_gauge!(SHARD_BYTES, Unit::Bytes, "bytes of segment files");
    describe_gauge!(
        SHARD_SEGMENTS,
        Unit::Count,
        "segments, the active one included"
    );
    describe_gauge!(BASE_OFFSET, Unit::Count, "oldest offset held");
    describe_gauge!(
        READABLE_OFFSET,
        Unit::Count,
        "end of what a committed read returns"
    );
    describe_gauge!(DURABLE_OFFSET, Unit::Count, "end of what is durable");
}

/// A start time, for the latency histograms (nothing without the feature).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timer(#[cfg(feature = "metrics")] std::time::Instant);

impl Timer {
    #[inline(always)]
    pub(crate) fn start() -> Self {
        Self(
            #[cfg(feature = "metrics")]
            std::time::Instant::now(),
        )
    }
}

/// When an async append began, kept with its completion until a sync
/// settles it (nothing without the feature): the append-to-durable
/// latency of [`Append::submit`](crate::Append::submit) (and `.await`) and
/// [`Append::then`](crate::Append::then). Durability waits
/// that are not appends carry [`Started::NONE`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Started(#[cfg(feature = "metrics")] Option<std::time::Instant>);

impl Started {
    /// Not an append: nothing is recorded when it settles.
    pub(crate) const NONE: Self = Self(
        #[cfg(feature = "metrics")]
        None,
    );

    /// An append that began at `timer`.
    #[inline(always)]
    pub(crate) fn append(timer: Timer) -> Self {
        #[cfg(not(feature = "metrics"))]
        let _ = timer;
        Self(
            #[cfg(feature = "metrics")]
            Some(timer.0),
        )
    }
}

/// Every how many writes a shard whose writes nobody waits to sync
/// publishes its per-write figures (see [`ShardMetrics::wrote`]): a
/// power of two, so the test is a mask. At a busy shard's rate of writes,
/// 64 keep the figures well under a millisecond behind, and publishing
/// (five updates) costs a small fraction of the writes it covers (figures
/// in docs/performance.md, "What the metrics feature costs").
#[cfg_attr(
    not(feature = "metrics"),
    allow(dead_code, reason = "read only with the feature")
)]
const PUBLISH_EVERY: u64 = 64;

/// One shard's metric handles. Cheap to clone (one `Arc`), so the shard's
/// core and its group commit each hold one.
#[derive(Debug, Clone, Default)]
pub(crate) struct ShardMetrics {
    #[cfg(feature = "metrics")]
    inner: Arc<imp::Handles>,
    #[cfg(not(feature = "metrics"))]
    _none: (),
}

#[cfg(not(feature = "metrics"))]
#[allow(
    clippy::unused_self,
    reason = "the same calls as with the feature, empty"
)]
impl ShardMetrics {
    #[inline(always)]
    pub(crate) fn new(_label: &Arc<str>, _durability: crate::config::Durability) -> Self {
        Self::default()
    }
    #[inline(always)]
    pub(crate) fn sync_began(&self, _written: u64) {}
    #[inline(always)]
    pub(crate) fn synced(&self, _took: Duration, _ok: bool) {}
    #[inline(always)]
    pub(crate) fn append_durable(&self, _started: Timer) {}
    #[inline(always)]
    pub(crate) fn settled_durable(&self, _started: Started) {}
    #[inline(always)]
    pub(crate) fn batch(&self, _records: usize) {}
    #[inline(always)]
    pub(crate) fn wrote(&self, _w: Wrote) {}
    #[inline(always)]
    pub(crate) fn catch_up(&self, _written: u64) {}
    #[inline(always)]
    pub(crate) fn catch_up_exclusive(&self, _written: u64) {}
    #[inline(always)]
    pub(crate) fn durable(&self, _durable: u64) {}
    #[inline(always)]
    pub(crate) fn layout(&self, _layout: Layout) {}
    #[inline(always)]
    pub(crate) fn rolled(&self) {}
    #[inline(always)]
    pub(crate) fn segments_deleted(&self, _segments: usize) {}
    #[inline(always)]
    pub(crate) fn truncated(&self) {}
    #[inline(always)]
    pub(crate) fn opened(&self, _took: Duration, _actions: usize) {}
    #[inline(always)]
    pub(crate) fn poisoned(&self) {}
    #[inline(always)]
    pub(crate) fn scrubbed(&self, _bytes: u64, _damaged: usize) {}
}

/// One write of the shard, as the writer reports it (writer lock held).
#[derive(Debug, Clone, Copy)]
#[cfg_attr(
    not(feature = "metrics"),
    allow(dead_code, reason = "read only with the feature")
)]
pub(crate) struct Wrote {
    /// Append calls in the write.
    pub(crate) appends: u64,
    /// Records in the write.
    pub(crate) records: u64,
    /// Bytes written, headers included.
    pub(crate) bytes: u64,
    /// The active segment's length after the write.
    pub(crate) active_len: u64,
    /// The written offset after the write.
    pub(crate) written: u64,
    /// Whether a caller waits for a sync of it (an on-commit append): the
    /// write then costs a sync anyway, and its figures are published at
    /// once.
    pub(crate) by_caller: bool,
}

/// The segments, as they stand after an open, a roll, retention, a cut or
/// a replacement.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(
    not(feature = "metrics"),
    allow(dead_code, reason = "read only with the feature")
)]
pub(crate) struct Layout {
    /// The oldest offset held.
    pub(crate) base: u64,
    /// Bytes of the sealed segments.
    pub(crate) sealed_bytes: u64,
    /// Bytes of the active segment.
    pub(crate) active_len: u64,
    /// Segments, the active one included.
    pub(crate) segments: usize,
    /// The written offset.
    pub(crate) written: u64,
}

#[cfg(feature = "metrics")]
mod imp;
