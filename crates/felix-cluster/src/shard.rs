//! A replicated shard as one node hosts it: the local face of a group,
//! mirroring a local felix shard's.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use felix_raft::TypeConfig;
use felix_storage::{ReadBound, ShardKey};
use futures::StreamExt;
use openraft::error::{ChangeMembershipError, ClientWriteError, ForwardToLeader, RaftError};
use openraft::rt::watch::WatchReceiver;
use openraft::{BasicNode, ChangeMembers};

use crate::batch::ReadBatch;
use crate::error::ShardError;
use crate::node::{Group, Shared};
use crate::wire::ShardOffsets;

/// The largest replicated record: a quarter of a frame, so that one always
/// travels in an AppendEntries of its own (see `network.rs`).
pub const MAX_RECORD_BYTES: usize = crate::wire::MAX_FRAME / 4;

/// The most records one append takes: 65,536. What one request makes a
/// node hold (an entry and a waiter per record) stays bounded whatever the
/// records' sizes, and its answer, an offset per record, always fits in a
/// frame. A producer with more sends them in several appends.
pub const MAX_APPEND_RECORDS: usize = 1 << 16;

/// How many of the longest election timeouts a learner being added may
/// take no entry before [`ReplicatedShard::add_node`] gives up on it.
const LEARNER_STALL_TIMEOUTS: u32 = 10;

/// How many times a membership change waits for the one before to commit.
const CHANGE_RETRIES: u32 = 50;
/// How long each such wait is.
const CHANGE_RETRY_PAUSE: Duration = Duration::from_millis(20);

/// A replicated shard hosted by this node ([`Node::shard`](crate::Node::shard)).
///
/// Appends and membership changes go through the shard's leader (on
/// another node, they fail with [`ShardError::NotLeader`] naming it);
/// reads, waits and time lookups are served here, from this replica, up
/// to the commit index it knows. Cheap to clone.
#[derive(Clone)]
pub struct ReplicatedShard {
    key: ShardKey,
    group: Group,
    shared: Arc<Shared>,
}

impl ReplicatedShard {
    pub(crate) fn new(key: ShardKey, group: Group, shared: Arc<Shared>) -> Self {
        Self { key, group, shared }
    }

    /// The shard's key.
    pub fn key(&self) -> &ShardKey {
        &self.key
    }

    fn shard(&self) -> String {
        self.key.to_string()
    }

    fn stopped(&self, reason: impl std::fmt::Display) -> ShardError {
        ShardError::Stopped {
            shard: self.shard(),
            reason: reason.to_string(),
        }
    }

    /// The leader this replica knows of, if any.
    pub fn leader(&self) -> Option<u64> {
        self.group.raft.metrics().borrow_watched().current_leader
    }

    /// The shard's offsets on this replica: `committed` is one past the
    /// last entry it knows committed (what it serves).
    ///
    /// `base` is where the log begins for a reader: the start the last
    /// applied log-start entry asked for, from the moment it is applied,
    /// even while this replica's snapshot and purge up to it are still
    /// under way (the records below it are on their way out, and no
    /// replica serves them).
    pub fn offsets(&self) -> ShardOffsets {
        let local = self.group.log.shard().offsets();
        let committed = self.group.machine.committed();
        let asked = self.group.machine.start().min(committed.max(local.base));
        ShardOffsets {
            base: local.base.max(asked),
            committed,
            written: local.written,
        }
    }

