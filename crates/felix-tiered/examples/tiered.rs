//! Offloads a shard's old segments to a local-directory object store and
//! reads them back, the way a broker does it:
//! `cargo run -p felix-tiered --example tiered [DIR]`.
//!
//! The shard is a [`Store`]'s, opened by its [`ShardKey`]: its directory
//! holds the key, which is what names its remote objects, so the operator
//! tool finds them from the directory alone. The run leaves the store and
//! the bucket in DIR (default: a new temporary directory, kept) and prints
//! the `felix-store` command that shows both.
//!
//! For S3 (or an S3-compatible server), build the object store with
//! `felix_tiered::stores::s3(&S3Endpoint::new(endpoint, bucket, key, secret))`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use felix_storage::{Record, ShardKey, StorageError, Store, StoreConfig};
use felix_tiered::{TierConfig, TierRetention, TieredShard, stores};

/// What a run left on disk.
#[derive(Debug)]
pub(crate) struct Left {
    /// The shard's directory in the store.
    pub(crate) shard_dir: PathBuf,
    /// The object store's URL, as `felix-store --remote` takes it.
    pub(crate) remote_url: String,
    /// The local log start after the offload: offsets below it are remote.
    pub(crate) local_start: u64,
}

/// Opens a store in `dir/store`, appends 10,000 records to one shard,
/// offloads all but about 128 KiB of it to `dir/bucket` and reads offset 0
/// back through the tier.
pub(crate) async fn run(dir: &Path) -> Result<Left, Box<dyn std::error::Error>> {
    let store_config = StoreConfig {
        segment_size_bytes: 64 << 10,
        ..StoreConfig::default()
    };
    let store = Store::options(dir.join("store"))
        .config(store_config)
        .open()?;
    let key = ShardKey::new("acme", "default", "orders", 0);
    // A broker opens its shard by key, creating it the first time.
    let shard = match store.open_shard(&key) {
        Err(StorageError::ShardNotFound { .. }) => store.create_shard(&key)?,
        other => other?,
    };
    for i in 0..10_000u64 {
        shard
            .append(&[Record::new(i, format!("record {i}"))])
            .wait()?;
    }
    let bucket = dir.join("bucket");
    let remote = stores::local_dir(&bucket)?;
    let config = TierConfig {
        // Keep about 128 KiB on local disk; the rest goes to the store.
        local: TierRetention {
            max_bytes: Some(128 << 10),
            max_age: None,
        },
        ..TierConfig::default()
    };
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
    let shard_dir = shard.dir().to_path_buf();
    drop(tiered);
    drop(shard);
    store.close()?;
    Ok(Left {
        shard_dir,
        remote_url: format!("file://{}", bucket.display()),
        local_start: outcome.local_start,
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = match std::env::args_os().nth(1) {
        Some(dir) => PathBuf::from(dir),
        None => tempfile::tempdir()?.keep(),
    };
    // An absolute path, so the URL printed is one `file://` takes.
    std::fs::create_dir_all(&dir)?;
    let dir = dir.canonicalize()?;
    let left = run(&dir).await?;
    println!(
        "offsets below {} are in the remote copy; see both with: felix-store stat {} --remote {}",
        left.local_start,
        left.shard_dir.display(),
        left.remote_url
    );
    Ok(())
}
