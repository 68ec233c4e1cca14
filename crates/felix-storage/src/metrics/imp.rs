//! The handles behind [`ShardMetrics`], with the `metrics` feature.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};

use super::names::*;
use super::{Layout, PUBLISH_EVERY, ShardMetrics, Started, Timer, Wrote};
use crate::config::Durability;

/// Every handle of one shard, and what the writer has not published
/// to them yet.
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
    /// The shard's durability policy: the readable gauge follows the
    /// durable offset under on-commit, else the written one.
    durability: Durability,
    /// The writer's totals: updated with the writer lock held (plain
    /// loads and stores, as `Counters::add_exclusive`), published by
    /// whoever catches up.
    records: AtomicU64,
    bytes: AtomicU64,
    appends: AtomicU64,
    writes: AtomicU64,
    /// What the counters were given of `records` and `bytes` so far:
    /// raised with `fetch_max`, so concurrent catch-ups add each
    /// record once.
    published_records: AtomicU64,
    published_bytes: AtomicU64,
    /// `appends` when the last sync began (one sync of a shard at a
    /// time): the next covers the appends since.
    appends_at_sync: AtomicU64,
    /// The appends the sync in flight covers.
    covering: AtomicU64,
    /// The active segment's length, and the sealed segments' bytes,
    /// for the size gauge.
    active_len: AtomicU64,
    sealed_bytes: AtomicU64,
    /// Append calls of `batch_records` records each not yet given to
    /// the batch histogram (writer lock held): consecutive calls of one
    /// size are recorded together, with `record_many`.
    batch_records: AtomicU64,
    batch_calls: AtomicU64,
}

impl Default for Handles {
    fn default() -> Self {
        Self::new("", Durability::None)
    }
}

impl Drop for Handles {
    fn drop(&mut self) {
        // The shard is gone: nothing it recorded stays behind.
        self.flush_batches();
        self.catch_up_counters();
    }
}

impl Handles {
    fn new(label: &str, durability: Durability) -> Self {
        let label = label.to_owned();
        let l = || [(SHARD_LABEL, label.clone())];
        let zero = || AtomicU64::new(0);
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
            durability,
            records: zero(),
            bytes: zero(),
            appends: zero(),
            writes: zero(),
            published_records: zero(),
            published_bytes: zero(),
            appends_at_sync: zero(),
            covering: zero(),
            active_len: zero(),
            sealed_bytes: zero(),
            batch_records: zero(),
            batch_calls: zero(),
        }
    }

    /// Gives the batch histogram the calls held back (writer lock held,
    /// or `&mut self`).
    fn flush_batches(&self) {
        let calls = self.batch_calls.load(Relaxed);
        if calls > 0 {
            let records = f(self.batch_records.load(Relaxed));
            self.batch
                .record_many(records, usize::try_from(calls).unwrap_or(usize::MAX));
            self.batch_calls.store(0, Relaxed);
        }
    }

    fn catch_up_counters(&self) {
        catch_up(
            &self.appended_records,
            &self.records,
            &self.published_records,
        );
        catch_up(&self.appended_bytes, &self.bytes, &self.published_bytes);
    }

    fn catch_up(&self, written: u64) {
        self.catch_up_counters();
        self.shard_bytes.set(f(
            self.sealed_bytes.load(Relaxed) + self.active_len.load(Relaxed)
        ));
        if self.durability != Durability::OnCommit {
            self.readable.set(f(written));
        }
    }
}

/// Adds to `counter` what `total` gained since it was last published.
fn catch_up(counter: &Counter, total: &AtomicU64, published: &AtomicU64) {
    let now = total.load(Relaxed);
    let before = published.fetch_max(now, Relaxed);
    if now > before {
        counter.increment(now - before);
    }
}

/// A plain load and store: for figures only the writer updates.
fn add_exclusive(total: &AtomicU64, n: u64) -> u64 {
    let now = total.load(Relaxed) + n;
    total.store(now, Relaxed);
    now
}

