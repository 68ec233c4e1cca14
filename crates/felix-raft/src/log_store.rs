//! The adapter: openraft's `RaftLogStorage` and `RaftLogReader` over a
//! felix [`Shard`].

use std::fmt::Debug;
use std::io;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use felix_format::raft_state::{RaftLogId, RaftState, RaftVote};
use felix_io::FileSystem;
use felix_storage::{
    Durability, ReadBound, ReplicatedRecord, Retention, Shard, ShardKey, Store, StoreConfig,
};
use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
use openraft::vote::leader_id_std::{CommittedLeaderId, LeaderId};
use openraft::{EntryPayload, LogId, OptionalSend, RaftLogReader, RaftTypeConfig, Vote};

use crate::EntryData;
use crate::codec::{decode_entry, encode_entry};
use crate::error::RaftLogError;
use crate::log_ids::{self, log_id, raft_log_id};
use crate::snapshot_file::{self, Meta};
use crate::state_file;

/// How many bytes of records one read of the shard asks for: entries are
/// decoded from it, so this bounds the memory of one step of a long read.
const READ_CHUNK_BYTES: u64 = 4 << 20;

/// A Raft log kept in a felix shard: one entry per record, the entry's
/// index the record's offset, its term the record's generation.
///
/// Cheap to clone: clones share the shard (openraft's log readers are
/// clones). See the crate docs for the invariants and the files.
pub struct FelixLogStore<C> {
    inner: Arc<Inner>,
    config: PhantomData<fn() -> C>,
}

impl<C> Clone for FelixLogStore<C> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            config: PhantomData,
        }
    }
}

impl<C> Debug for FelixLogStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FelixLogStore")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

struct Inner {
    shard: Arc<Shard>,
    fs: FileSystem,
    dir: PathBuf,
    /// What the raft-state file holds, as last stored.
    state: Mutex<RaftState>,
    /// The committed id openraft last saved, and when the file last
    /// recorded one (stored lazily: see `save_committed`).
    committed: Mutex<Committed>,
}

/// The committed id as openraft saves it, ahead of the file's.
struct Committed {
    latest: Option<RaftLogId>,
    stored_at: Instant,
}

/// A committed id is stored when it is this many entries past the stored
/// one...
const COMMITTED_STRIDE: u64 = 1024;
/// ...or when the stored one is this old.
const COMMITTED_INTERVAL: Duration = Duration::from_secs(1);

/// How to open a [`FelixLogStore`]: [`FelixLogStore::options`].
pub struct LogOptions<C> {
    dir: PathBuf,
    config: StoreConfig,
    fs: FileSystem,
    types: PhantomData<fn() -> C>,
}

impl<C> Debug for LogOptions<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogOptions")
            .field("dir", &self.dir)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<C> LogOptions<C> {
    /// The shard's configuration. Default: [`StoreConfig::default`] with
    /// [`Durability::None`], the only durability a Raft log takes: the log
    /// asks for the sync covering each append itself and reports it to
    /// openraft through the append's callback, so another policy would sync
    /// on a schedule of its own (or block appends) for nothing. A
    /// configuration with another durability is refused at
    /// [`open`](Self::open) with [`RaftLogError::Durability`].
    pub fn config(mut self, config: StoreConfig) -> Self {
        self.config = config;
        self
    }

    /// The file system. Default: the real one ([`FileSystem::os`]).
    pub fn file_system(mut self, fs: FileSystem) -> Self {
        self.fs = fs;
        self
    }

    /// Opens the log in its directory (created if missing): the shard
    /// (recovery runs as for any shard), then the raft-state file, then a
    /// purge a crash interrupted is finished.
    pub fn open(self) -> Result<FelixLogStore<C>, RaftLogError> {
        if self.config.durability != Durability::None {
            return Err(RaftLogError::Durability {
                shard: self.dir.display().to_string(),
                found: self.config.durability,
            });
        }
        let shard = Shard::options(&self.dir)
            .config(self.config)
            .file_system(self.fs.clone())
            .open()?;
        FelixLogStore::on_shard(Arc::new(shard))
    }
}

