//! Claims on keys: how a store opens, creates, closes, reopens and deletes
//! a shard without holding its map's lock while it does.
//!
//! An open recovers the shard (its newest segment scanned, its index
//! checked, a torn tail repaired) and a close makes it durable: held
//! through them, the map's lock made every caller of the store wait for
//! the slowest, so a shard recovering a large segment after a crash held
//! up even [`Store::open_shard`] of the shards already open, and opens of
//! different shards never ran at once. Instead a caller claims the key
//! under the lock, works without it, and puts what it opened in the map
//! under it again. A second caller for a claimed key waits until the claim
//! is released (then finds the shard open, or not); callers for other keys
//! go on meanwhile.
//!
//! Invariants:
//!
//! * A key is claimed by at most one caller: the one who opens, closes or
//!   deletes a shard is the only one touching its files. A claimed key's
//!   shard may still be in the map (a close takes it out after claiming),
//!   but it is never taken out as idle by another caller.
//! * An idle shard closed to make room is claimed until its close
//!   returns, so an open of it waits instead of finding its lock held.
//! * Claims that will open a shard count against
//!   [`StoreConfig::max_open_shards`](crate::StoreConfig::max_open_shards)
//!   from the claim on, and so do shards a close or a delete has taken
//!   out of the map until their claims are released; each caller closes
//!   the idle shards it took before opening its own. So shards holding
//!   descriptors outnumber the budget only while callers hold handles to
//!   more shards than it, or more callers than it open shards at once (no
//!   caller waits for room: an open proceeds when nothing idle is left to
//!   close).
//! * [`Store::close`] waits for every claim to be released before it closes
//!   the open shards, so a shard opened meanwhile is closed with the rest;
//!   once the store is closed, nothing new is claimed.

use std::sync::{Arc, PoisonError};

use felix_format::ShardKey;

use super::{Inner, Store, lock};
use crate::error::{Result, StorageError};
use crate::shard::Shard;

/// A key one caller has claimed; released, and the callers waiting for it
/// woken, when dropped.
#[must_use]
pub(super) struct Claim<'a> {
    inner: &'a Inner,
    key: ShardKey,
    /// Whether the claim ends with the shard open (it counts against the
    /// budget).
    opening: bool,
    /// Whether [`Claim::take_to_close`] took its shard (counted against
    /// the budget until released).
    closing: bool,
    /// Set once [`Claim::publish`] has released it.
    released: bool,
}

impl Store {
    /// Waits until no other caller has `key` claimed, then claims it;
    /// `opening` when the claim is to end with its shard open.
    /// [`StorageError::StoreClosed`] once the store is closed, waiting or
    /// not.
    pub(super) fn claim(&self, key: &ShardKey, opening: bool) -> Result<Claim<'_>> {
        let mut shards = self.shards()?;
        while shards.is_claimed(key) {
            shards = self
                .inner
                .settled
                .wait(shards)
                .unwrap_or_else(PoisonError::into_inner);
            if *lock(&self.inner.stop) {
                return Err(self.closed());
            }
        }
        shards.claim(key.clone(), opening);
        Ok(Claim {
            inner: &self.inner,
            key: key.clone(),
            opening,
            closing: false,
            released: false,
        })
    }

    /// Waits until every claim is released.
    pub(super) fn await_claims(&self) {
        let mut shards = lock(&self.inner.shards);
        while shards.has_claims() {
            shards = self
                .inner
                .settled
                .wait(shards)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Claim<'_> {
    /// The claimed key's shard, if it is open (a caller before this one
    /// opened it), marked as used now.
    pub(super) fn open_shard(&self) -> Option<Arc<Shard>> {
        lock(&self.inner.shards).get(&self.key)
    }

    /// Whether the claimed key's shard is open.
    pub(super) fn is_open(&self) -> bool {
        lock(&self.inner.shards).contains_key(&self.key)
    }

    /// Takes the claimed key's shard out of the map, if it is open, for
    /// the claimer to close before it opens the key again (a reopen: the
    /// claim's open already counts against the budget).
    pub(super) fn take_open(&self) -> Option<Arc<Shard>> {
        lock(&self.inner.shards).remove(&self.key)
    }

    /// Takes the claimed key's shard out of the map, if it is open, for
    /// the claimer to close for good (a close, a delete): counted against
    /// the budget until the claim is released, as its descriptors are
    /// held until then.
    pub(super) fn take_to_close(&mut self) -> Option<Arc<Shard>> {
        let shard = lock(&self.inner.shards).take_to_close(&self.key);
        self.closing |= shard.is_some();
        shard
    }

    /// Closes idle shards (least recently used first, none a caller holds)
    /// so that the one this claim opens fits within
    /// [`StoreConfig::max_open_shards`](crate::StoreConfig::max_open_shards),
    /// without the map's lock. A close that fails (a poisoned shard) is
    /// logged: its lock is released all the same, and the next open
    /// recovers what it held.
    pub(super) fn make_room(&self) {
        let budget = usize::try_from(self.inner.config.max_open_shards).unwrap_or(usize::MAX);
        let taken = lock(&self.inner.shards).take_idle(budget);
        // Every key `take_idle` claimed for this caller gets its guard
        // before any close runs, so a close that panics leaves none
        // claimed for ever.
        let taken: Vec<_> = taken
            .into_iter()
            .map(|(key, shard)| {
                let claim = Claim {
                    inner: self.inner,
                    key,
                    opening: false,
                    closing: false,
                    released: false,
                };
                (claim, shard)
            })
            .collect();
        for (claim, shard) in taken {
            if let Err(err) = shard.close_for_store() {
                tracing::warn!(shard = shard.label(), error = %err, "closing an idle shard failed; its next open recovers it");
            }
            drop(claim);
        }
    }

    /// Puts `shard`, opened under this claim, in the map and releases the
    /// claim: from now on every caller asking for the key gets it.
    pub(super) fn publish(mut self, shard: &Arc<Shard>) {
        // In one step, so the shard is never counted both as open and as
        // being opened.
        let mut shards = lock(&self.inner.shards);
        shards.insert(self.key.clone(), Arc::clone(shard));
        shards.release(&self.key, self.opening, self.closing);
        drop(shards);
        self.released = true;
        self.inner.settled.notify_all();
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if !self.released {
            lock(&self.inner.shards).release(&self.key, self.opening, self.closing);
            self.inner.settled.notify_all();
        }
    }
}

impl Store {
    /// The error of a call on a closed store.
    pub(super) fn closed(&self) -> StorageError {
        StorageError::StoreClosed {
            root: self.inner.root.clone(),
        }
    }
}