/// Offsets and sizes as a gauge's `f64` (exact below 2⁵³).
#[expect(clippy::cast_precision_loss, reason = "a gauge is an f64")]
fn f(value: u64) -> f64 {
    value as f64
}

impl ShardMetrics {
    pub(crate) fn new(label: &Arc<str>, durability: Durability) -> Self {
        Self {
            inner: Arc::new(Handles::new(label, durability)),
        }
    }

    /// A durability `fdatasync` begins: it covers the appends written
    /// so far (one sync of a shard at a time, so one slot holds them),
    /// and the counters and gauges catch up with the writer.
    pub(crate) fn sync_began(&self, written: u64) {
        let h = &self.inner;
        let appends = h.appends.load(Relaxed);
        let before = h.appends_at_sync.swap(appends, Relaxed);
        h.covering.store(appends.saturating_sub(before), Relaxed);
        h.catch_up(written);
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

    /// A blocking on-commit append that began at `started` is durable.
    pub(crate) fn append_durable(&self, started: Timer) {
        self.inner.append_durable.record(started.0.elapsed());
    }

    /// A durability waiter was settled durable: an async append's
    /// latency, if it is one.
    pub(crate) fn settled_durable(&self, started: Started) {
        if let Some(at) = started.0 {
            self.inner
                .append_durable
                .record(Instant::now().saturating_duration_since(at));
        }
    }

    /// An append call of `records` records is being written (writer
    /// lock held). Calls of one size are held back and recorded
    /// together when the size changes or the writer publishes.
    pub(crate) fn batch(&self, records: usize) {
        let h = &self.inner;
        let records = records as u64;
        let mut calls = h.batch_calls.load(Relaxed);
        if calls > 0 && h.batch_records.load(Relaxed) != records {
            h.flush_batches();
            calls = 0;
        }
        h.batch_records.store(records, Relaxed);
        h.batch_calls.store(calls + 1, Relaxed);
    }

    /// A write (writer lock held): kept in the writer's totals with
    /// plain stores, and published when a caller waits to sync it or
    /// every [`PUBLISH_EVERY`] writes.
    pub(crate) fn wrote(&self, w: Wrote) {
        let h = &self.inner;
        add_exclusive(&h.records, w.records);
        add_exclusive(&h.bytes, w.bytes);
        add_exclusive(&h.appends, w.appends);
        h.active_len.store(w.active_len, Relaxed);
        let writes = add_exclusive(&h.writes, 1);
        if w.by_caller || writes.is_multiple_of(PUBLISH_EVERY) {
            self.catch_up_exclusive(w.written);
        }
    }

    /// The counters and gauges catch up with the writer (from any
    /// thread: a read of the stats). `written` is the written offset.
    pub(crate) fn catch_up(&self, written: u64) {
        self.inner.catch_up(written);
    }

    /// [`ShardMetrics::catch_up`], and the batch sizes held back: with
    /// the writer lock held (a write, a roll, an explicit sync, a
    /// close).
    pub(crate) fn catch_up_exclusive(&self, written: u64) {
        self.inner.flush_batches();
        self.inner.catch_up(written);
    }

    /// Everything below `durable` is durable: readable too when reads
    /// wait for durability.
    pub(crate) fn durable(&self, durable: u64) {
        self.inner.durable.set(f(durable));
        if self.inner.durability == Durability::OnCommit {
            self.inner.readable.set(f(durable));
        }
    }

    /// The segments changed (open, roll, retention, a cut, a
    /// replacement).
    pub(crate) fn layout(&self, l: Layout) {
        let h = &self.inner;
        h.sealed_bytes.store(l.sealed_bytes, Relaxed);
        h.active_len.store(l.active_len, Relaxed);
        h.base.set(f(l.base));
        h.segments.set(f(l.segments as u64));
        h.catch_up(l.written);
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
