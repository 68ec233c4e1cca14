//! The shards a store has open, the keys callers have claimed (see
//! `claims.rs`), and which shards it closes to stay within
//! [`StoreConfig::max_open_shards`](crate::StoreConfig::max_open_shards):
//! the least recently used that no caller holds a handle to.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use felix_format::ShardKey;

use crate::shard::Shard;

/// The open shards, each with when it was last handed out.
#[derive(Debug, Default)]
pub(super) struct OpenShards {
    /// Keyed by the key `by_use` shares, so a hand-out moves it there
    /// without a copy.
    shards: HashMap<Arc<ShardKey>, Entry>,
    /// The open shards by `used`, least recently used first.
    by_use: BTreeMap<u64, Arc<ShardKey>>,
    /// Counts hand-outs: a shard's `used` is the count at its last one.
    clock: u64,
    /// The keys callers have claimed to open, create, close, reopen or
    /// delete their shards without holding the map's lock: another caller
    /// for one of them waits until its claim is released.
    claimed: HashSet<ShardKey>,
    /// How many claims end with a shard open (an open, a create, a
    /// reopen): they count against the budget from the claim on, so that
    /// callers opening shards at once stay within it together.
    opening: usize,
    /// How many claims close a shard taken out of the map (a close or a
    /// delete) and have not yet released it: its descriptors are held
    /// until then, so they count against the budget too. (An idle shard
    /// closed to make room is not counted: the claim of the open it makes
    /// room for is, and that open begins only once the close returns.)
    closing: usize,
}

#[derive(Debug)]
struct Entry {
    shard: Arc<Shard>,
    /// Set through a shared reference, so that a hand-out needs one look-up
    /// that returns the map's key too.
    used: Cell<u64>,
}

impl OpenShards {
    /// The open shard of `key`, marked as used now.
    pub(super) fn get(&mut self, key: &ShardKey) -> Option<Arc<Shard>> {
        let (shared, entry) = self.shards.get_key_value(key)?;
        self.clock += 1;
        self.by_use.remove(&entry.used.replace(self.clock));
        self.by_use.insert(self.clock, Arc::clone(shared));
        Some(Arc::clone(&entry.shard))
    }

    pub(super) fn contains_key(&self, key: &ShardKey) -> bool {
        self.shards.contains_key(key)
    }

    /// Adds the newly opened `shard` of `key`, marked as used now.
    pub(super) fn insert(&mut self, key: ShardKey, shard: Arc<Shard>) {
        self.clock += 1;
        let used = self.clock;
        let shared = Arc::new(key);
        self.by_use.insert(used, Arc::clone(&shared));
        let entry = Entry {
            shard,
            used: Cell::new(used),
        };
        if let Some(old) = self.shards.insert(shared, entry) {
            self.by_use.remove(&old.used.get());
        }
    }

    pub(super) fn remove(&mut self, key: &ShardKey) -> Option<Arc<Shard>> {
        let entry = self.shards.remove(key)?;
        self.by_use.remove(&entry.used.get());
        Some(entry.shard)
    }

    pub(super) fn is_claimed(&self, key: &ShardKey) -> bool {
        self.claimed.contains(key)
    }

    /// Whether any key is claimed.
    pub(super) fn has_claims(&self) -> bool {
        !self.claimed.is_empty()
    }

    /// Claims `key`, which no one has claimed; `opening` when the claim
    /// ends with its shard open.
    pub(super) fn claim(&mut self, key: ShardKey, opening: bool) {
        let fresh = self.claimed.insert(key);
        debug_assert!(fresh, "a key claimed twice");
        self.opening += usize::from(opening);
    }

    /// Releases the claim on `key`, made with the same `opening`;
    /// `closing` when [`OpenShards::take_to_close`] took its shard.
    pub(super) fn release(&mut self, key: &ShardKey, opening: bool, closing: bool) {
        let held = self.claimed.remove(key);
        debug_assert!(held, "a claim released that was not made");
        self.opening -= usize::from(opening);
        self.closing -= usize::from(closing);
    }

    /// Removes the open shard of the claimed `key` for its claimer to
    /// close, counting it against the budget until the claim is released.
    pub(super) fn take_to_close(&mut self, key: &ShardKey) -> Option<Arc<Shard>> {
        debug_assert!(self.claimed.contains(key), "taken without a claim");
        let shard = self.remove(key)?;
        self.closing += 1;
        Some(shard)
    }

    /// Every open shard, removed.
    pub(super) fn drain(&mut self) -> Vec<Arc<Shard>> {
        debug_assert!(self.claimed.is_empty(), "drained while claims run");
        self.by_use.clear();
        self.shards.drain().map(|(_, e)| e.shard).collect()
    }

    /// Every open shard.
    pub(super) fn handles(&self) -> Vec<Arc<Shard>> {
        self.shards.values().map(|e| Arc::clone(&e.shard)).collect()
    }

    /// Removes shards, least recently used first, until the open ones, the
    /// claims that will open one and the shards being closed by a close or
    /// a delete number at most `budget`, choosing
    /// only shards no caller holds a handle to or has claimed (the map's is then the only
    /// one, and no new one can be made while the caller holds the map's
    /// lock): a closed shard's handle would fail, so a held one is never
    /// closed, and the store is over its budget while callers hold more.
    /// Each removed shard's key is claimed (not opening) for the caller,
    /// who closes the shard and then releases the claim, so an open of it
    /// waits for its close.
    pub(super) fn take_idle(&mut self, budget: usize) -> Vec<(ShardKey, Arc<Shard>)> {
        let mut taken = Vec::new();
        while self.shards.len() + self.opening + self.closing > budget {
            let idle = self
                .by_use
                .values()
                .map(|key| &**key)
                .find(|key| {
                    // A claimed one is its claimer's to close or hand out.
                    !self.claimed.contains(*key)
                        && self
                            .shards
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
            self.claim(key.clone(), false);
            taken.push((key, shard));
        }
        taken
    }
}