    /// Appends `records` (each stamped with this leader's clock) and
    /// returns their offsets once a majority of the replicas holds them
    /// durably.
    ///
    /// Errors: [`ShardError::NotLeader`] (nothing appended) when this
    /// replica does not lead; [`ShardError::OutcomeUnknown`] when
    /// leadership was lost after the records were appended here, so they
    /// may or may not be committed; [`ShardError::Stopped`] when the group
    /// stopped (its storage failed, or the node is shutting down);
    /// [`ShardError::TooManyRecords`] (more than [`MAX_APPEND_RECORDS`]) and
    /// [`ShardError::RecordTooLarge`] (a record over [`MAX_RECORD_BYTES`])
    /// with nothing appended.
    pub async fn append(&self, records: Vec<Vec<u8>>) -> Result<Vec<u64>, ShardError> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        if records.len() > MAX_APPEND_RECORDS {
            return Err(ShardError::TooManyRecords {
                shard: self.shard(),
                records: records.len(),
                max: MAX_APPEND_RECORDS,
            });
        }
        if let Some((index, record)) = records
            .iter()
            .enumerate()
            .find(|(_, r)| r.len() > MAX_RECORD_BYTES)
        {
            return Err(ShardError::RecordTooLarge {
                shard: self.shard(),
                index,
                bytes: record.len(),
                max: MAX_RECORD_BYTES,
            });
        }
        let count = records.len();
        let requests = records.into_iter().map(felix_raft::Request::new);
        // A quiet group wakes before its leader writes.
        self.group.stir().await;
        // Nothing is submitted if this fails.
        let mut results = self
            .group
            .raft
            .client_write_many(requests)
            .await
            .map_err(|f| self.stopped(f))?;
        let mut offsets = Vec::with_capacity(count);
        while let Some(result) = results.next().await {
            match result {
                Ok(Ok(written)) => offsets.push(written.log_id.index),
                Ok(Err(e)) if offsets.is_empty() => {
                    return Err(self.write_error(RaftError::APIError(e)));
                }
                // Part of the batch is committed: the rest's fate is unknown.
                Ok(Err(e)) => {
                    return Err(ShardError::OutcomeUnknown {
                        shard: self.shard(),
                        reason: format!(
                            "{} of {count} records committed, then: {e}",
                            offsets.len()
                        ),
                    });
                }
                // Submitted, then the group stopped (shutting down, or its
                // storage failed): the records may yet commit elsewhere.
                Err(fatal) => {
                    return Err(ShardError::OutcomeUnknown {
                        shard: self.shard(),
                        reason: format!(
                            "{} of {count} records committed, then the group stopped: {fatal}",
                            offsets.len()
                        ),
                    });
                }
            }
        }
        Ok(offsets)
    }

    /// [`ShardError::Stopped`] when the group stopped here (its storage
    /// failed): a stopped replica serves nothing, not even what it held.
    fn check_running(&self) -> Result<(), ShardError> {
        match &self.group.raft.metrics().borrow_watched().running_state {
            Ok(()) => Ok(()),
            Err(fatal) => Err(self.stopped(fatal)),
        }
    }

    /// Committed records from `from`, about `max_bytes` of them (at least
    /// one when one is committed there), served by this replica: the runs
    /// of record bytes its segments hold
    /// ([`Shard::read_runs`](felix_storage::Shard::read_runs)), nothing
    /// copied per record.
    ///
    /// A leader's blank entry and membership changes take an offset and
    /// hold no producer's record: [`ReadBatch::records`] steps over them,
    /// and [`ReadBatch::next`] is past them.
    pub fn read(&self, from: u64, max_bytes: u64) -> Result<ReadBatch, ShardError> {
        self.check_running()?;
        let offsets = self.offsets();
        if from < offsets.base {
            return Err(ShardError::Trimmed {
                shard: self.shard(),
                offset: from,
                start: offsets.base,
            });
        }
        let runs = if from < offsets.committed {
            self.group
                .log
                .shard()
                .read_runs(from, max_bytes, ReadBound::Below(offsets.committed))
                .map_err(|source| match source {
                    // The start moved since it was looked at.
                    felix_storage::StorageError::Trimmed { oldest, .. } => ShardError::Trimmed {
                        shard: self.shard(),
                        offset: from,
                        start: oldest,
                    },
                    source => ShardError::Storage {
                        shard: self.shard(),
                        source: Box::new(source),
                    },
                })?
        } else {
            Vec::new()
        };
        Ok(ReadBatch::read(runs, from, offsets))
    }

    /// Waits until an entry at `from` is committed here, at most
    /// `timeout`; returns whether one is.
    pub async fn wait_readable(&self, from: u64, timeout: Duration) -> bool {
        let mut committed = self.group.machine.watch();
        if *committed.borrow() > from {
            return true;
        }
        let wait = committed.wait_for(|c| *c > from);
        matches!(tokio::time::timeout(timeout, wait).await, Ok(Ok(_)))
    }

    /// The offset of the first committed record at or after the log start
    /// ([`offsets`](Self::offsets)`.base`) whose timestamp is at least
    /// `timestamp_micros`, if any: the same answer on every replica that
    /// knows the same commit index and start (every replica holds the
    /// same records with the same times, set by the leader that took
    /// them).
    pub fn offset_for_timestamp(&self, timestamp_micros: u64) -> Result<Option<u64>, ShardError> {
        self.check_running()?;
        let offsets = self.offsets();
        // From the start a committed entry set, which is above the shard's
        // own until the snapshot at it is taken and the log purged.
        self.group
            .log
            .shard()
            .offset_for_timestamp_from(
                timestamp_micros,
                offsets.base,
                ReadBound::Below(offsets.committed),
            )
            .map(|hit| hit.map(|h| h.offset))
            .map_err(|source| ShardError::Storage {
                shard: self.shard(),
                source: Box::new(source),
            })
    }

    /// Deletes every record before `offset` on every replica (Kafka's
    /// DeleteRecords), through the log: appends a log-start entry and
    /// returns once a majority holds it and this leader applied it. From
    /// the moment a replica applies the entry, reads below `offset` there
    /// are [`ShardError::Trimmed`] and [`offsets`](Self::offsets) begin at
    /// it; the records' files go when its snapshot at the entry before
    /// `offset` (recorded in the shard's `raft-snapshot` file) is taken and
    /// its log purged up to it, moments later. A replica that missed the
    /// records below the start is sent the snapshot and restarts its shard
    /// at `offset`.
    ///
    /// Returns where the log begins then: `offset`, or the current start
    /// when that is at or past it (the start never moves backwards, and
    /// nothing is appended then). An `offset` past the committed end is
    /// [`ShardError::DeletePastEnd`], nothing appended. Only on the
    /// leader: elsewhere [`ShardError::NotLeader`], naming it.
    pub async fn delete_records_before(&self, offset: u64) -> Result<u64, ShardError> {
        self.check_running()?;
        let leader = self.leader();
        if leader != Some(self.shared.id) {
            return Err(ShardError::NotLeader {
                shard: self.shard(),
                leader: leader.map(|id| (id, self.shared.address_of(id).unwrap_or_default())),
            });
        }
        let offsets = self.offsets();
        if offset <= offsets.base {
            return Ok(offsets.base);
        }
        if offset > offsets.committed {
            return Err(ShardError::DeletePastEnd {
                shard: self.shard(),
                offset,
                committed: offsets.committed,
            });
        }
        self.group.stir().await;
        self.group
            .raft
            .client_write(felix_raft::Request::LogStart { start: offset })
            .await
            .map_err(|e| self.write_error(e))?;
        tracing::info!(node = self.shared.id, shard = %self.key, start = offset, "log start moved");
        Ok(self.offsets().base.max(offset))
    }

    /// Adds node `node` at `addr`: a learner first, which is sent every
    /// entry; once it holds every entry the leader held when it was added,
    /// a voter. Its data moves by replication alone. Only on the leader;
    /// waits as long as the catch-up takes, unless leadership moves or the
    /// learner is removed meanwhile ([`ShardError::NotLeader`],
    /// [`ShardError::Refused`]), or the learner takes no entry for ten of
    /// the longest election timeouts ([`ShardError::LearnerStalled`]: 10 s
    /// with the default timings). A stalled learner stays a learner (it
    /// counts in no quorum): add it again once it is reachable, or remove
    /// it.
    pub async fn add_node(&self, node: u64, addr: String) -> Result<(), ShardError> {
        self.group.stir().await;
        let added = self
            .group
            .raft
            .add_learner(node, BasicNode { addr: addr.clone() }, false)
            .await
            .map_err(|e| self.write_error(e))?;
        // Learned only once the leader took it.
        self.shared.learn(node, &addr);
        // openraft's own wait ends within `replication_lag_threshold`
        // entries of the end (5,000 by default, which may be gigabytes):
        // wait for everything up to the learner's own membership entry.
        let target = added.log_id.index;
        let mut metrics = self.group.raft.metrics();
        // A learner that takes no entry for ten election timeouts is not
        // catching up (an address nothing answers at, a node down): the
        // wait ends there, where a large catch-up that progresses waits on.
        let stall = Duration::from_millis(self.group.raft.config().election_timeout_max)
            .saturating_mul(LEARNER_STALL_TIMEOUTS);
        let mut progress: (Option<u64>, tokio::time::Instant) = (None, tokio::time::Instant::now());
        loop {
            {
                let m = metrics.borrow_watched();
                let Some(replication) = &m.replication else {
                    return Err(ShardError::NotLeader {
                        shard: self.shard(),
                        leader: m
                            .current_leader
                            .map(|id| (id, self.shared.address_of(id).unwrap_or_default())),
                    });
                };
                if m.membership_config.membership().get_node(&node).is_none() {
                    return Err(ShardError::Refused {
                        shard: self.shard(),
                        reason: format!("node {node} was removed while it caught up"),
                    });
                }
                let matched = replication
                    .get(&node)
                    .and_then(|matched| matched.as_ref())
                    .map(|matched| matched.index);
                if matched.is_some_and(|matched| matched >= target) {
                    break;
                }
                if matched > progress.0 {
                    progress = (matched, tokio::time::Instant::now());
                }
            }
            let deadline = progress.1 + stall;
            match tokio::time::timeout_at(deadline, metrics.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => {
                    return Err(self.stopped("the group stopped while the learner caught up"));
                }
                Err(_) => {
                    return Err(ShardError::LearnerStalled {
                        shard: self.shard(),
                        learner: node,
                        addr,
                        matched: progress.0,
                        target,
                        stalled: stall,
                    });
                }
            }
        }
        tracing::info!(node = self.shared.id, shard = %self.key, added = node, "learner caught up; making it a voter");
        self.change_voters(ChangeMembers::AddVoterIds(BTreeSet::from([node])))
            .await
    }

    /// Changes the voters, retrying (a bounded number of times) while the
    /// previous change is still being committed: openraft can answer the
    /// step before (the learner's entry, or the first step of its own two)
    /// a moment before its committed membership shows it.
    async fn change_voters(&self, change: ChangeMembers<u64, BasicNode>) -> Result<(), ShardError> {
        let mut tries = 0;
        loop {
            self.group.stir().await;
            match self
                .group
                .raft
                .change_membership(change.clone(), false)
                .await
            {
                Ok(_) => return Ok(()),
                Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
                    ChangeMembershipError::InProgress(_),
                ))) if tries < CHANGE_RETRIES => {
                    tries += 1;
                    tokio::time::sleep(CHANGE_RETRY_PAUSE).await;
                }
                Err(e) => return Err(self.write_error(e)),
            }
        }
    }

    /// Removes node `node` from the shard, a voter or a learner. Only on
    /// the leader; a node that is neither is [`ShardError::Refused`].
    pub async fn remove_node(&self, node: u64) -> Result<(), ShardError> {
        let (voter, learner) = {
            let m = self.group.raft.metrics().borrow_watched().clone();
            let membership = m.membership_config.membership();
            (
                membership.voter_ids().any(|id| id == node),
                membership.learner_ids().any(|id| id == node),
            )
        };
        let change = match (voter, learner) {
            (true, _) => ChangeMembers::RemoveVoters(BTreeSet::from([node])),
            (false, true) => ChangeMembers::RemoveNodes(BTreeSet::from([node])),
            (false, false) => {
                return Err(ShardError::Refused {
                    shard: self.shard(),
                    reason: format!("node {node} is neither a voter nor a learner of the shard"),
                });
            }
        };
        self.change_voters(change).await?;
        tracing::info!(node = self.shared.id, shard = %self.key, removed = node, "membership changed");
        Ok(())
    }

    fn not_leader(&self, forward: &ForwardToLeader<TypeConfig>) -> ShardError {
        let leader = forward.leader_id.map(|id| {
            let addr = forward
                .leader_node
                .as_ref()
                .map(|n| n.addr.clone())
                .or_else(|| self.shared.address_of(id))
                .unwrap_or_default();
            (id, addr)
        });
        ShardError::NotLeader {
            shard: self.shard(),
            leader,
        }
    }

    fn write_error(&self, e: RaftError<TypeConfig, ClientWriteError<TypeConfig>>) -> ShardError {
        match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => self.not_leader(&f),
            RaftError::APIError(ClientWriteError::LogEntryDiscarded(f)) => {
                ShardError::OutcomeUnknown {
                    shard: self.shard(),
                    reason: f.to_string(),
                }
            }
            RaftError::APIError(e) => ShardError::Refused {
                shard: self.shard(),
                reason: e.to_string(),
            },
            RaftError::Fatal(f) => self.stopped(f),
        }
    }
}
