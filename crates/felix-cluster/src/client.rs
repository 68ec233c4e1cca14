//! A client of a cluster: it finds each shard's leader from the nodes'
//! hints, retries within a deadline (never waits forever), and reads from
//! any replica.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use felix_storage::ShardKey;

use crate::batch::ReadBatch;
use crate::error::ClientError;
use crate::peer::{CallError, Peer};
use crate::reader::{ShardReader, checked_batch, read_request};
use crate::tls::ClientTls;
use crate::wire::{NodeStatus, RemoteError, Request, Response, ShardName};

/// A client's timing and TLS.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// How long a call may go on, retries and leader changes included,
    /// before it fails with [`ClientError::Timeout`]. Default 10 s.
    pub deadline: Duration,
    /// How long one request to one node may wait for its answer. Default
    /// 5 s.
    pub call_timeout: Duration,
    /// TLS to the nodes, with this client's certificate; `None` (the
    /// default) connects in the clear.
    pub tls: Option<ClientTls>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(10),
            call_timeout: Duration::from_secs(5),
            tls: None,
        }
    }
}

/// A client of the nodes at some addresses (any of them: it is sent to
/// the leader from there).
///
/// ```no_run
/// use felix_cluster::Client;
/// use felix_storage::ShardKey;
///
/// # async fn produce() -> Result<(), felix_cluster::ClientError> {
/// let client = Client::new(["127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103"]);
/// let key = ShardKey::new("acme", "default", "orders", 0);
/// let offsets = client.append(&key, vec![b"hello".to_vec()]).await?;
/// let batch = client.read(&key, offsets[0], 1 << 20, std::time::Duration::ZERO).await?;
/// assert_eq!(batch.records().next().map(|r| r.payload), Some(&b"hello"[..]));
/// # Ok(()) }
/// ```
pub struct Client {
    seeds: Vec<String>,
    options: ClientOptions,
    peers: Mutex<HashMap<String, Peer>>,
    /// The last leader seen per shard.
    leaders: Mutex<HashMap<ShardName, String>>,
}

/// What to do after one attempt.
enum Next {
    Done(Response),
    /// Ask this address now.
    Redirect(String),
    /// Try another node after a pause.
    Elsewhere(String),
    Fail(ClientError),
}

impl Client {
    /// A client of the nodes at `addrs`, with default options. Must be
    /// called within a tokio runtime (connections are tasks).
    pub fn new<A: Into<String>>(addrs: impl IntoIterator<Item = A>) -> Self {
        Self::with_options(addrs, ClientOptions::default())
    }

    /// A client with the given options.
    pub fn with_options<A: Into<String>>(
        addrs: impl IntoIterator<Item = A>,
        options: ClientOptions,
    ) -> Self {
        Self {
            seeds: addrs.into_iter().map(Into::into).collect(),
            options,
            peers: Mutex::default(),
            leaders: Mutex::default(),
        }
    }

    fn peer(&self, addr: &str) -> Peer {
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        peers
            .entry(addr.to_owned())
            .or_insert_with(|| Peer::new(addr, None, self.options.tls.clone()))
            .clone()
    }

    fn leader_of(&self, shard: &ShardName) -> Option<String> {
        let leaders = self.leaders.lock().unwrap_or_else(PoisonError::into_inner);
        leaders.get(shard).cloned()
    }

    fn forget_leader(&self, shard: &ShardName) {
        let mut leaders = self.leaders.lock().unwrap_or_else(PoisonError::into_inner);
        leaders.remove(shard);
    }

    fn remember_leader(&self, shard: &ShardName, addr: &str) {
        let mut leaders = self.leaders.lock().unwrap_or_else(PoisonError::into_inner);
        leaders.insert(shard.clone(), addr.to_owned());
    }

    /// Sends `request` to the shard's leader, following hints and trying
    /// the other nodes until the deadline. `idempotent` says whether a
    /// request whose answer was lost may be sent again.
    async fn to_leader(
        &self,
        shard: &ShardName,
        request: Request,
        idempotent: bool,
    ) -> Result<Response, ClientError> {
        self.to_leader_with(shard, request, idempotent, self.options.call_timeout)
            .await
    }

