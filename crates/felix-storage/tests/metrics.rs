//! Every metric moves when its event happens (with the `metrics` feature:
//! `cargo test -p felix-storage --features metrics --test metrics`),
//! recorded by `metrics-util`'s debugging recorder.
#![cfg(feature = "metrics")]

mod common;

use std::path::Path;
use std::sync::mpsc;

use common::exec::block_on;
use felix_format::{FileKind, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN, file_name};
use felix_io::FileSystem;
use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_storage::metrics::names::*;
use felix_storage::{Durability, Preallocation, Record, Retention, Shard, StoreConfig};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

const PAYLOAD: usize = 12;
const RECORD: u64 = (RECORD_HEADER_LEN + PAYLOAD) as u64;

fn config() -> StoreConfig {
    StoreConfig {
        segment_size_bytes: SEGMENT_HEADER_LEN as u64 + 4 * RECORD,
        durability: Durability::OnCommit,
        preallocate: Preallocation::Off,
        retention: Retention {
            max_bytes: Some(1 << 20),
            ..Retention::default()
        },
        ..StoreConfig::default()
    }
}

fn record(offset: u64) -> Record {
    Record::new(offset, format!("record-{offset:05}"))
}

/// The metrics of shard `label`, by name.
struct Seen(Vec<(String, DebugValue)>);

impl Seen {
    fn take(snapshotter: &Snapshotter, label: &str) -> Self {
        Self(
            snapshotter
                .snapshot()
                .into_vec()
                .into_iter()
                .filter(|(key, ..)| {
                    key.key()
                        .labels()
                        .any(|l| l.key() == SHARD_LABEL && l.value() == label)
                })
                .map(|(key, _, _, value)| (key.key().name().to_owned(), value))
                .collect(),
        )
    }

    fn get(&self, name: &str) -> &DebugValue {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("{name} not registered: {:?}", self.0))
    }

    fn counter(&self, name: &str) -> u64 {
        match self.get(name) {
            DebugValue::Counter(n) => *n,
            other => panic!("{name}: {other:?}"),
        }
    }

    fn gauge(&self, name: &str) -> f64 {
        match self.get(name) {
            DebugValue::Gauge(v) => v.into_inner(),
            other => panic!("{name}: {other:?}"),
        }
    }

    /// Samples recorded since the last snapshot.
    fn samples(&self, name: &str) -> Vec<f64> {
        match self.get(name) {
            DebugValue::Histogram(v) => v.iter().map(|x| x.into_inner()).collect(),
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn metrics_each_moves_when_its_event_happens() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        felix_storage::metrics::describe();
        let dir = tempfile::tempdir().unwrap();
        let shard = Shard::options(dir.path())
            .label("m-0")
            .config(config())
            .open()
            .unwrap();
        let seen = Seen::take(&snapshotter, "m-0");
        assert_eq!(seen.samples(OPEN_SECONDS).len(), 1);
        assert_eq!(seen.counter(RECOVERY_ACTIONS_TOTAL), 0);
        assert_eq!(seen.gauge(SHARD_SEGMENTS), 1.0);
        assert_eq!(seen.gauge(SHARD_BYTES), SEGMENT_HEADER_LEN as f64);
        assert_eq!(
            (seen.gauge(BASE_OFFSET), seen.gauge(DURABLE_OFFSET)),
            (0.0, 0.0)
        );

        // One on-commit append of two records.
        shard.append(&[record(0), record(1)]).wait().unwrap();
        let seen = Seen::take(&snapshotter, "m-0");
        assert_eq!(seen.counter(APPENDED_RECORDS_TOTAL), 2);
        assert_eq!(seen.counter(APPENDED_BYTES_TOTAL), 2 * RECORD);
        assert_eq!(seen.samples(APPEND_BATCH_RECORDS), [2.0]);
        assert_eq!(seen.samples(APPEND_DURABLE_SECONDS).len(), 1);
        assert_eq!(seen.samples(FDATASYNC_SECONDS).len(), 1);
        assert_eq!(seen.samples(APPENDS_PER_SYNC), [1.0]);
        assert_eq!(seen.gauge(DURABLE_OFFSET), 2.0);
        assert_eq!(seen.gauge(READABLE_OFFSET), 2.0);
        assert_eq!(
            seen.gauge(SHARD_BYTES),
            (SEGMENT_HEADER_LEN as u64 + 2 * RECORD) as f64
        );

        // Three more: the segment (four records) rolls.
        for offset in 2..5 {
            shard.append(&[record(offset)]).wait().unwrap();
        }
        let seen = Seen::take(&snapshotter, "m-0");
        assert_eq!(seen.counter(ROLLS_TOTAL), 1);
        assert_eq!(seen.gauge(SHARD_SEGMENTS), 2.0);

        // Retention down to the active segment.
        let small = Shard::options(dir.path().join("other"))
            .label("m-1")
            .config(StoreConfig {
                retention: Retention {
                    max_bytes: Some(1),
                    ..Retention::default()
                },
                ..config()
            })
            .open()
            .unwrap();
        for offset in 0..9 {
            small.append(&[record(offset)]).wait().unwrap();
        }
        small.apply_retention().unwrap();
        let seen = Seen::take(&snapshotter, "m-1");
        assert_eq!(seen.counter(SEGMENTS_DELETED_TOTAL), 2);
        assert_eq!(seen.gauge(BASE_OFFSET), 8.0);
        assert_eq!(seen.gauge(SHARD_SEGMENTS), 1.0);

        // A truncation.
        shard.truncate_to(3).unwrap();
        let seen = Seen::take(&snapshotter, "m-0");
        assert_eq!(seen.counter(TRUNCATIONS_TOTAL), 1);
        assert_eq!(seen.gauge(DURABLE_OFFSET), 3.0);

        // Rot in a sealed segment, found by a scrub.
        shard.append(&[record(3), record(4)]).wait().unwrap();
        let path = dir.path().join(file_name(0, FileKind::Segment).as_str());
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[SEGMENT_HEADER_LEN + RECORD_HEADER_LEN + 1] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let report = shard.scrub().unwrap();
        let seen = Seen::take(&snapshotter, "m-0");
        assert_eq!(seen.counter(SCRUB_DAMAGED_RECORDS_TOTAL), 1);
        assert_eq!(seen.counter(SCRUBBED_BYTES_TOTAL), report.bytes());
        drop(shard);

        // A torn tail repaired on open is a recovery action.
        let newest = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .max()
            .unwrap();
        let len = std::fs::metadata(&newest).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&newest)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
        let reopened = Shard::options(dir.path())
            .label("m-2")
            .config(config())
            .open()
            .unwrap();
        let seen = Seen::take(&snapshotter, "m-2");
        assert_eq!(seen.counter(RECOVERY_ACTIONS_TOTAL), 1);
        drop(reopened);

        // A failed sync poisons the shard.
        let sim = SimFs::new();
        let poisoned = Shard::options(Path::new("/p"))
            .file_system(FileSystem::new(sim.clone()))
            .label("m-3")
            .config(config())
            .open()
            .unwrap();
        sim.inject(Fault {
            op: FaultOp::SyncFile,
            path_contains: ".log".into(),
            skip: 0,
            effect: FaultEffect::Errno(5),
        });
        assert!(poisoned.append(&[record(0)]).wait().is_err());
        assert!(poisoned.append(&[record(1)]).wait().is_err());
        let seen = Seen::take(&snapshotter, "m-3");
        assert_eq!(seen.counter(POISONS_TOTAL), 1);
    });
}

