//! [`ShardReader`]: a consumer's reads of one shard from one node, one
//! read ahead.
//!
//! A consumer catching up reads batch after batch. Asked one at a time,
//! the node is idle while the consumer checks and handles a batch, and the
//! consumer idle while the node reads the next. A reader asks for the next
//! batch as soon as it knows where that one starts (the answer's `next`),
//! before it checks the batch it got, so the two overlap — what Kafka's
//! fetcher does. At most one read is ahead: memory stays bounded by two
//! batches.

use std::time::Duration;

use felix_storage::ShardKey;
use tokio::task::JoinHandle;

use crate::batch::ReadBatch;
use crate::client::unexpected;
use crate::error::ClientError;
use crate::peer::{CallError, Peer};
use crate::wire::{Request, Response, ShardName, ShardOffsets, WireRun};

/// Reads of one shard from one node, in order, with the next read on its
/// way while the caller handles a batch ([`Client::reader_at`]).
///
/// [`Client::reader_at`]: crate::Client::reader_at
///
/// ```no_run
/// use std::time::Duration;
/// use felix_cluster::Client;
/// use felix_storage::ShardKey;
///
/// # async fn consume() -> Result<(), felix_cluster::ClientError> {
/// let client = Client::new(["127.0.0.1:7101"]);
/// let key = ShardKey::new("acme", "default", "orders", 0);
/// let mut reader = client.reader_at("127.0.0.1:7102", &key, 0, 1 << 20, Duration::ZERO);
/// loop {
///     let batch = reader.next_batch().await?;
///     for record in batch.records() {
///         println!("{}: {} bytes", record.offset, record.payload.len());
///     }
///     if batch.next == batch.offsets.committed {
///         break; // caught up with what the node knows committed
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ShardReader {
    peer: Peer,
    shard: ShardKey,
    name: ShardName,
    from: u64,
    max_bytes: u64,
    wait: Duration,
    timeout: Duration,
    /// The read from `from`, when it was sent before it was asked for.
    ahead: Option<JoinHandle<Result<Response, CallError>>>,
}

impl ShardReader {
    pub(crate) fn new(
        peer: Peer,
        shard: &ShardKey,
        from: u64,
        max_bytes: u64,
        wait: Duration,
        call_timeout: Duration,
    ) -> Self {
        Self {
            peer,
            shard: shard.clone(),
            name: ShardName::from(shard),
            from,
            max_bytes,
            wait,
            timeout: call_timeout.saturating_add(wait),
            ahead: None,
        }
    }

    /// Where the next batch starts.
    pub fn position(&self) -> u64 {
        self.from
    }

    /// The next batch: committed records from [`position`](Self::position),
    /// about `max_bytes` of them, waiting at most the reader's `wait` for
    /// one when none is committed there yet. The batch's records are
    /// checked as a read checks them; on any error the reader stays where
    /// it was, and the next call asks again.
    pub async fn next_batch(&mut self) -> Result<ReadBatch, ClientError> {
        let from = self.from;
        let pending = match self.ahead.take() {
            Some(pending) => pending,
            None => self.send(from),
        };
        let answer = pending.await.unwrap_or_else(|e| {
            Err(CallError::Unreachable {
                addr: self.peer.addr().to_owned(),
                reason: format!("the read's task ended: {e}"),
            })
        })?;
        match answer {
            Response::Records {
                runs,
                next,
                offsets,
            } => {
                // The next read is on its way before this one is checked.
                if next > from {
                    self.ahead = Some(self.send(next));
                }
                let batch = checked_batch(self.peer.addr(), &self.shard, runs, from, next, offsets);
                match &batch {
                    Ok(_) => self.from = next,
                    Err(_) => self.cancel(),
                }
                batch
            }
            Response::Error(e) => Err(ClientError::Remote(e)),
            other => Err(unexpected(self.peer.addr(), &other)),
        }
    }

    fn send(&self, from: u64) -> JoinHandle<Result<Response, CallError>> {
        let request = read_request(self.name.clone(), from, self.max_bytes, self.wait);
        let (peer, timeout) = (self.peer.clone(), self.timeout);
        tokio::spawn(async move { peer.call(request, timeout).await })
    }

    fn cancel(&mut self) {
        if let Some(ahead) = self.ahead.take() {
            ahead.abort();
        }
    }
}

impl Drop for ShardReader {
    /// The read ahead is not waited for.
    fn drop(&mut self) {
        self.cancel();
    }
}

/// A read of `shard` from `from`, about `max_bytes`, waiting at most
/// `wait` (to the millisecond) for a record.
pub(crate) fn read_request(shard: ShardName, from: u64, max_bytes: u64, wait: Duration) -> Request {
    Request::Read {
        shard,
        from,
        max_bytes,
        wait_ms: u32::try_from(wait.as_millis()).unwrap_or(u32::MAX),
    }
}

/// The batch of the runs the node at `addr` answered a read of `shard`
/// from `from` with, every record checked ([`ReadBatch::received`]).
pub(crate) fn checked_batch(
    addr: &str,
    shard: &ShardKey,
    runs: Vec<WireRun>,
    from: u64,
    next: u64,
    offsets: ShardOffsets,
) -> Result<ReadBatch, ClientError> {
    ReadBatch::received(runs, from, next, offsets).map_err(|defect| ClientError::Damaged {
        addr: addr.to_owned(),
        shard: shard.to_string(),
        defect,
    })
}
