//! The shards a store has open, and which of them it closes to stay within
//! [`StoreConfig::max_open_shards`](crate::StoreConfig::max_open_shards):
//! the least recently used that no caller holds a handle to.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use felix_format::ShardKey;

use crate::shard::Shard;

/// The open shards, each with when it was last handed out.
#[derive(Debug, Default)]
pub(super) struct OpenShards {
    shards: HashMap<ShardKey, Entry>,
    /// The open shards by `used`, least recently used first.
    by_use: BTreeMap<u64, ShardKey>,
    /// Counts hand-outs: a shard's `used` is the count at its last one.
    clock: u64,
}

#[derive(Debug)]
struct Entry {
    shard: Arc<Shard>,
    used: u64,
}

impl OpenShards {
    /// The open shard of `key`, marked as used now.
    pub(super) fn get(&mut self, key: &ShardKey) -> Option<Arc<Shard>> {
        let entry = self.shards.get_mut(key)?;
        self.clock += 1;
        self.by_use.remove(&entry.used);
        entry.used = self.clock;
        self.by_use.insert(self.clock, key.clone());
        Some(Arc::clone(&entry.shard))
    }

    pub(super) fn contains_key(&self, key: &ShardKey) -> bool {
        self.shards.contains_key(key)
    }

    /// Adds the newly opened `shard` of `key`, marked as used now.
    pub(super) fn insert(&mut self, key: ShardKey, shard: Arc<Shard>) {
        self.clock += 1;
        let used = self.clock;
        self.by_use.insert(used, key.clone());
        if let Some(old) = self.shards.insert(key, Entry { shard, used }) {
            self.by_use.remove(&old.used);
        }
    }

    pub(super) fn remove(&mut self, key: &ShardKey) -> Option<Arc<Shard>> {
        let entry = self.shards.remove(key)?;
        self.by_use.remove(&entry.used);
        Some(entry.shard)
    }

    /// Every open shard, removed.
    pub(super) fn drain(&mut self) -> Vec<Arc<Shard>> {
        self.by_use.clear();
        self.shards.drain().map(|(_, e)| e.shard).collect()
    }

    /// Every open shard.
    pub(super) fn handles(&self) -> Vec<Arc<Shard>> {
        self.shards.values().map(|e| Arc::clone(&e.shard)).collect()
    }

    /// Closes shards, least recently used first, until at most `keep`
    /// remain open, choosing only shards no caller holds a handle to (the
    /// map's is then the only one, and no new one can be made while the
    /// caller holds the map's lock): a closed shard's handle would fail, so
    /// a held one is never closed, and the store is over its budget while
    /// callers hold more than `keep` shards. Returns how many were closed.
    ///
    /// A close that fails (a poisoned shard) is logged: its lock is released
    /// all the same, and the next open recovers what it held.
    pub(super) fn close_idle(&mut self, keep: usize) -> usize {
        let mut closed = 0;
        while self.shards.len() > keep {
            let idle = self
                .by_use
                .values()
                .find(|key| {
                    self.shards
                        .get(*key)
                        .is_some_and(|e| Arc::strong_count(&e.shard) == 1)
                })
                .cloned();
            let Some(key) = idle else {
                break;
            };
            let Some(shard) = self.remove(&key) else {
                break;
            };
            if let Err(err) = shard.close_for_store() {
                tracing::warn!(shard = shard.label(), error = %err, "closing an idle shard failed; its next open recovers it");
            }
            closed += 1;
        }
        closed
    }
}