impl<C> FelixLogStore<C> {
    /// Options for the log kept in `dir`.
    ///
    /// ```
    /// use felix_raft::{FelixLogStore, TypeConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log: FelixLogStore<TypeConfig> = FelixLogStore::options(dir.path()).open()?;
    /// assert_eq!(log.shard().offsets().written, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn options(dir: impl AsRef<Path>) -> LogOptions<C> {
        LogOptions {
            dir: dir.as_ref().to_path_buf(),
            config: StoreConfig {
                durability: Durability::None,
                ..StoreConfig::default()
            },
            fs: FileSystem::os(),
            types: PhantomData,
        }
    }

    /// The log kept in `store`'s shard `key`, which is created when the
    /// store has none by that key. Logs in one store share its sync pool
    /// and its budget of open shards, so thousands of Raft groups cost no
    /// thread each.
    ///
    /// The store must be opened with [`Durability::None`]: the log asks for
    /// the sync covering each append itself and reports it through the
    /// append's callback, and under any other policy the shard would sync
    /// on its own schedule as well (or block each append until durable).
    /// Another policy is [`RaftLogError::Durability`], opening nothing.
    ///
    /// ```
    /// use felix_raft::{FelixLogStore, TypeConfig};
    /// use felix_storage::{Durability, ShardKey, Store, StoreConfig};
    ///
    /// let root = tempfile::tempdir()?;
    /// let config = StoreConfig { durability: Durability::None, ..StoreConfig::default() };
    /// let store = Store::options(root.path()).config(config).open()?;
    /// let key = ShardKey::new("acme", "default", "orders", 0);
    /// let log: FelixLogStore<TypeConfig> = FelixLogStore::in_store(&store, &key)?;
    /// assert_eq!(log.shard().offsets().written, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_store(store: &Store, key: &ShardKey) -> Result<Self, RaftLogError> {
        let durability = store.config().durability;
        if durability != Durability::None {
            return Err(RaftLogError::Durability {
                shard: key.to_string(),
                found: durability,
            });
        }
        let shard = match store.open_shard(key) {
            Err(felix_storage::StorageError::ShardNotFound { .. }) => store.create_shard(key)?,
            other => other?,
        };
        Self::on_shard(shard)
    }

    /// The log over an open `shard`: its raft-state file is read, then a
    /// purge a crash interrupted is finished.
    fn on_shard(shard: Arc<Shard>) -> Result<Self, RaftLogError> {
        let fs = shard.file_system().clone();
        let dir = shard.dir().to_path_buf();
        let state = state_file::load(&fs, &dir)?;
        snapshot_file::read(&fs, &dir)?;
        let inner = Inner {
            shard,
            fs,
            dir,
            state: Mutex::new(state),
            committed: Mutex::new(Committed {
                latest: state.committed,
                stored_at: Instant::now(),
            }),
        };
        // A purge stores its id first, then moves the log start: a crash
        // between the two leaves the start below the purged id.
        if let Some(purged) = state.last_purged {
            inner.move_start(purged.index.saturating_add(1))?;
        }
        Ok(FelixLogStore {
            inner: Arc::new(inner),
            config: PhantomData,
        })
    }

    /// The shard the log is kept in (for inspection: writing to it behind
    /// the log's back breaks the log).
    pub fn shard(&self) -> &Shard {
        &self.inner.shard
    }

    /// The log's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Closes the shard (everything written made durable, the directory's
    /// lock released), so the directory can be opened again while clones
    /// of this handle are still alive.
    ///
    /// The committed id openraft last saved is recorded then (every entry
    /// is durable), if the raft-state file is behind it and the log holds
    /// its entry.
    pub fn close(&self) -> Result<(), RaftLogError> {
        // Everything written is durable once the shard is closed.
        let written = self.inner.shard.offsets().written;
        self.inner.shard.close()?;
        let latest = self
            .inner
            .committed()
            .latest
            .filter(|id| id.index < written);
        let mut state = self.inner.state();
        if latest.is_some() && state.committed != latest {
            state.committed = latest;
            self.inner.store_state(state)?;
        }
        Ok(())
    }
}

