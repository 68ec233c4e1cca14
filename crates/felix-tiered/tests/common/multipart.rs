//! A shard whose first segment goes up in several parts: 100 kB records in
//! 12 MB segments, against the smallest part S3 allows.

use std::sync::Arc;

use felix_storage::{Preallocation, Record, Shard, StoreConfig};
use felix_tiered::{TierConfig, TierRetention};

/// Payload bytes of each record: a 5 MiB part ends inside one.
pub const PAYLOAD: usize = 100_000;
/// The part size: the smallest S3 allows.
pub const PART: u64 = 5 << 20;

/// The payload of record `offset`: bytes counting up from it.
pub fn payload(offset: u64) -> Vec<u8> {
    (0..PAYLOAD).map(|i| (offset as usize + i) as u8).collect()
}

/// A shard whose segments roll at 12 MB (two parts and some), holding
/// `records` records: the first segment sealed.
pub fn shard(dir: &std::path::Path, records: u64) -> Arc<Shard> {
    let config = StoreConfig {
        segment_size_bytes: 12 << 20,
        preallocate: Preallocation::Off,
        ..StoreConfig::default()
    };
    let shard = Arc::new(Shard::options(dir).config(config).open().unwrap());
    for offset in 0..records {
        shard
            .append(&[Record::new(offset, payload(offset))])
            .wait()
            .unwrap();
    }
    assert!(shard.segments().len() >= 2, "the first segment is sealed");
    shard
}

/// A tier that offloads everything sealed, in [`PART`]-sized parts, two
/// at a time.
pub fn tier() -> TierConfig {
    TierConfig {
        local: TierRetention {
            max_bytes: Some(1),
            max_age: None,
        },
        part_bytes: PART,
        upload_concurrency: 2,
        ..TierConfig::default()
    }
}
