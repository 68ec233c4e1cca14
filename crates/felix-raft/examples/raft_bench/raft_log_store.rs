//! openraft's log on the `raft-log` crate (0.4.6), for the bench only: the
//! reference felix-raft is compared with.
//!
//! raft-log buffers every write and makes it durable on `flush(sync)`, from
//! its own flush thread, calling back when the `fdatasync` returned. So
//! `append` is readable at once and reported durable from that callback,
//! as openraft's v2 log asks; the vote, truncate and purge wait for their
//! flush before they return.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use felix_raft::{Entry, LogId, TypeConfig, Vote};
use openraft::alias::PayloadOf;
use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
use openraft::vote::leader_id_std::LeaderId;
use openraft::{OptionalSend, RaftLogReader};
use raft_log::api::raft_log_writer::RaftLogWriter;
use raft_log::{Config, RaftLog};
use tokio::sync::oneshot;

/// raft-log's types for openraft with one leader per term (`leader_id_std`):
/// a log id is `(term, index)` and a vote `((term, voted_for), committed)`;
/// tuples order as openraft's ids and votes do. `voted_for` is kept as an
/// `Option`, the shape openraft 0.9 gave it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Types;

/// Who hears of a flush: openraft's append callback, or a waiting call.
pub(crate) enum Callback {
    Flushed(IOFlushed<TypeConfig>),
    Wait(oneshot::Sender<io::Result<()>>),
}

impl raft_log::Callback for Callback {
    fn send(self, res: Result<(), io::Error>) {
        match self {
            Self::Flushed(callback) => callback.io_completed(res),
            Self::Wait(tx) => {
                let _ = tx.send(res);
            }
        }
    }
}

impl raft_log::Types for Types {
    type LogId = (u64, u64);
    type LogPayload = Vec<u8>;
    type Vote = ((u64, Option<u64>), bool);
    type Callback = Callback;
    type UserData = ();

    fn log_index(log_id: &Self::LogId) -> u64 {
        log_id.1
    }

    fn payload_size(payload: &Self::LogPayload) -> u64 {
        payload.len() as u64
    }
}

/// The store; clones share the log.
#[derive(Clone)]
pub(crate) struct RaftLogStore {
    log: Arc<Mutex<RaftLog<Types>>>,
}

impl RaftLogStore {
    /// Opens (or creates) the log in `dir`, the flush thread waiting up to
    /// `flush_batch_wait` for more writes before it writes and syncs.
    pub(crate) fn open(dir: &std::path::Path, flush_batch_wait: Duration) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut config = Config::new(dir.to_string_lossy());
        config.wal.flush_batch_wait = Some(flush_batch_wait);
        let log = RaftLog::open(Arc::new(config))?;
        Ok(Self {
            log: Arc::new(Mutex::new(log)),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RaftLog<Types>> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Flushes with a sync and waits for it.
    async fn sync(&self) -> io::Result<()> {
        let (tx, rx) = oneshot::channel();
        self.lock().flush(true, Some(Callback::Wait(tx)))?;
        rx.await.map_err(io::Error::other)?
    }
}

fn to_rl(id: &LogId) -> (u64, u64) {
    (id.leader_id.term, id.index)
}

fn from_rl(id: &(u64, u64)) -> LogId {
    LogId::new_term_index(id.0, id.1)
}

impl RaftLogReader<TypeConfig> for RaftLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e + 1,
            Bound::Excluded(&e) => e,
            Bound::Unbounded => u64::MAX,
        };
        let log = self.lock();
        log.read(start, end)
            .map(|r| {
                let (id, bytes) = r?;
                let payload: PayloadOf<TypeConfig> =
                    postcard::from_bytes(&bytes).map_err(io::Error::other)?;
                Ok(Entry {
                    log_id: from_rl(&id),
                    payload,
                })
            })
            .collect()
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        let state = self.lock().log_state().vote().copied();
        state
            .map(|((term, voted_for), committed)| {
                let voted_for = voted_for.ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidData, "a vote for no candidate")
                })?;
                Ok(Vote {
                    leader_id: LeaderId { term, voted_for },
                    committed,
                })
            })
            .transpose()
    }
}

impl RaftLogStorage<TypeConfig> for RaftLogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, io::Error> {
        let log = self.lock();
        let state = log.log_state();
        Ok(LogState {
            last_purged_log_id: state.purged().map(from_rl),
            last_log_id: state.last().map(from_rl),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        let v = (
            (vote.leader_id.term, Some(vote.leader_id.voted_for)),
            vote.committed,
        );
        self.lock().save_vote(v)?;
        self.sync().await
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<TypeConfig>,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries = entries
            .into_iter()
            .map(|e| {
                let bytes = postcard::to_allocvec(&e.payload).map_err(io::Error::other)?;
                Ok((to_rl(&e.log_id), bytes))
            })
            .collect::<Result<Vec<_>, io::Error>>()?;
        let mut log = self.lock();
        log.append(entries)?;
        // Readable now; durable when the flush thread's sync returns.
        log.flush(true, Some(Callback::Flushed(callback)))
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let from = last_log_id.map_or(0, |id| id.index + 1);
        {
            let mut log = self.lock();
            // raft-log refuses a truncate past its last entry; there is
            // nothing to remove then.
            if log.log_state().last().is_none_or(|l| from > l.1) {
                return Ok(());
            }
            log.truncate(from)?;
        }
        self.sync().await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        self.lock().purge(to_rl(&log_id))?;
        self.sync().await
    }
}