    /// [`Client::to_leader`] with each call bounded by `call_timeout`.
    async fn to_leader_with(
        &self,
        shard: &ShardName,
        request: Request,
        idempotent: bool,
        call_timeout: Duration,
    ) -> Result<Response, ClientError> {
        let start = Instant::now();
        let mut target = self
            .leader_of(shard)
            .or_else(|| self.seeds.first().cloned())
            .unwrap_or_default();
        let mut round = 0usize;
        let mut last = String::from("no node to ask");
        while start.elapsed() < self.options.deadline {
            let left = self.options.deadline.saturating_sub(start.elapsed());
            let timeout = call_timeout.min(left);
            let answer = self.peer(&target).call(request.clone(), timeout).await;
            match classify(answer, idempotent) {
                Next::Done(response) => {
                    self.remember_leader(shard, &target);
                    return Ok(response);
                }
                Next::Redirect(addr) if addr != target => target = addr,
                Next::Redirect(reason) | Next::Elsewhere(reason) => {
                    // The remembered leader did not take it: start afresh.
                    self.forget_leader(shard);
                    last = reason;
                    round += 1;
                    if let Some(addr) = self.seeds.get(round % self.seeds.len().max(1)) {
                        target = addr.clone();
                    }
                    // A leader may be being elected: do not spin.
                    tokio::time::sleep(Duration::from_millis(50).min(left)).await;
                }
                Next::Fail(e) => {
                    // An unknown outcome may be a leader gone silent: the
                    // next request asks the nodes again.
                    self.forget_leader(shard);
                    return Err(e);
                }
            }
        }
        Err(ClientError::Timeout {
            deadline: self.options.deadline,
            nodes: self.seeds.join(","),
            last,
        })
    }

    /// Appends `records` to the shard and returns their offsets, once a
    /// majority of its replicas holds them durably.
    ///
    /// A leader change or a lost connection after the records reached the
    /// leader is [`ClientError::OutcomeUnknown`], never retried (that could
    /// write them twice); a node that is not the leader is left for the
    /// leader it names, and a node that cannot be reached for another,
    /// until the deadline.
    pub async fn append(
        &self,
        shard: &ShardKey,
        records: Vec<Vec<u8>>,
    ) -> Result<Vec<u64>, ClientError> {
        let name = ShardName::from(shard);
        let request = Request::Append {
            shard: name.clone(),
            records,
        };
        match self.to_leader(&name, request, false).await? {
            Response::Appended(offsets) => Ok(offsets),
            other => Err(unexpected(&self.seeds.join(","), &other)),
        }
    }

