//! The bounded cache of fetched remote bytes.
//!
//! Entries are whole chunks (`TierConfig::chunk_bytes`, aligned in the
//! object) keyed by object and chunk number; the least recently used go
//! first once the total passes the bound. A chunk is cached only after the
//! fetch returned it whole; records in it are verified on every read, so a
//! cached chunk is never trusted more than a fetched one.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use object_store::path::Path;

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<(Path, u64), (Bytes, u64)>,
    bytes: u64,
    tick: u64,
}

/// A bounded LRU of remote chunks.
#[derive(Debug)]
pub(crate) struct ChunkCache {
    limit: u64,
    inner: Mutex<Inner>,
}

impl ChunkCache {
    pub(crate) fn new(limit: u64) -> Self {
        ChunkCache {
            limit,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn get(&self, object: &Path, chunk: u64) -> Option<Bytes> {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let entry = inner.entries.get_mut(&(object.clone(), chunk))?;
        entry.1 = tick;
        Some(entry.0.clone())
    }

    pub(crate) fn insert(&self, object: &Path, chunk: u64, bytes: Bytes) {
        let len = bytes.len() as u64;
        if len > self.limit {
            return;
        }
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        if let Some((old, _)) = inner.entries.insert((object.clone(), chunk), (bytes, tick)) {
            inner.bytes -= old.len() as u64;
        }
        inner.bytes += len;
        while inner.bytes > self.limit {
            let Some(oldest) = inner
                .entries
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((gone, _)) = inner.entries.remove(&oldest) {
                inner.bytes -= gone.len() as u64;
            }
        }
    }

    /// Forgets every chunk of `object` (its segment left the store).
    pub(crate) fn forget(&self, object: &Path) {
        let mut inner = self.lock();
        let doomed: Vec<_> = inner
            .entries
            .keys()
            .filter(|(o, _)| o == object)
            .cloned()
            .collect();
        for k in doomed {
            if let Some((gone, _)) = inner.entries.remove(&k) {
                inner.bytes -= gone.len() as u64;
            }
        }
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> u64 {
        self.lock().bytes
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn stays_within_its_bound_evicting_the_least_recently_used() {
        let cache = ChunkCache::new(10);
        let a = Path::from("a");
        cache.insert(&a, 0, Bytes::from(vec![0; 4]));
        cache.insert(&a, 1, Bytes::from(vec![1; 4]));
        assert!(cache.get(&a, 0).is_some());
        cache.insert(&a, 2, Bytes::from(vec![2; 4]));
        assert_eq!(cache.bytes(), 8);
        assert!(cache.get(&a, 1).is_none());
        assert!(cache.get(&a, 0).is_some() && cache.get(&a, 2).is_some());
        cache.insert(&a, 3, Bytes::from(vec![3; 11]));
        assert!(cache.get(&a, 3).is_none());
        cache.forget(&a);
        assert_eq!(cache.bytes(), 0);
    }
}
