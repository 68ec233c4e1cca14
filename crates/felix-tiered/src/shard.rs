//! [`TieredShard`]: a local shard and its remote copy.

use std::sync::Arc;

use felix_format::ShardKey;
use felix_format::tier_manifest::Manifest;
use felix_storage::Shard;

use crate::cache::ChunkCache;
use crate::config::TierConfig;
use crate::error::TieredError;
use crate::inspect::held_nowhere;
use crate::remote::Remote;
use crate::stores::TierStore;

/// A shard whose old sealed segments live in an object store.
///
/// Appends and recent reads go to the local [`Shard`]; reads below its log
/// start are served from the remote segments the manifest lists.
#[derive(Debug)]
pub struct TieredShard {
    pub(crate) shard: Arc<Shard>,
    pub(crate) key: ShardKey,
    pub(crate) remote: Remote,
    pub(crate) config: TierConfig,
    /// The newest durable manifest; held across an offload or a remote
    /// retention pass so only one changes it at a time.
    pub(crate) manifest: tokio::sync::Mutex<Manifest>,
    /// A copy of the manifest for readers, replaced after each new version
    /// is durable (readers never wait for an upload).
    pub(crate) current: std::sync::RwLock<Arc<Manifest>>,
    pub(crate) cache: ChunkCache,
    /// The highest manifest number seen in the store, decodable or not:
    /// the next version takes a higher one, so an undecodable leftover
    /// (a write whose check failed) never fences this writer.
    pub(crate) highest_seq: std::sync::atomic::AtomicU64,
}

impl TieredShard {
    /// Puts `shard` (whose key is `key`) over `store`, loading its newest
    /// manifest.
    ///
    /// The shard's own retention must be off: this layer decides which
    /// segments leave the disk, after their upload.
    ///
    /// Fails with [`TieredError::HeldNowhere`] when records an offload
    /// deleted locally are not in the store's copy (see [`held_nowhere`]):
    /// the copy was lost, or `store` or the configured prefix is not the
    /// one the shard was offloaded to.
    pub async fn open(
        shard: Arc<Shard>,
        key: ShardKey,
        store: TierStore,
        config: TierConfig,
    ) -> Result<Self, TieredError> {
        config.validate()?;
        let own = shard.config().retention;
        if own.max_bytes.is_some() || own.max_age.is_some() {
            return Err(TieredError::ShardRetentionOn);
        }
        let remote = Remote::new(store, &config.prefix, &key);
        let (loaded, versions) = remote.load_manifest(&key).await?;
        // Records an offload deleted locally must be in the remote copy: a
        // lost copy (or the wrong store or prefix) is refused here, not
        // served as trimmed offsets.
        let log_start = felix_recovery::read_log_start(shard.file_system(), shard.dir());
        held_nowhere(&key, loaded.as_ref(), log_start.start().as_ref())?;
        let highest = versions.iter().map(|(seq, _)| *seq).max().unwrap_or(0);
        let manifest = loaded.unwrap_or_else(|| Manifest {
            seq: 0,
            key: key.clone(),
            start_offset: 0,
            segments: Vec::new(),
        });
        let cache = ChunkCache::new(config.cache_bytes);
        Ok(TieredShard {
            shard,
            key,
            remote,
            current: std::sync::RwLock::new(Arc::new(manifest.clone())),
            manifest: tokio::sync::Mutex::new(manifest),
            config,
            cache,
            highest_seq: std::sync::atomic::AtomicU64::new(highest),
        })
    }

    /// The local shard.
    pub fn local(&self) -> &Arc<Shard> {
        &self.shard
    }

    /// The shard key.
    pub fn key(&self) -> &ShardKey {
        &self.key
    }

    /// The newest durable manifest.
    pub fn manifest(&self) -> Arc<Manifest> {
        match self.current.read() {
            Ok(m) => Arc::clone(&m),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// The remote range `[start, end)`: empty when nothing is offloaded.
    pub fn remote_range(&self) -> std::ops::Range<u64> {
        let m = self.manifest();
        m.start_offset..m.next_offset()
    }

    /// Bytes of remote data the read cache holds now.
    pub fn cached_bytes(&self) -> u64 {
        self.cache.bytes()
    }

    /// The number the next manifest version takes, counted as used.
    pub(crate) fn next_seq(&self, current: u64) -> u64 {
        use std::sync::atomic::Ordering;
        let seq = self.highest_seq.load(Ordering::SeqCst).max(current) + 1;
        self.highest_seq.store(seq, Ordering::SeqCst);
        seq
    }

    pub(crate) fn publish(&self, manifest: &Manifest) {
        let fresh = Arc::new(manifest.clone());
        match self.current.write() {
            Ok(mut m) => *m = fresh,
            Err(poisoned) => *poisoned.into_inner() = fresh,
        }
    }
}