impl<C> FelixLogStore<C>
where
    C: LogConfig,
{
    /// The snapshot recorded with [`save_snapshot`](Self::save_snapshot),
    /// read from the shard's `raft-snapshot` file, or `None` when none was.
    ///
    /// For a state machine that is the stream itself: its snapshot is the
    /// last entry it covers and the membership there, nothing more, and
    /// it is what openraft's `get_current_snapshot` returns (after a purge
    /// the membership cannot be read back from the log).
    pub fn snapshot(&self) -> Result<Option<Meta<C::Node>>, RaftLogError> {
        snapshot_file::load(&self.inner.fs, &self.inner.dir)
    }

    /// Records `meta` as the log's snapshot, durably (atomically replaced,
    /// synced, the directory synced) before this returns. A state machine
    /// records its snapshot before openraft purges the log up to it, so a
    /// restart finds the membership of every purged entry. A meta that
    /// covers no entry records nothing.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    ///
    /// use felix_raft::{FelixLogStore, LogId, TypeConfig};
    /// use openraft::storage::SnapshotMeta;
    /// use openraft::vote::leader_id_std::CommittedLeaderId;
    /// use openraft::{BasicNode, Membership, StoredMembership};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log: FelixLogStore<TypeConfig> = FelixLogStore::options(dir.path()).open()?;
    /// assert_eq!(log.snapshot()?, None);
    /// let nodes = BTreeMap::from([(1u64, BasicNode::new("127.0.0.1:7101"))]);
    /// let members = Membership::new(vec![[1u64].into()], nodes)?;
    /// let meta = SnapshotMeta {
    ///     last_log_id: Some(LogId::new(CommittedLeaderId::new(2), 9)),
    ///     last_membership: StoredMembership::new(Some(LogId::new(CommittedLeaderId::new(1), 0)), members),
    /// };
    /// log.save_snapshot(&meta)?;
    /// assert_eq!(log.snapshot()?, Some(meta));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn save_snapshot(&self, meta: &Meta<C::Node>) -> Result<(), RaftLogError> {
        debug_assert!(
            meta.last_membership.log_id().map(|id| id.index) <= meta.last_log_id.map(|id| id.index),
            "snapshot at {:?} with a membership of a later entry {:?}",
            meta.last_log_id,
            meta.last_membership.log_id()
        );
        snapshot_file::store(&self.inner.fs, &self.inner.dir, meta)
    }
}

