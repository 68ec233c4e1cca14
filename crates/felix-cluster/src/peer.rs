//! One connection to one node, carrying every request this process sends
//! it: every group's Raft messages, or a client's calls.
//!
//! A [`Peer`] is a handle on a task that owns the connection. Calls queue
//! on a bounded channel (a full queue makes callers wait: back-pressure),
//! the task writes each as a frame with a fresh id and routes each answer
//! to its caller by id, with at most [`MAX_IN_FLIGHT`] unanswered. When the
//! connection fails, every unanswered call fails with it, and the next
//! call connects again (after a pause that grows to [`MAX_BACKOFF`] while
//! the node stays unreachable). Each call is bounded by its own timeout.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::Framed;

use crate::tls::{BoxedIo, ClientTls};
use crate::wire::{ClientCodec, PROTOCOL_VERSION, Request, RequestFrame, Response, WireError};

/// How many calls may wait for their answers on one connection; more wait
/// in the queue.
pub const MAX_IN_FLIGHT: usize = 1024;
/// How many calls may queue for a connection before callers wait.
const QUEUE: usize = 1024;
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The longest pause between connection attempts to an unreachable node.
pub const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// The first pause after a failed attempt.
const MIN_BACKOFF: Duration = Duration::from_millis(20);

/// Why a call to a node got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The node could not be reached: the request was not sent (`reason`
    /// is the failure's text), so sending it again is safe.
    #[error("{addr} unreachable: {reason}")]
    Unreachable {
        /// The node's address.
        addr: String,
        /// What failed.
        reason: String,
    },
    /// The request was sent, then the connection failed before the
    /// answer came: the node may or may not have acted on it.
    #[error("connection to {addr} lost before the answer: {reason}")]
    Lost {
        /// The node's address.
        addr: String,
        /// What failed.
        reason: String,
    },
    /// The request does not fit in a frame ([`MAX_FRAME`](crate::wire::MAX_FRAME)):
    /// not sent.
    #[error("a request to {addr} was not sent: {reason}")]
    TooLarge {
        /// The node's address.
        addr: String,
        /// The encoder's refusal.
        reason: String,
    },
    /// No answer within the call's timeout.
    #[error("{addr} did not answer within {timeout:?}")]
    Timeout {
        /// The node's address.
        addr: String,
        /// The call's timeout.
        timeout: Duration,
    },
}

struct Call {
    request: Request,
    reply: oneshot::Sender<Result<Response, CallError>>,
    /// [`QUEUED`], then [`SENT`] (the task claimed it to write) or
    /// [`ABANDONED`] (the caller gave up first): one compare-and-swap on
    /// each side decides, so a call is either written or reported as
    /// never sent, never both.
    state: Arc<AtomicU8>,
}

/// A call waiting in the queue.
const QUEUED: u8 = 0;
/// A call the task took to write.
const SENT: u8 = 1;
/// A call whose caller gave up before the task took it.
const ABANDONED: u8 = 2;

/// A handle on the connection to one node (cheap to clone; the task ends
/// when the last handle is dropped).
#[derive(Clone, Debug)]
pub struct Peer {
    addr: String,
    calls: mpsc::Sender<Call>,
}

impl Peer {
    /// A connection to `addr`, made at the first call (over TLS with
    /// `tls`). `me` is the node id sent in the greeting (`None` for a
    /// client). Must be called within a tokio runtime.
    pub fn new(addr: impl Into<String>, me: Option<u64>, tls: Option<ClientTls>) -> Self {
        let addr = addr.into();
        let (calls, queue) = mpsc::channel(QUEUE);
        tokio::spawn(run(addr.clone(), me, tls, queue));
        Self { addr, calls }
    }

