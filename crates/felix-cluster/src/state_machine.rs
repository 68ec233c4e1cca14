//! The state machine of a replicated shard: the stream itself.
//!
//! The log *is* the shard, so applying an entry changes nothing but the
//! applied position: applied means committed. What a reader may see is
//! published on a watch channel (the index of the last entry applied), so
//! reads on any replica stop at what this replica knows committed, and
//! waits for the tail wake when it moves. A snapshot is the last applied
//! log id and the membership, nothing more: a follower that installs one
//! has its log purged up to it by openraft (felix-raft moves the shard's
//! start past it, or resets the shard at the snapshot's next offset when
//! that is past the log's end, the format's replica bootstrap). With the
//! node's snapshot policy `Never` and no purge, no leader sends one.

use std::io::Cursor;
use std::sync::{Arc, Mutex, PoisonError};

use felix_raft::TypeConfig;
use futures::{Stream, TryStreamExt};
use openraft::alias::{LogIdOf, SnapshotMetaOf, SnapshotOf, StoredMembershipOf};
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder, StoredMembership};
use tokio::sync::watch;

type LogId = LogIdOf<TypeConfig>;
type Meta = SnapshotMetaOf<TypeConfig>;
/// A snapshot of the stream: its meta says everything, its data is empty.
pub(crate) type Snapshot = SnapshotOf<TypeConfig, Cursor<Vec<u8>>>;

#[derive(Debug, Default)]
struct Applied {
    last: Option<LogId>,
    membership: StoredMembershipOf<TypeConfig>,
    snapshot: Option<Meta>,
}

/// The stream's state machine. Clones share it.
#[derive(Debug, Clone)]
pub(crate) struct StreamMachine {
    applied: Arc<Mutex<Applied>>,
    /// One past the last applied index (0 before any): the committed
    /// offset readers may read below.
    committed: Arc<watch::Sender<u64>>,
}

impl StreamMachine {
    pub(crate) fn new() -> Self {
        Self {
            applied: Arc::default(),
            committed: Arc::new(watch::channel(0).0),
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

    fn applied(&self) -> std::sync::MutexGuard<'_, Applied> {
        self.applied.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn publish(&self, last: Option<LogId>) {
        let next = last.map_or(0, |id| id.index.saturating_add(1));
        self.committed.send_if_modified(|c| {
            let moved = *c != next;
            *c = next;
            moved
        });
    }

    fn meta(applied: &Applied) -> Meta {
        Meta {
            last_log_id: applied.last,
            last_membership: applied.membership.clone(),
        }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StreamMachine {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn build_snapshot(&mut self) -> Result<Snapshot, std::io::Error> {
        let mut applied = self.applied();
        let meta = Self::meta(&applied);
        applied.snapshot = Some(meta.clone());
        Ok(Snapshot {
            meta,
            snapshot: Cursor::new(Vec::new()),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StreamMachine {
    type SnapshotData = Cursor<Vec<u8>>;
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembershipOf<TypeConfig>), std::io::Error> {
        let applied = self.applied();
        Ok((applied.last, applied.membership.clone()))
    }

    async fn apply<S>(&mut self, mut entries: S) -> Result<(), std::io::Error>
    where
        S: Stream<Item = Result<EntryResponder<TypeConfig>, std::io::Error>> + Unpin + OptionalSend,
    {
        let mut last = None;
        while let Some((entry, responder)) = entries.try_next().await? {
            let index = entry.log_id.index;
            {
                let mut applied = self.applied();
                applied.last = Some(entry.log_id);
                if let EntryPayload::Membership(m) = entry.payload {
                    applied.membership = StoredMembership::new(Some(entry.log_id), m);
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
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self {
        self.clone()
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        _snapshot: Cursor<Vec<u8>>,
    ) -> Result<(), std::io::Error> {
        {
            let mut applied = self.applied();
            applied.last = meta.last_log_id;
            applied.membership = meta.last_membership.clone();
            applied.snapshot = Some(meta.clone());
        }
        self.publish(meta.last_log_id);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, std::io::Error> {
        Ok(self.applied().snapshot.clone().map(|meta| Snapshot {
            meta,
            snapshot: Cursor::new(Vec::new()),
        }))
    }
}