impl Inner {
    fn state(&self) -> RaftState {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn committed(&self) -> std::sync::MutexGuard<'_, Committed> {
        self.committed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `committed` as openraft's latest, and stores it when it is
    /// durable in this log (so that an open never finds a committed id past
    /// the log's end) and either no id is stored, or the stored one is
    /// [`COMMITTED_STRIDE`] entries behind or [`COMMITTED_INTERVAL`] old.
    fn save_committed(&self, committed: Option<RaftLogId>) -> Result<(), RaftLogError> {
        let mut held = self.committed();
        held.latest = committed;
        let Some(id) = committed else {
            return Ok(());
        };
        let mut state = self.state();
        let due = match state.committed {
            None => true,
            Some(stored) => {
                id.index >= stored.index.saturating_add(COMMITTED_STRIDE)
                    || (id != stored && held.stored_at.elapsed() >= COMMITTED_INTERVAL)
            }
        };
        if !due || id.index >= self.shard.offsets().durable {
            return Ok(());
        }
        state.committed = Some(id);
        self.store_state(state)?;
        held.stored_at = Instant::now();
        Ok(())
    }

    /// Stores `state` in the raft-state file, then keeps it.
    fn store_state(&self, state: RaftState) -> Result<(), RaftLogError> {
        let mut held = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        debug_assert_state_follows(&held, &state, self.shard.offsets().written);
        state_file::store(&self.fs, &self.dir, &state)?;
        *held = state;
        Ok(())
    }

    /// Makes the log begin at `start` at the earliest: records below it
    /// go (the log start moves, or the log restarts empty at `start` when
    /// that is past its end). A start at or below the current one changes
    /// nothing.
    fn move_start(&self, start: u64) -> Result<(), RaftLogError> {
        let offsets = self.shard.offsets();
        if start <= offsets.base {
            return Ok(());
        }
        if start <= offsets.written {
            self.shard.delete_records_before(start)?;
            // The files of segments wholly below the start go now: a Raft
            // log's shard runs no retention of its own (with limits
            // configured, a pass would delete entries openraft still
            // holds, so then the store's own passes are left to it).
            if self.shard.config().retention == Retention::default() {
                self.shard.apply_retention()?;
            }
        } else {
            self.shard.reset_to(start)?;
        }
        Ok(())
    }

    fn read_entries<C>(&self, start: u64, end: u64) -> Result<Vec<C::Entry>, RaftLogError>
    where
        C: LogConfig,
    {
        let entries = self.read_entries_unchecked::<C>(start, end)?;
        // What append asserted before writing must hold after reading back
        // (a purge meanwhile may skip ahead). The records are on disk,
        // where another writer may have put them: checked in every build.
        log_ids::check_read(
            self.shard.label(),
            entries
                .iter()
                .map(|e| (e.log_id.leader_id.term, e.log_id.index)),
        )?;
        // Within the range asked: the loop above stops at `end` and the
        // shard's read starts at `from`, whatever the disk holds.
        debug_assert!(
            entries
                .iter()
                .all(|e| (start..end).contains(&e.log_id.index)),
            "read of log ids {start}..{end} returned index {:?}",
            entries
                .iter()
                .map(|e| e.log_id.index)
                .find(|i| !(start..end).contains(i))
        );
        Ok(entries)
    }

    /// [`Self::read_entries`] without the check of what it read.
    fn read_entries_unchecked<C>(&self, start: u64, end: u64) -> Result<Vec<C::Entry>, RaftLogError>
    where
        C: LogConfig,
    {
        let label = self.shard.label();
        let mut entries = Vec::new();
        let mut from = start.max(self.shard.offsets().base);
        while from < end {
            let records = match self.shard.read(from, READ_CHUNK_BYTES, ReadBound::Written) {
                Ok(records) => records,
                // A purge moved the start meanwhile: what is gone is "not
                // found", which openraft allows.
                Err(felix_storage::StorageError::Trimmed { oldest, .. }) if oldest > from => {
                    from = oldest;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            if records.is_empty() {
                break;
            }
            let generations = self.shard.generations();
            for record in records {
                if record.offset >= end {
                    return Ok(entries);
                }
                from = record.offset + 1;
                let term = generations.generation_at(record.offset).ok_or_else(|| {
                    RaftLogError::NoTerm {
                        shard: label.to_owned(),
                        offset: record.offset,
                    }
                })?;
                entries.push(decode_entry::<C>(
                    label,
                    record.offset,
                    term,
                    record.timestamp_micros,
                    &record.payload,
                )?);
            }
        }
        Ok(entries)
    }

    /// The id of the last entry held, if the log holds one.
    fn last_entry_id(&self) -> Result<Option<LogId<CommittedLeaderId<u64>>>, RaftLogError> {
        let offsets = self.shard.offsets();
        if offsets.written == offsets.base {
            return Ok(None);
        }
        let last = offsets.written - 1;
        let term = self
            .shard
            .generation_at(last)
            .ok_or_else(|| RaftLogError::NoTerm {
                shard: self.shard.label().to_owned(),
                offset: last,
            })?;
        Ok(Some(LogId::new(CommittedLeaderId::new(term), last)))
    }

    /// The vote last saved, as openraft's.
    fn vote(&self) -> Result<Option<Vote<LeaderId<u64, u64>>>, RaftLogError> {
        let Some(vote) = self.state().vote else {
            return Ok(None);
        };
        // openraft 0.10's vote always names its candidate; a vote recorded
        // without one (never written by this crate) has no value to give.
        let voted_for = vote
            .voted_for
            .ok_or_else(|| RaftLogError::VoteWithoutCandidate {
                shard: self.shard.label().to_owned(),
                term: vote.term,
            })?;
        Ok(Some(Vote {
            leader_id: LeaderId {
                term: vote.term,
                voted_for,
            },
            committed: vote.committed,
        }))
    }
}

/// The type configurations a [`FelixLogStore`] keeps: node ids and terms
/// `u64`, one leader per term (standard Raft, openraft's
/// `leader_id_std`), so that a term is a felix generation as it is;
/// openraft's own entry and payload types, with application data that is
/// a record's timestamp and payload ([`EntryData`]), so that a normal
/// entry is stored as the producer's bytes. Implemented for every
/// configuration that fits; [`TypeConfig`] is one.
///
/// [`TypeConfig`]: crate::TypeConfig
pub trait LogConfig:
    RaftTypeConfig<
        D: EntryData,
        NodeId = u64,
        LeaderId = LeaderId<u64, u64>,
        Vote = Vote<LeaderId<u64, u64>>,
        Payload = EntryPayload<<Self as RaftTypeConfig>::D, u64, <Self as RaftTypeConfig>::Node>,
        Entry = openraft::Entry<
            CommittedLeaderId<u64>,
            EntryPayload<<Self as RaftTypeConfig>::D, u64, <Self as RaftTypeConfig>::Node>,
        >,
    >
{
}

impl<C> LogConfig for C where
    C: RaftTypeConfig<
            D: EntryData,
            NodeId = u64,
            LeaderId = LeaderId<u64, u64>,
            Vote = Vote<LeaderId<u64, u64>>,
            Payload = EntryPayload<<C as RaftTypeConfig>::D, u64, <C as RaftTypeConfig>::Node>,
            Entry = openraft::Entry<
                CommittedLeaderId<u64>,
                EntryPayload<<C as RaftTypeConfig>::D, u64, <C as RaftTypeConfig>::Node>,
            >,
        >
{
}

/// Asserts, in debug builds, what every store of the raft-state file
/// keeps: the vote's term and the last purged id never go back, and a
/// committed id stored anew names an entry the log holds (below
/// `written`, its end).
fn debug_assert_state_follows(held: &RaftState, next: &RaftState, written: u64) {
    let term = |s: &RaftState| s.vote.map_or(0, |v| v.term);
    debug_assert!(
        term(next) >= term(held),
        "raft state: vote term {} below the saved vote's term {}",
        term(next),
        term(held)
    );
    debug_assert!(
        next.last_purged >= held.last_purged,
        "raft state: last purged {:?} behind the saved {:?}",
        next.last_purged,
        held.last_purged
    );
    debug_assert!(
        next.committed == held.committed || next.committed.is_none_or(|c| c.index < written),
        "raft state: committed {:?} past the log's last index (log end {written})",
        next.committed
    );
}

fn io_err(e: impl Into<RaftLogError>) -> io::Error {
    e.into().into_io_error()
}

impl<C> RaftLogReader<C> for FelixLogStore<C>
where
    C: LogConfig,
{
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, io::Error> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => u64::MAX,
        };
        self.inner.read_entries::<C>(start, end).map_err(io_err)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<LeaderId<u64, u64>>>, io::Error> {
        self.inner.vote().map_err(io_err)
    }
}

impl<C> RaftLogStorage<C> for FelixLogStore<C>
where
    C: LogConfig,
{
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<C>, io::Error> {
        let last_purged_log_id = self.inner.state().last_purged.map(log_id);
        let last_log_id = self
            .inner
            .last_entry_id()
            .map_err(io_err)?
            .or(last_purged_log_id);
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<LeaderId<u64, u64>>) -> Result<(), io::Error> {
        let mut state = self.inner.state();
        state.vote = Some(RaftVote {
            term: vote.leader_id.term,
            voted_for: Some(vote.leader_id.voted_for),
            committed: vote.committed,
        });
        self.inner.store_state(state).map_err(io_err)
    }

    /// Saves the committed id lazily, as openraft allows: it is kept and
    /// returned by `read_committed` at once, and recorded in the raft-state
    /// file (atomically replaced, durable) when the entry it names is
    /// durable in this log and the file's is 1,024 entries behind or a
    /// second old, and at [`close`](FelixLogStore::close). After a crash the state machine
    /// is re-applied up to the id recorded, which may be behind the true
    /// one (never ahead); it catches up on the next commit it hears of.
    async fn save_committed(
        &mut self,
        committed: Option<LogId<CommittedLeaderId<u64>>>,
    ) -> Result<(), io::Error> {
        self.inner
            .save_committed(committed.as_ref().map(raft_log_id))
            .map_err(io_err)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<CommittedLeaderId<u64>>>, io::Error> {
        let latest = self.inner.committed().latest;
        let Some(committed) = latest.or(self.inner.state().committed).map(log_id) else {
            return Ok(None);
        };
        // Never past the log's last entry: a log that lost a tail it had
        // synced (damage recovery truncated) holds committed entries only
        // up to its end, and openraft re-applies up to the id given.
        let last = self.inner.last_entry_id().map_err(io_err)?.or(self
            .inner
            .state()
            .last_purged
            .map(log_id));
        let read = match last {
            Some(last) if last.index < committed.index => Some(last),
            None => None,
            _ => Some(committed),
        };
        debug_assert!(
            read.is_none_or(|c| last.is_some_and(|l| c.index <= l.index)),
            "read_committed: {read:?} past the last log id {last:?}"
        );
        Ok(read)
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<C>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = C::Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let shard = &self.inner.shard;
        let records = entries
            .into_iter()
            .map(|entry| {
                let id = entry.log_id;
                let (timestamp_micros, payload) = encode_entry::<C>(&entry)?;
                Ok(ReplicatedRecord {
                    offset: id.index,
                    generation: Some(id.leader_id.term),
                    timestamp_micros,
                    payload,
                })
            })
            .collect::<Result<Vec<_>, RaftLogError>>()
            .map_err(io_err)?;
        // openraft appends a run of entries; a read checks the same order
        // of what it reads back (`log_ids::check_read`).
        log_ids::debug_assert_appended(
            records
                .iter()
                .map(|r| (r.generation.unwrap_or(0), r.offset)),
        );
        let end = match (records.first(), records.last()) {
            (Some(first), Some(last)) => {
                let offsets = shard.offsets();
                if first.offset != offsets.written {
                    if offsets.written != offsets.base {
                        return Err(io_err(RaftLogError::AppendGap {
                            shard: shard.label().to_owned(),
                            first: first.offset,
                            next: offsets.written,
                        }));
                    }
                    // An empty log takes its first entry at any index (after
                    // a purge past its end, or a snapshot installed).
                    shard.reset_to(first.offset).map_err(io_err)?;
                }
                // The shard's durability is `None`, so the batch is in the
                // file when this returns, in order after every earlier one:
                // readers bounded by what is written see it (openraft reads
                // entries back as soon as `append` returns).
                shard.append_replicated(&records).map_err(io_err)?;
                last.offset + 1
            }
            _ => shard.offsets().written,
        };
        // Durable later: the shard's sync pool runs the sync covering the
        // batch (one `fdatasync` for every append in flight meanwhile) and
        // reports it here, on its dispatch thread. A failed sync reaches
        // openraft as the error and poisons the shard, so every later
        // append fails.
        shard.wait_durable(end).then(move |outcome| {
            callback.io_completed(outcome.map_err(io_err));
        });
        Ok(())
    }

    async fn truncate_after(
        &mut self,
        last_log_id: Option<LogId<CommittedLeaderId<u64>>>,
    ) -> Result<(), io::Error> {
        let shard = &self.inner.shard;
        let offsets = shard.offsets();
        let at = last_log_id
            .map_or(0, |id| id.index.saturating_add(1))
            .max(offsets.base);
        if at >= offsets.written {
            return Ok(());
        }
        shard.truncate_to(at).map_err(io_err)
    }

    async fn purge(&mut self, log_id: LogId<CommittedLeaderId<u64>>) -> Result<(), io::Error> {
        // The id first, then the start: a crash between leaves an id the
        // next open finishes the purge to (see `LogOptions::open`).
        let mut state = self.inner.state();
        let purged = raft_log_id(&log_id);
        if state.last_purged.is_none_or(|p| p < purged) {
            state.last_purged = Some(purged);
            self.inner.store_state(state).map_err(io_err)?;
        }
        self.inner
            .move_start(log_id.index.saturating_add(1))
            .map_err(io_err)
    }
}
