//! What the shard reports through the [`metrics`](https://docs.rs/metrics)
//! facade, behind the `metrics` feature: every metric's name and the one
//! place each is recorded.
//!
//! The library only records; the application installs a recorder (a
//! Prometheus exporter, say) and chooses where the figures go. Without a
//! recorder every call is a no-op, and without the feature this module is
//! empty methods the compiler removes. Handles are registered once per
//! shard at open, labelled `shard` with the shard's label, so recording is
//! a call through a handle: nothing is looked up on the append path.
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
    /// Histogram, seconds: from a blocking on-commit `append` call to its
    /// return, once durable (an async append's caller holds its future
    /// and times it).
    pub const APPEND_DURABLE_SECONDS: &str = "felix_storage_append_durable_seconds";
    /// Histogram, records: the records of each append call.
    pub const APPEND_BATCH_RECORDS: &str = "felix_storage_append_batch_records";
    /// Histogram, appends: the append calls written since the previous
    /// durability sync, which each one makes durable.
    pub const APPENDS_PER_SYNC: &str = "felix_storage_appends_per_sync";
    /// Histogram, seconds: each open of a shard, recovery included.
    pub const OPEN_SECONDS: &str = "felix_storage_open_seconds";
    /// Counter, bytes: records appended, headers included.
    pub const APPENDED_BYTES_TOTAL: &str = "felix_storage_appended_bytes_total";
    /// Counter: records appended.
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
    /// written).
    pub const SHARD_BYTES: &str = "felix_storage_shard_bytes";
    /// Gauge: the shard's segments, the active one included.
    pub const SHARD_SEGMENTS: &str = "felix_storage_shard_segments";
    /// Gauge: the oldest offset held.
    pub const BASE_OFFSET: &str = "felix_storage_base_offset";
    /// Gauge: one past the last record a `Committed` read returns.
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
    pub(crate) fn new(_label: &Arc<str>) -> Self {
        Self::default()
    }
    #[inline(always)]
    pub(crate) fn sync_began(&self) {}
    #[inline(always)]
    pub(crate) fn synced(&self, _took: Duration, _ok: bool) {}
    #[inline(always)]
    pub(crate) fn append_durable(&self, _started: Timer) {}
    #[inline(always)]
    pub(crate) fn batch(&self, _records: usize) {}
    #[inline(always)]
    pub(crate) fn appended(&self, _appends: u64, _records: u64, _bytes: u64, _active_len: u64) {}
    #[inline(always)]
    pub(crate) fn written(&self, _written: u64, _on_commit: bool) {}
    #[inline(always)]
    pub(crate) fn durable(&self, _durable: u64, _on_commit: bool) {}
    #[inline(always)]
    pub(crate) fn layout(
        &self,
        _base: u64,
        _sealed_bytes: u64,
        _active_len: u64,
        _segments: usize,
    ) {
    }
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

#[cfg(feature = "metrics")]
mod imp {
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;
    use std::sync::atomic::Ordering::Relaxed;
    use std::time::Duration;