    /// The node's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `request` and waits at most `timeout` for its answer.
    ///
    /// A call that timed out before its request was written fails with
    /// [`CallError::Unreachable`] (it is never sent afterwards); one that
    /// was written and got no answer in time with [`CallError::Timeout`].
    pub async fn call(&self, request: Request, timeout: Duration) -> Result<Response, CallError> {
        let (reply, answer) = oneshot::channel();
        let state = Arc::new(AtomicU8::new(QUEUED));
        let call = async {
            self.calls
                .send(Call {
                    request,
                    reply,
                    state: Arc::clone(&state),
                })
                .await
                .map_err(|_| CallError::Unreachable {
                    addr: self.addr.clone(),
                    reason: "connection task ended".to_owned(),
                })?;
            // A reply dropped unanswered: the task ended (the runtime is
            // shutting down) after or before it wrote the request.
            answer.await.unwrap_or_else(|_| {
                Err(self.ended(
                    state.load(Ordering::Acquire) == SENT,
                    "connection task ended",
                ))
            })
        };
        match tokio::time::timeout(timeout, call).await {
            Ok(answer) => answer,
            Err(_) => {
                let abandoned = state
                    .compare_exchange(QUEUED, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
                if abandoned {
                    Err(self.ended(false, &format!("not sent within {timeout:?}")))
                } else {
                    Err(CallError::Timeout {
                        addr: self.addr.clone(),
                        timeout,
                    })
                }
            }
        }
    }

    /// The error of a call that got no answer: [`CallError::Lost`] if its
    /// request was written, [`CallError::Unreachable`] if not.
    fn ended(&self, sent: bool, reason: &str) -> CallError {
        let (addr, reason) = (self.addr.clone(), reason.to_owned());
        if sent {
            CallError::Lost { addr, reason }
        } else {
            CallError::Unreachable { addr, reason }
        }
    }
}

/// The connection task: connect when there is something to send, serve
/// until the connection fails, fail what it carried, repeat.
async fn run(
    addr: String,
    me: Option<u64>,
    tls: Option<ClientTls>,
    mut queue: mpsc::Receiver<Call>,
) {
    let mut backoff = MIN_BACKOFF;
    while let Some(first) = queue.recv().await {
        match connect(&addr, me, tls.as_ref()).await {
            Ok(framed) => {
                backoff = MIN_BACKOFF;
                let reason = serve(&addr, framed, first, &mut queue).await;
                let Some(reason) = reason else { return };
                tracing::debug!(peer = %addr, %reason, "connection closed");
            }
            Err(reason) => {
                tracing::debug!(peer = %addr, %reason, "connect failed");
                fail(&addr, &reason, first);
                // Until the next attempt, every call fails at once rather
                // than waiting out its timeout behind a node that is down.
                let pause = tokio::time::sleep(backoff);
                tokio::pin!(pause);
                loop {
                    tokio::select! {
                        () = &mut pause => break,
                        call = queue.recv() => match call {
                            Some(call) => fail(&addr, &reason, call),
                            None => return,
                        },
                    }
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

fn fail(addr: &str, reason: &str, call: Call) {
    // The caller may have given up (timeout): nobody to tell.
    let _ = call.reply.send(Err(CallError::Unreachable {
        addr: addr.to_owned(),
        reason: reason.to_owned(),
    }));
}

type Connection = Framed<BoxedIo, ClientCodec>;

/// A TCP connection to `addr`, wrapped in TLS with `tls`.
async fn open(addr: &str, tls: Option<&ClientTls>) -> std::io::Result<BoxedIo> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    match tls {
        Some(tls) => tls.connect(addr, stream).await,
        None => Ok(Box::new(stream)),
    }
}

async fn connect(
    addr: &str,
    me: Option<u64>,
    tls: Option<&ClientTls>,
) -> Result<Connection, String> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, open(addr, tls))
        .await
        .map_err(|_| format!("no connection within {CONNECT_TIMEOUT:?}"))?
        .map_err(|e| e.to_string())?;
    let mut framed = Framed::new(stream, ClientCodec::client());
    // The greeting: its answer says the node speaks this protocol.
    framed
        .send(RequestFrame {
            id: 0,
            request: Request::Hello {
                protocol: PROTOCOL_VERSION,
                node: me,
            },
        })
        .await
        .map_err(|e| e.to_string())?;
    match tokio::time::timeout(CONNECT_TIMEOUT, framed.next()).await {
        Ok(Some(Ok(frame))) => match frame.response {
            Response::Hello { .. } => Ok(framed),
            Response::Error(e) => Err(e.to_string()),
            other => Err(format!("unexpected greeting {other:?}")),
        },
        // Bytes that are no frame of ours (a TLS alert read as a length,
        // say): the node speaks something else.
        Ok(Some(Err(e))) => Err(format!(
            "the node's answer to the greeting is no frame of this protocol ({e}); does it require TLS?"
        )),
        Ok(None) => Err("closed during the greeting".to_owned()),
        Err(_) => Err(format!("no greeting within {CONNECT_TIMEOUT:?}")),
    }
}

/// Serves calls over `framed` until it fails (`Some(reason)`, after
/// failing every call it carried) or the last handle is dropped (`None`).
async fn serve(
    addr: &str,
    mut framed: Connection,
    first: Call,
    queue: &mut mpsc::Receiver<Call>,
) -> Option<String> {
    let mut pending: HashMap<u64, oneshot::Sender<Result<Response, CallError>>> = HashMap::new();
    let mut next_id = 1u64;
    let mut carry = Some(first);
    let mut handles_gone = false;
    let reason = loop {
        if let Some(Call {
            request,
            reply,
            state,
        }) = carry.take()
        {
            let claimed = state
                .compare_exchange(QUEUED, SENT, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            if !claimed {
                // The caller gave up before it was taken: it never is sent.
                continue;
            }
            let id = next_id;
            next_id = next_id.wrapping_add(1).max(1);
            match framed.send(RequestFrame { id, request }).await {
                Ok(()) => {
                    pending.insert(id, reply);
                }
                // Refused by the encoder before a byte was buffered: this
                // call fails, the connection carries on.
                Err(e @ (WireError::TooLarge { .. } | WireError::Encode(_))) => {
                    let _ = reply.send(Err(CallError::TooLarge {
                        addr: addr.to_owned(),
                        reason: e.to_string(),
                    }));
                }
                // A frame cut short is never read as a request.
                Err(e) => {
                    let _ = reply.send(Err(CallError::Unreachable {
                        addr: addr.to_owned(),
                        reason: e.to_string(),
                    }));
                    break e.to_string();
                }
            }
        }
        if pending.len() >= MAX_IN_FLIGHT {
            // Callers that timed out wait for nothing: their places free.
            pending.retain(|_, reply| !reply.is_closed());
        }
        tokio::select! {
            call = queue.recv(), if !handles_gone && pending.len() < MAX_IN_FLIGHT => match call {
                Some(call) => carry = Some(call),
                None if pending.is_empty() => return None,
                // The handles are gone; the answers still owed are read.
                None => handles_gone = true,
            },
            frame = framed.next() => match frame {
                Some(Ok(frame)) => {
                    if let Some(reply) = pending.remove(&frame.id) {
                        let _ = reply.send(Ok(frame.response));
                    }
                    if handles_gone && pending.is_empty() {
                        return None;
                    }
                }
                Some(Err(e)) => break e.to_string(),
                None => break "closed by the node".to_owned(),
            },
        }
    };
    for (_, reply) in pending.drain() {
        let _ = reply.send(Err(CallError::Lost {
            addr: addr.to_owned(),
            reason: reason.clone(),
        }));
    }
    Some(reason)
}