#[test]
fn append_durable_seconds_is_sampled_for_each_on_commit_append_form() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let dir = tempfile::tempdir().unwrap();
        let shard = Shard::options(dir.path())
            .label("d-0")
            .config(config())
            .open()
            .unwrap();
        Seen::take(&snapshotter, "d-0");

        // Blocking.
        shard.append(&[record(0)]).wait().unwrap();
        let seen = Seen::take(&snapshotter, "d-0");
        assert_eq!(seen.samples(APPEND_DURABLE_SECONDS).len(), 1);

        // A future: sampled when the sync settles it, before it resolves.
        let future = shard.append(&[record(1)]).submit().unwrap();
        assert_eq!(block_on(future).unwrap().last_offset, 1);
        let seen = Seen::take(&snapshotter, "d-0");
        assert_eq!(seen.samples(APPEND_DURABLE_SECONDS).len(), 1);
        assert_eq!(seen.samples(APPEND_BATCH_RECORDS), [1.0]);

        // A callback: sampled before it runs.
        let (tx, rx) = mpsc::channel();
        shard
            .append(&[record(2), record(3)])
            .then(move |outcome| {
                tx.send(outcome.map(|r| r.last_offset)).unwrap();
            })
            .unwrap();
        assert!(matches!(rx.recv().unwrap(), Ok(3)));
        let seen = Seen::take(&snapshotter, "d-0");
        assert_eq!(seen.samples(APPEND_DURABLE_SECONDS).len(), 1);
        assert_eq!(seen.samples(APPEND_BATCH_RECORDS), [2.0]);

        // The try_ forms too.
        block_on(shard.append(&[record(4)]).fail_fast().submit().unwrap()).unwrap();
        let seen = Seen::take(&snapshotter, "d-0");
        assert_eq!(seen.samples(APPEND_DURABLE_SECONDS).len(), 1);

        // A wait that is not an append is not sampled.
        block_on(shard.wait_durable(5).into_future()).unwrap();
        let seen = Seen::take(&snapshotter, "d-0");
        assert!(seen.samples(APPEND_DURABLE_SECONDS).is_empty());
        drop(shard);

        // An async append whose sync fails is not sampled.
        let sim = SimFs::new();
        let failing = Shard::options(Path::new("/f"))
            .file_system(FileSystem::new(sim.clone()))
            .label("d-1")
            .config(config())
            .open()
            .unwrap();
        sim.inject(Fault {
            op: FaultOp::SyncFile,
            path_contains: ".log".into(),
            skip: 0,
            effect: FaultEffect::Errno(5),
        });
        let future = failing.append(&[record(0)]).submit().unwrap();
        assert!(matches!(
            block_on(future),
            Err(felix_storage::StorageError::Segment { .. })
        ));
        let seen = Seen::take(&snapshotter, "d-1");
        assert!(seen.samples(APPEND_DURABLE_SECONDS).is_empty());
        assert_eq!(seen.counter(POISONS_TOTAL), 1);
    });
}