    use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};

    use super::names::*;
    use super::{ShardMetrics, Timer};

    /// Every handle of one shard.
    #[derive(Debug)]
    pub(super) struct Handles {
        fdatasync: Histogram,
        append_durable: Histogram,
        batch: Histogram,
        appends_per_sync: Histogram,
        open: Histogram,
        appended_bytes: Counter,
        appended_records: Counter,
        rolls: Counter,
        segments_deleted: Counter,
        truncations: Counter,
        recovery_actions: Counter,
        poisons: Counter,
        scrub_damage: Counter,
        scrubbed_bytes: Counter,
        shard_bytes: Gauge,
        segments: Gauge,
        base: Gauge,
        readable: Gauge,
        durable: Gauge,
        /// Appends written since the last sync began: what the next covers.
        unsynced_appends: AtomicU64,
        /// The appends the sync in flight covers.
        covering: AtomicU64,
        /// Bytes of the sealed segments, for the size gauge.
        sealed_bytes: AtomicU64,
    }

    impl Default for Handles {
        fn default() -> Self {
            Self::new("")
        }
    }

    impl Handles {
        fn new(label: &str) -> Self {
            let label = label.to_owned();
            let l = || [(SHARD_LABEL, label.clone())];
            Self {
                fdatasync: histogram!(FDATASYNC_SECONDS, &l()),
                append_durable: histogram!(APPEND_DURABLE_SECONDS, &l()),
                batch: histogram!(APPEND_BATCH_RECORDS, &l()),
                appends_per_sync: histogram!(APPENDS_PER_SYNC, &l()),
                open: histogram!(OPEN_SECONDS, &l()),
                appended_bytes: counter!(APPENDED_BYTES_TOTAL, &l()),
                appended_records: counter!(APPENDED_RECORDS_TOTAL, &l()),
                rolls: counter!(ROLLS_TOTAL, &l()),
                segments_deleted: counter!(SEGMENTS_DELETED_TOTAL, &l()),
                truncations: counter!(TRUNCATIONS_TOTAL, &l()),
                recovery_actions: counter!(RECOVERY_ACTIONS_TOTAL, &l()),
                poisons: counter!(POISONS_TOTAL, &l()),
                scrub_damage: counter!(SCRUB_DAMAGED_RECORDS_TOTAL, &l()),
                scrubbed_bytes: counter!(SCRUBBED_BYTES_TOTAL, &l()),
                shard_bytes: gauge!(SHARD_BYTES, &l()),
                segments: gauge!(SHARD_SEGMENTS, &l()),
                base: gauge!(BASE_OFFSET, &l()),
                readable: gauge!(READABLE_OFFSET, &l()),
                durable: gauge!(DURABLE_OFFSET, &l()),
                unsynced_appends: AtomicU64::new(0),
                covering: AtomicU64::new(0),
                sealed_bytes: AtomicU64::new(0),
            }
        }
    }

    /// Offsets and sizes as a gauge's `f64` (exact below 2⁵³).
    #[expect(clippy::cast_precision_loss, reason = "a gauge is an f64")]
    fn f(value: u64) -> f64 {
        value as f64
    }

    impl ShardMetrics {
        pub(crate) fn new(label: &Arc<str>) -> Self {
            Self {
                inner: Arc::new(Handles::new(label)),
            }
        }

        /// A durability `fdatasync` begins: it covers the appends written
        /// so far (one sync of a shard at a time, so one slot holds them).
        pub(crate) fn sync_began(&self) {
            let h = &self.inner;
            h.covering
                .store(h.unsynced_appends.swap(0, Relaxed), Relaxed);
        }

        /// The sync begun last took `took`: its latency, and, when it
        /// succeeded, the appends it made durable.
        pub(crate) fn synced(&self, took: Duration, ok: bool) {
            let h = &self.inner;
            h.fdatasync.record(took);
            let covered = h.covering.swap(0, Relaxed);
            if ok {
                h.appends_per_sync.record(f(covered));
            }
        }

        pub(crate) fn append_durable(&self, started: Timer) {
            self.inner.append_durable.record(started.0.elapsed());
        }

        pub(crate) fn batch(&self, records: usize) {
            self.inner.batch.record(f(records as u64));
        }

        /// A write of `appends` append calls (`records`, `bytes`); the
        /// active segment now holds `active_len` bytes.
        pub(crate) fn appended(&self, appends: u64, records: u64, bytes: u64, active_len: u64) {
            let h = &self.inner;
            h.unsynced_appends.fetch_add(appends, Relaxed);
            h.appended_records.increment(records);
            h.appended_bytes.increment(bytes);
            h.shard_bytes
                .set(f(h.sealed_bytes.load(Relaxed) + active_len));
        }

        /// The log is written up to `written`: readable too unless reads
        /// wait for durability.
        pub(crate) fn written(&self, written: u64, on_commit: bool) {
            if !on_commit {
                self.inner.readable.set(f(written));
            }
        }

        /// Everything below `durable` is durable: readable too when reads
        /// wait for durability.
        pub(crate) fn durable(&self, durable: u64, on_commit: bool) {
            self.inner.durable.set(f(durable));
            if on_commit {
                self.inner.readable.set(f(durable));
            }
        }

        /// The segments changed (open, roll, retention, a cut, a
        /// replacement).
        pub(crate) fn layout(
            &self,
            base: u64,
            sealed_bytes: u64,
            active_len: u64,
            segments: usize,
        ) {
            let h = &self.inner;
            h.sealed_bytes.store(sealed_bytes, Relaxed);
            h.base.set(f(base));
            h.shard_bytes.set(f(sealed_bytes + active_len));
            h.segments.set(f(segments as u64));
        }

        pub(crate) fn rolled(&self) {
            self.inner.rolls.increment(1);
        }

        pub(crate) fn segments_deleted(&self, segments: usize) {
            self.inner.segments_deleted.increment(segments as u64);
        }

        pub(crate) fn truncated(&self) {
            self.inner.truncations.increment(1);
        }

        pub(crate) fn opened(&self, took: Duration, actions: usize) {
            self.inner.open.record(took);
            self.inner.recovery_actions.increment(actions as u64);
        }

        pub(crate) fn poisoned(&self) {
            self.inner.poisons.increment(1);
        }

        pub(crate) fn scrubbed(&self, bytes: u64, damaged: usize) {
            self.inner.scrubbed_bytes.increment(bytes);
            self.inner.scrub_damage.increment(damaged as u64);
        }
    }
}