    /// Committed records of the shard from `from`, read from the first
    /// node that answers (any replica: a follower serves what it knows
    /// committed). Waits at most `wait` for a record at `from`.
    pub async fn read(
        &self,
        shard: &ShardKey,
        from: u64,
        max_bytes: u64,
        wait: Duration,
    ) -> Result<ReadBatch, ClientError> {
        let start = Instant::now();
        let mut last = String::from("no node to ask");
        let mut round = 0usize;
        while start.elapsed() < self.options.deadline {
            let addr = self
                .seeds
                .get(round % self.seeds.len().max(1))
                .cloned()
                .unwrap_or_default();
            match self.read_at(&addr, shard, from, max_bytes, wait).await {
                Ok(batch) => return Ok(batch),
                // A node without the shard, or whose replica stopped, is no
                // answer: ask the next.
                Err(ClientError::Remote(e))
                    if !matches!(
                        e,
                        RemoteError::Stopped { .. } | RemoteError::UnknownShard { .. }
                    ) =>
                {
                    return Err(ClientError::Remote(e));
                }
                Err(e) => last = e.to_string(),
            }
            round += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(ClientError::Timeout {
            deadline: self.options.deadline,
            nodes: self.seeds.join(","),
            last,
        })
    }

    /// Committed records of the shard from `from`, read from the node at
    /// `addr` only.
    pub async fn read_at(
        &self,
        addr: &str,
        shard: &ShardKey,
        from: u64,
        max_bytes: u64,
        wait: Duration,
    ) -> Result<ReadBatch, ClientError> {
        let request = read_request(ShardName::from(shard), from, max_bytes, wait);
        let timeout = self.options.call_timeout.saturating_add(wait);
        match self.peer(addr).call(request, timeout).await? {
            Response::Records {
                runs,
                next,
                offsets,
            } => checked_batch(addr, shard, runs, from, next, offsets),
            Response::Error(e) => Err(ClientError::Remote(e)),
            other => Err(unexpected(addr, &other)),
        }
    }

    /// A reader of the shard from `from` at the node at `addr` only, each
    /// read about `max_bytes`, waiting at most `wait` for a record: the
    /// next read is on its way while the caller handles a batch (see
    /// [`ShardReader`]), so a consumer catching up reads as fast as the
    /// node serves. Must be called within a tokio runtime.
    pub fn reader_at(
        &self,
        addr: &str,
        shard: &ShardKey,
        from: u64,
        max_bytes: u64,
        wait: Duration,
    ) -> ShardReader {
        ShardReader::new(
            self.peer(addr),
            shard,
            from,
            max_bytes,
            wait,
            self.options.call_timeout,
        )
    }

    /// The offset of the first committed record of the shard whose
    /// timestamp is at least `timestamp_micros` (`None`: none is that
    /// recent), from the first node that answers (every replica answers
    /// alike for the same commit index).
    pub async fn offset_for_timestamp(
        &self,
        shard: &ShardKey,
        timestamp_micros: u64,
    ) -> Result<Option<u64>, ClientError> {
        let request = Request::OffsetForTimestamp {
            shard: ShardName::from(shard),
            timestamp_micros,
        };
        let mut last = None;
        for addr in &self.seeds {
            match self
                .peer(addr)
                .call(request.clone(), self.options.call_timeout)
                .await
            {
                Ok(Response::Offset(offset)) => return Ok(offset),
                Ok(Response::Error(e)) => last = Some(ClientError::Remote(e)),
                Ok(other) => last = Some(unexpected(addr, &other)),
                Err(e) => last = Some(ClientError::Call(e)),
            }
        }
        Err(last.unwrap_or(ClientError::Timeout {
            deadline: self.options.deadline,
            nodes: String::new(),
            last: "no node to ask".to_owned(),
        }))
    }

    /// The status of the node at `addr`.
    pub async fn status(&self, addr: &str) -> Result<NodeStatus, ClientError> {
        match self
            .peer(addr)
            .call(Request::Status, self.options.call_timeout)
            .await?
        {
            Response::Status(status) => Ok(status),
            Response::Error(e) => Err(ClientError::Remote(e)),
            other => Err(unexpected(addr, &other)),
        }
    }

    /// Creates the shard replicated on `replicas` (node ids the first
    /// node that answers knows addresses of). Creating it again is
    /// harmless.
    pub async fn create_shard(
        &self,
        shard: &ShardKey,
        replicas: Vec<u64>,
    ) -> Result<(), ClientError> {
        let name = ShardName::from(shard);
        let request = Request::CreateShard {
            shard: name.clone(),
            replicas,
        };
        // Any node creates it (there is no leader yet): no leader to
        // remember from whoever answers.
        match self
            .to_leader_with(&name, request, true, self.options.call_timeout)
            .await?
        {
            Response::Done => {
                self.forget_leader(&name);
                Ok(())
            }
            other => Err(unexpected(&self.seeds.join(","), &other)),
        }
    }

    /// Adds node `node` at `addr` to the shard: a learner, then a voter
    /// once it has caught up.
    pub async fn add_node(
        &self,
        shard: &ShardKey,
        node: u64,
        addr: &str,
    ) -> Result<(), ClientError> {
        let name = ShardName::from(shard);
        let request = Request::AddNode {
            shard: name.clone(),
            node,
            addr: addr.to_owned(),
        };
        self.done(&name, request).await
    }

    /// Deletes every record of the shard before `offset`, on every
    /// replica, through the log (see
    /// [`ReplicatedShard::delete_records_before`](crate::ReplicatedShard::delete_records_before)),
    /// and returns where the log begins: sent to the leader, found from
    /// hints and retried until the deadline (asking twice is harmless: the
    /// start never moves backwards).
    pub async fn delete_records_before(
        &self,
        shard: &ShardKey,
        offset: u64,
    ) -> Result<u64, ClientError> {
        let name = ShardName::from(shard);
        let request = Request::DeleteRecords {
            shard: name.clone(),
            offset,
        };
        match self.to_leader(&name, request, true).await? {
            Response::Start(start) => Ok(start),
            other => Err(unexpected(&self.seeds.join(","), &other)),
        }
    }

    /// Removes node `node` from the shard.
    pub async fn remove_node(&self, shard: &ShardKey, node: u64) -> Result<(), ClientError> {
        let name = ShardName::from(shard);
        let request = Request::RemoveNode {
            shard: name.clone(),
            node,
        };
        self.done(&name, request).await
    }

    async fn done(&self, shard: &ShardName, request: Request) -> Result<(), ClientError> {
        match self.to_leader(shard, request, true).await? {
            Response::Done => Ok(()),
            other => Err(unexpected(&self.seeds.join(","), &other)),
        }
    }
}

pub(crate) fn unexpected(addr: &str, answer: &Response) -> ClientError {
    ClientError::Unexpected {
        addr: addr.to_owned(),
        answer: format!("{answer:?}"),
    }
}

/// What one attempt's answer means for the next.
fn classify(answer: Result<Response, CallError>, idempotent: bool) -> Next {
    match answer {
        Ok(Response::Error(RemoteError::NotLeader {
            leader: Some((_, addr)),
            ..
        })) if !addr.is_empty() => Next::Redirect(addr),
        Ok(Response::Error(
            e @ (RemoteError::NotLeader { .. }
            | RemoteError::Stopped { .. }
            | RemoteError::UnknownShard { .. }),
        )) => Next::Elsewhere(e.to_string()),
        Ok(Response::Error(RemoteError::OutcomeUnknown { reason, .. })) => {
            Next::Fail(ClientError::OutcomeUnknown { reason })
        }
        Ok(Response::Error(e)) => Next::Fail(ClientError::Remote(e)),
        Ok(response) => Next::Done(response),
        Err(e @ CallError::Unreachable { .. }) => Next::Elsewhere(e.to_string()),
        // Not sent, and no other node would take it either.
        Err(e @ CallError::TooLarge { .. }) => Next::Fail(ClientError::Call(e)),
        Err(e) if idempotent => Next::Elsewhere(e.to_string()),
        Err(e) => Next::Fail(ClientError::OutcomeUnknown {
            reason: e.to_string(),
        }),
    }
}
