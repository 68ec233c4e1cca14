//! The power-loss sweeps' shard: small segments on felix_io's simulated
//! file system, every append acknowledged durable, and the tier that
//! offloads it.

use std::path::Path;
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::ObjectStoreExt;

use felix_io::FileSystem;
use felix_io::sim::SimFs;
use felix_storage::{Durability, Preallocation, Shard, StoreConfig};
use felix_tiered::{TierConfig, TierRetention, TierStore, stores};

/// The shard's directory on the simulated file system.
pub const DIR: &str = "/shard";

/// A few records a segment, so an offload deletes several files; every
/// append returns durable, so all of them are acknowledged.
pub fn shard_config() -> StoreConfig {
    StoreConfig {
        segment_size_bytes: 400,
        index_spacing_bytes: 64,
        preallocate: Preallocation::Off,
        durability: Durability::OnCommit,
        writeback_bytes: None,
        ..StoreConfig::default()
    }
}

/// A tier keeping `local_max_bytes` of the shard on disk.
pub fn tier_config(local_max_bytes: u64) -> TierConfig {
    TierConfig {
        local: TierRetention {
            max_bytes: Some(local_max_bytes),
            max_age: None,
        },
        chunk_bytes: 4096,
        cache_bytes: 16 << 10,
        ..TierConfig::default()
    }
}

/// A runtime on the calling thread, for the sweeps' synchronous loops.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Opens (or creates) the shard at [`DIR`] on `fs`.
pub fn open_shard(fs: &SimFs) -> Result<Arc<Shard>, felix_storage::StorageError> {
    Shard::options(Path::new(DIR))
        .file_system(FileSystem::new(fs.clone()))
        .config(shard_config())
        .label("sim")
        .open()
        .map(Arc::new)
}

/// An in-memory copy of every object of `store`, so that each crash state
/// is checked against the store as the run left it.
pub fn copy_store(store: &TierStore) -> TierStore {
    let rt = runtime();
    let copy = stores::in_memory();
    rt.block_on(async {
        let objects: Vec<_> = store.list(None).try_collect().await.expect("list");
        for meta in objects {
            let bytes = store
                .get(&meta.location)
                .await
                .expect("get")
                .bytes()
                .await
                .expect("bytes");
            copy.put(&meta.location, bytes.into()).await.expect("put");
        }
    });
    copy
}
