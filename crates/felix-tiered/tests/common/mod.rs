//! Shared pieces of felix-tiered's tests: a shard with small segments and
//! records whose payloads name their offsets.
#![allow(dead_code, unreachable_pub)]

pub mod counting;
pub mod faults;
pub mod multipart;
pub mod s3;
pub mod sim;

use std::sync::Arc;

use felix_storage::{Record, Shard, StoreConfig};

/// A shard in `dir` that rolls every ~1 KiB and indexes every 128 bytes.
pub fn small_shard(dir: &std::path::Path) -> Arc<Shard> {
    let config = StoreConfig {
        segment_size_bytes: 1024,
        index_spacing_bytes: 128,
        ..StoreConfig::default()
    };
    Arc::new(Shard::options(dir).config(config).open().unwrap())
}

/// The payload of offset `offset`: its number, padded to 40 bytes.
pub fn payload(offset: u64) -> Vec<u8> {
    format!("record-{offset:033}").into_bytes()
}

/// Appends `n` records, timestamps 1_000 + offset.
pub fn fill(shard: &Shard, n: u64) {
    for _ in 0..n {
        let offset = shard.offsets().written;
        shard
            .append(&[Record::new(1_000 + offset, payload(offset))])
            .wait()
            .unwrap();
    }
}
