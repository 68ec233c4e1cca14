//! Offloads a shard's old segments to a local-directory object store and
//! reads them back: `cargo run -p felix-tiered --example tiered`.
//!
//! For S3 (or an S3-compatible server), build the store with
//! `felix_tiered::stores::s3(&S3Endpoint::new(endpoint, bucket, key, secret))`.

use std::sync::Arc;

use felix_format::ShardKey;
use felix_storage::{Record, Shard, StoreConfig};
use felix_tiered::{TierConfig, TierRetention, TieredShard, stores};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let shard_config = StoreConfig {
        segment_size_bytes: 64 << 10,
        ..StoreConfig::default()
    };
    let shard = Arc::new(
        Shard::options(dir.path().join("shard"))
            .config(shard_config)
            .open()?,
    );
    for i in 0..10_000u64 {
        shard.append(&[Record::new(i, format!("record {i}"))])?;
    }
    let remote = stores::local_dir(&dir.path().join("bucket"))?;
    let config = TierConfig {
        // Keep about 128 KiB on local disk; the rest goes to the store.
        local: TierRetention {
            max_bytes: Some(128 << 10),
            max_age: None,
        },
        ..TierConfig::default()
    };
    let key = ShardKey::new("acme", "default", "orders", 0);
    let tiered = TieredShard::open(Arc::clone(&shard), key, remote, config).await?;
    let outcome = tiered.offload().await?;
    println!(
        "uploaded segments {:?}; local log starts at {}, remote range {:?}",
        outcome.uploaded,
        outcome.local_start,
        tiered.remote_range()
    );
    let first = tiered.read(0, 1 << 10).await?;
    println!(
        "offset 0 from the remote copy: {:?}",
        String::from_utf8_lossy(&first[0].payload)
    );
    Ok(())
}
