//! The state machine of a replicated shard: the stream itself.
//!
//! The log *is* the shard, so applying an entry changes nothing but the
//! applied position: applied means committed. What a reader may see is
//! published on a watch channel (the index of the last entry applied), so
//! reads on any replica stop at what this replica knows committed, and
//! waits for the tail wake when it moves.
//!
//! A snapshot is the last entry it covers and the membership there,
//! nothing more, recorded durably in the shard's `raft-snapshot` file
//! (felix-raft's [`save_snapshot`](felix_raft::FelixLogStore::save_snapshot)).
//! It is taken only where the log start moves: a log-start entry
//! ([`Request::LogStart`], from `delete_records_before` or retention)
//! asks for a start `T`; applying it publishes `T`, the group's keeper
//! (`log_start::keep_start`) asks openraft for a snapshot, and this machine
//! builds it **at `T − 1`**, not at the last entry applied, with the
//! membership in force there. openraft then purges the log up to it (the
//! node keeps no entry a snapshot covers), and felix-raft moves the
//! shard's start to `T`. So the snapshot is always the entry just below
//! the log start: a follower that needs entries below a leader's start is
//! sent it, installs it (recorded, then its log purged up to it: its shard
//! restarts at `T` when it held nothing there, the format's replica
//! bootstrap) and is sent the entries from `T`. No committed entry at or
//! after `T` is skipped by any replica.

use std::io::Cursor;
use std::sync::{Arc, Mutex, PoisonError};

use felix_raft::{EntryData, FelixLogStore, TypeConfig};
use futures::{Stream, TryStreamExt};
use openraft::RaftLogReader;
use openraft::alias::{LogIdOf, SnapshotMetaOf, SnapshotOf, StoredMembershipOf};
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder, StoredMembership};
use tokio::sync::watch;

type LogId = LogIdOf<TypeConfig>;
type Meta = SnapshotMetaOf<TypeConfig>;
type Membership = StoredMembershipOf<TypeConfig>;
/// A snapshot of the stream: its meta says everything, its data is empty.
pub(crate) type Snapshot = SnapshotOf<TypeConfig, Cursor<Vec<u8>>>;

#[derive(Debug, Default)]
struct Applied {
    last: Option<LogId>,
    membership: Membership,
    /// Every membership applied since the snapshot (and the snapshot's),
    /// oldest first: a snapshot below the last entry applied takes the
    /// one in force at its entry.
    memberships: Vec<Membership>,
}

/// The stream's state machine. Clones share it.
#[derive(Debug, Clone)]
pub(crate) struct StreamMachine {
    applied: Arc<Mutex<Applied>>,
    /// One past the last applied index (0 before any): the committed
    /// offset readers may read below.
    committed: Arc<watch::Sender<u64>>,
    /// The log start the log-start entries applied ask for (0 before
    /// any): the keeper takes a snapshot at the entry before it.
    start: Arc<watch::Sender<u64>>,
    /// The log, which records the snapshot.
    log: FelixLogStore<TypeConfig>,
    /// Held across each read-compare-write of the recorded snapshot.
    file: Arc<Mutex<()>>,
}

impl StreamMachine {
    /// The state machine of `log`, whose snapshot is recorded at
    /// `recorded` (if any). The wanted start begins just past it, so that
    /// a purge a crash cut short is finished (see `log_start::keep_start`).
    pub(crate) fn new(log: FelixLogStore<TypeConfig>, recorded: Option<LogId>) -> Self {
        let start = recorded.map_or(0, |id| id.index.saturating_add(1));
        Self {
            applied: Arc::default(),
            committed: Arc::new(watch::channel(0).0),
            start: Arc::new(watch::channel(start).0),
            log,
            file: Arc::default(),
        }
    }

    /// One past the last entry applied here.
    pub(crate) fn committed(&self) -> u64 {
        *self.committed.borrow()
    }