#[test]
fn per_write_figures_are_published_every_64_writes_and_caught_up_by_stats_sync_and_drop() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let dir = tempfile::tempdir().unwrap();
        let shard = Shard::options(dir.path())
            .label("b-0")
            .config(StoreConfig {
                segment_size_bytes: 1 << 20,
                durability: Durability::None,
                writeback_bytes: None,
                ..config()
            })
            .open()
            .unwrap();
        Seen::take(&snapshotter, "b-0");
        let header = SEGMENT_HEADER_LEN as u64;

        // 63 writes nobody syncs: held back by the writer.
        for offset in 0..63 {
            shard.append(&[record(offset)]).wait().unwrap();
        }
        let seen = Seen::take(&snapshotter, "b-0");
        assert_eq!(seen.counter(APPENDED_RECORDS_TOTAL), 0);
        assert!(seen.samples(APPEND_BATCH_RECORDS).is_empty());
        assert_eq!(seen.gauge(READABLE_OFFSET), 0.0);

        // The 64th publishes all of them.
        shard.append(&[record(63)]).wait().unwrap();
        let seen = Seen::take(&snapshotter, "b-0");
        assert_eq!(seen.counter(APPENDED_RECORDS_TOTAL), 64);
        assert_eq!(seen.counter(APPENDED_BYTES_TOTAL), 64 * RECORD);
        assert_eq!(seen.samples(APPEND_BATCH_RECORDS), [1.0; 64]);
        assert_eq!(seen.gauge(READABLE_OFFSET), 64.0);
        assert_eq!(seen.gauge(SHARD_BYTES), (header + 64 * RECORD) as f64);

        // A read of the stats catches the counters and gauges up.
        shard.append(&[record(64), record(65)]).wait().unwrap();
        shard.append(&[record(66), record(67)]).wait().unwrap();
        let stats = shard.stats();
        let seen = Seen::take(&snapshotter, "b-0");
        // The recorder's counters read as what was added since the last
        // snapshot.
        assert_eq!(stats.records_appended, 68);
        assert_eq!(seen.counter(APPENDED_RECORDS_TOTAL), 4);
        assert_eq!(seen.gauge(READABLE_OFFSET), 68.0);
        assert_eq!(seen.gauge(SHARD_BYTES), (header + 68 * RECORD) as f64);
        assert!(seen.samples(APPEND_BATCH_RECORDS).is_empty());

        // An explicit sync, the batch sizes too (one sample per call).
        shard.sync().unwrap();
        let seen = Seen::take(&snapshotter, "b-0");
        assert_eq!(seen.samples(APPEND_BATCH_RECORDS), [2.0, 2.0]);
        assert_eq!(seen.samples(APPENDS_PER_SYNC), [66.0]);

        // Dropping the shard delivers what was held back.
        shard
            .append(&[record(68), record(69), record(70)])
            .wait()
            .unwrap();
        drop(shard);
        let seen = Seen::take(&snapshotter, "b-0");
        assert_eq!(seen.counter(APPENDED_RECORDS_TOTAL), 3);
        assert_eq!(seen.samples(APPEND_BATCH_RECORDS), [3.0]);
    });
}

/// A store's shard reports under its key as the broker names it, not its
/// directory name.
#[test]
fn a_store_opened_shard_is_labelled_by_its_key() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let root = tempfile::tempdir().unwrap();
        let store = felix_storage::Store::options(root.path())
            .config(config())
            .open()
            .unwrap();
        let key = felix_storage::ShardKey::new("acme", "default", "labels", 7);
        let shard = store.create_shard(&key).unwrap();
        shard.append(&[record(0)]).wait().unwrap();
        let seen = Seen::take(&snapshotter, "acme/default/labels/7");
        assert_eq!(seen.counter(APPENDED_RECORDS_TOTAL), 1);
        let by_dir = Seen::take(&snapshotter, &key.dir_name());
        assert!(by_dir.0.is_empty(), "nothing under the directory name");
        store.close().unwrap();
    });
}

/// The example program, as the crate docs point to it: a recorder
/// installed globally before the store opens sees its shards' figures.
#[path = "../examples/metrics.rs"]
mod example;

#[test]
fn metrics_example_with_a_global_recorder_counts_every_append() {
    assert_eq!(example::run(10).unwrap(), 10);
}
