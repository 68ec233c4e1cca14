//! Helpers shared by the storage tests.
#![allow(dead_code)]

pub(crate) mod exec;
pub(crate) mod gated;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use felix_storage::{Durability, Preallocation, ReadBound, Record, Shard, StoreConfig};

pub(crate) fn payload(offset: u64, len: usize) -> Vec<u8> {
    let mut p = format!("payload-{offset}-").into_bytes();
    p.resize(len.max(p.len()), b'.');
    p.truncate(len);
    p
}

pub(crate) fn config(segment_size_bytes: u64, durability: Durability) -> StoreConfig {
    StoreConfig {
        segment_size_bytes,
        index_spacing_bytes: 256,
        preallocate: Preallocation::Off,
        durability,
        ..StoreConfig::default()
    }
}

pub(crate) fn open(dir: &Path, config: StoreConfig) -> Shard {
    Shard::options(dir)
        .config(config)
        .label("test-shard")
        .open()
        .unwrap()
}

pub(crate) fn records(from: u64, count: u64, len: usize) -> Vec<Record> {
    (from..from + count)
        .map(|o| Record::new(o, payload(o, len)))
        .collect()
}

/// Reads every record from `from` to the end and returns (offset, payload).
pub(crate) fn read_all(shard: &Shard, from: u64) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut next = from;
    loop {
        let batch = shard.read(next, 4096, ReadBound::Committed).unwrap();
        if batch.is_empty() {
            return out;
        }
        for r in batch {
            assert_eq!(r.offset, next);
            next += 1;
            out.push((r.offset, r.payload.to_vec()));
        }
    }
}

pub(crate) fn segment_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
}

/// A wall clock that stands still until set: for age-based retention.
#[derive(Debug, Default)]
pub(crate) struct ManualClock(AtomicU64);

impl ManualClock {
    /// Sets the time, in microseconds since the Unix epoch.
    pub(crate) fn set(&self, now: Duration) {
        self.0.store(now.as_micros() as u64, Ordering::Relaxed);
    }
}

impl felix_storage::Clock for ManualClock {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(self.0.load(Ordering::Relaxed))
    }
}