    /// A receiver woken whenever entries are applied.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.committed.subscribe()
    }

    /// A receiver of the log start the applied log-start entries ask for.
    pub(crate) fn wanted_start(&self) -> watch::Receiver<u64> {
        self.start.subscribe()
    }

    /// The log start the applied log-start entries ask for (0 before any).
    pub(crate) fn start(&self) -> u64 {
        *self.start.borrow()
    }

    fn applied(&self) -> std::sync::MutexGuard<'_, Applied> {
        self.applied.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves the log start readers see up to `wanted`, never down.
    fn raise_start(&self, wanted: u64) {
        self.start.send_if_modified(|s| {
            let moved = wanted > *s;
            *s = (*s).max(wanted);
            moved
        });
    }

    fn publish(&self, last: Option<LogId>) {
        let next = last.map_or(0, |id| id.index.saturating_add(1));
        self.committed.send_if_modified(|c| {
            let moved = *c != next;
            *c = next;
            moved
        });
    }

    /// The snapshot recorded in the log, as openraft's.
    fn recorded(&self) -> Result<Option<Meta>, std::io::Error> {
        self.log.snapshot().map_err(|e| e.into_io_error())
    }

    /// Records `meta` unless the recorded snapshot is at or past it, and
    /// returns the one recorded then. Builds and installs run in tasks of
    /// their own: the file's lock makes each read-compare-write whole, so
    /// the file never moves backwards.
    fn record(&self, meta: Meta) -> Result<Meta, std::io::Error> {
        let _file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(recorded) = self.recorded()?
            && recorded.last_log_id >= meta.last_log_id
        {
            return Ok(recorded);
        }
        self.log
            .save_snapshot(&meta)
            .map_err(|e| e.into_io_error())?;
        Ok(meta)
    }

    /// The snapshot at the entry before the wanted log start, recorded, if
    /// that is past the recorded one and still in the log; else the
    /// recorded one.
    async fn snapshot_below_start(&self) -> Result<Option<Meta>, std::io::Error> {
        let wanted = *self.start.borrow();
        let last_applied = self.applied().last.map(|id| id.index);
        let Some(target) = wanted
            .checked_sub(1)
            .filter(|&t| last_applied.is_some_and(|l| t <= l))
        else {
            return self.recorded();
        };
        // The entry's id from the log itself (below its start already: a
        // purge went past it, nothing to take).
        let mut reader = self.log.clone();
        let Some(entry) = reader
            .try_get_log_entries(target..target.saturating_add(1))
            .await?
            .pop()
        else {
            return self.recorded();
        };
        let at = |m: &Membership| m.log_id().is_none_or(|id| id.index <= target);
        let membership = {
            let applied = self.applied();
            applied.memberships.iter().rev().find(|m| at(m)).cloned()
        };
        let membership = match membership {
            Some(m) => m,
            None => self
                .recorded()?
                .map(|r| r.last_membership)
                .unwrap_or_default(),
        };
        let recorded = self.record(Meta {
            last_log_id: Some(entry.log_id),
            last_membership: membership,
        })?;
        // What the snapshot holds need not be kept apart any more.
        let mut applied = self.applied();
        let held = |m: &Membership| {
            m.log_id()
                .is_none_or(|id| Some(id.index) <= recorded.last_log_id.map(|l| l.index))
        };
        let kept = applied.memberships.iter().rev().find(|m| held(m)).cloned();
        applied.memberships.retain(|m| !held(m));
        applied
            .memberships
            .insert(0, kept.unwrap_or_else(|| recorded.last_membership.clone()));
        Ok(Some(recorded))
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StreamMachine {
    type SnapshotData = Cursor<Vec<u8>>;

    /// The snapshot at the entry before the wanted log start (see the
    /// module docs), recorded before it is returned; the recorded one when
    /// the start asks for none newer. openraft keeps a snapshot only when
    /// it is past the one it has, so asking again changes nothing.
    ///
    /// A failure to record it (a full disk, when retention is most wanted)
    /// is logged and answered with the recorded snapshot, which openraft
    /// ignores: an error here would stop the group, and the keeper asks
    /// again.
    async fn build_snapshot(&mut self) -> Result<Snapshot, std::io::Error> {
        let meta = match self.snapshot_below_start().await {
            Ok(meta) => meta,
            Err(e) => {
                tracing::warn!(dir = %self.log.dir().display(), error = %e, "snapshot at the log start not recorded");
                self.recorded().ok().flatten()
            }
        };
        Ok(Snapshot {
            meta: meta.unwrap_or_default(),
            snapshot: Cursor::new(Vec::new()),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StreamMachine {
    type SnapshotData = Cursor<Vec<u8>>;
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, Membership), std::io::Error> {
        let applied = self.applied();
        Ok((applied.last, applied.membership.clone()))
    }

    async fn apply<S>(&mut self, mut entries: S) -> Result<(), std::io::Error>
    where
        S: Stream<Item = Result<EntryResponder<TypeConfig>, std::io::Error>> + Unpin + OptionalSend,
    {
        let mut last = None;
        let mut start = None;
        while let Some((entry, responder)) = entries.try_next().await? {
            let index = entry.log_id.index;
            {
                let mut applied = self.applied();
                applied.last = Some(entry.log_id);
                match entry.payload {
                    EntryPayload::Membership(m) => {
                        let stored = StoredMembership::new(Some(entry.log_id), m);
                        applied.memberships.push(stored.clone());
                        applied.membership = stored;
                    }
                    // The entry itself stays: a start past it is cut to it.
                    EntryPayload::Normal(ref request) => {
                        if let Some(wanted) = request.log_start() {
                            start = Some(wanted.min(index).max(start.unwrap_or(0)));
                        }
                    }
                    EntryPayload::Blank => {}
                }
            }
            last = Some(entry.log_id);
            if let Some(responder) = responder {
                responder.send(index);
            }
        }
        if last.is_some() {
            self.publish(last);
        }
        if let Some(wanted) = start {
            self.raise_start(wanted);
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self {
        self.clone()
    }

    /// Records the leader's snapshot (or, at a restart, the one recorded
    /// already: then nothing is written) and takes its position: every
    /// entry up to its last is applied, and the membership is its.
    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        _snapshot: Cursor<Vec<u8>>,
    ) -> Result<(), std::io::Error> {
        self.record(meta.clone())?;
        {
            let mut applied = self.applied();
            applied.last = meta.last_log_id;
            applied.membership = meta.last_membership.clone();
            applied.memberships = vec![meta.last_membership.clone()];
        }
        // A snapshot at S is only ever taken for a log start at S + 1: the
        // records up to S are deleted here too. The start moves before the
        // commit index does, so that a follower whose log holds other
        // entries up to S (cut off in an older term, until openraft purges
        // them after this install) never serves them as committed.
        if let Some(last) = meta.last_log_id {
            self.raise_start(last.index.saturating_add(1));
        }
        self.publish(meta.last_log_id);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, std::io::Error> {
        Ok(self.recorded()?.map(|meta| Snapshot {
            meta,
            snapshot: Cursor::new(Vec::new()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use felix_raft::LogId;

    #[tokio::test]
    async fn installing_a_snapshot_moves_the_start_and_the_commit_index_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = FelixLogStore::<TypeConfig>::options(dir.path())
            .open()
            .unwrap();
        let mut machine = StreamMachine::new(log, None);
        let mut start = machine.wanted_start();
        let committed = machine.watch();
        let members = openraft::Membership::new(
            vec![[1u64].into()],
            std::collections::BTreeMap::from([(1u64, openraft::BasicNode::new("a:1"))]),
        )
        .unwrap();
        let meta = Meta {
            last_log_id: Some(LogId::new_term_index(3, 20)),
            last_membership: StoredMembership::new(Some(LogId::new_term_index(1, 0)), members),
        };
        machine
            .install_snapshot(&meta, Cursor::new(Vec::new()))
            .await
            .unwrap();
        assert_eq!((machine.start(), machine.committed()), (21, 21));
        // Readers waiting on either are told.
        assert!(start.has_changed().unwrap());
        assert_eq!(*start.borrow_and_update(), 21);
        assert_eq!(*committed.borrow(), 21);
    }
}
