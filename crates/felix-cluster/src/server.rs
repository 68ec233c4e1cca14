//! The node's listener: each connection's requests are read in order,
//! handled concurrently (at most [`MAX_IN_FLIGHT`] at a time, holding at
//! most [`MAX_IN_FLIGHT_BYTES`] of frames, so a peer that sends faster than
//! the node answers is slowed down, not buffered without bound), and
//! answered as each is done.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use rustls::pki_types::CertificateDer;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::node::Shared;
use crate::peer::MAX_IN_FLIGHT;
use crate::tls::BoxedIo;

/// The default most bytes of requests one connection has in the node's
/// hands at a time (read and not yet answered,
/// [`NodeConfig::max_in_flight_bytes`](crate::NodeConfig::max_in_flight_bytes)):
/// 256 MiB, four of the largest frames. A connection at the limit is not
/// read until answers free room, so a peer or client sending large frames
/// faster than the node handles them is slowed down by TCP, whatever their
/// count.
pub const MAX_IN_FLIGHT_BYTES: usize = 4 * crate::wire::MAX_FRAME;

/// How long a connection may take to send its greeting.
const GREETING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The next frame, within `limit` if given (`None` when it passes).
async fn next_within<S>(frames: &mut S, limit: Option<std::time::Duration>) -> Option<S::Item>
where
    S: futures::Stream + Unpin,
{
    match limit {
        Some(limit) => tokio::time::timeout(limit, frames.next())
            .await
            .ok()
            .flatten(),
        None => frames.next().await,
    }
}

/// How long a connecting side may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
use crate::wire::{
    PROTOCOL_VERSION, RemoteError, Request, Response, ResponseFrame, ServerCodec, WireError,
};

/// Accepts connections until `stop` turns true.
pub(crate) async fn serve(
    shared: Arc<Shared>,
    listener: TcpListener,
    mut stop: watch::Receiver<bool>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, from)) => {
                    // Finished connections leave the set as others arrive.
                    while connections.try_join_next().is_some() {}
                    connections.spawn(connection(Arc::clone(&shared), stream, from, stop.clone()));
                }
                Err(e) => {
                    tracing::warn!(node = shared.id, error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
        }
    }
    connections.shutdown().await;
}

/// Serves one connection until it closes, sends a frame this protocol
/// cannot read (logged with the peer's address), or the node stops.
async fn connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    from: SocketAddr,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let _open = Inbound::count(&shared);
    // Over TLS, the certificate the peer presented: whom it may greet as.
    let mut certificate = None;
    let stream: BoxedIo = match &shared.tls {
        Some(tls) => {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor.accept(stream)).await {
                Ok(Ok(stream)) => {
                    certificate = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .cloned();
                    Box::new(stream)
                }
                Ok(Err(e)) => {
                    tracing::warn!(node = shared.id, peer = %from, error = %e, "TLS handshake refused");
                    return;
                }
                Err(_) => {
                    tracing::warn!(node = shared.id, peer = %from, "no TLS handshake within {HANDSHAKE_TIMEOUT:?}");
                    return;
                }
            }
        }
        None => Box::new(stream),
    };
    let (read, write) = tokio::io::split(stream);
    let mut frames = FramedRead::new(read, ServerCodec::server());
    let mut sink = FramedWrite::new(write, ServerCodec::server());
    let (answers, mut answered) = mpsc::channel::<ResponseFrame>(MAX_IN_FLIGHT);
    let node = shared.id;
    let writer = tokio::spawn(async move {
        while let Some(frame) = answered.recv().await {
            let id = frame.id;
            match sink.send(frame).await {
                Ok(()) => {}
                // Refused by the encoder (an answer over the frame limit)
                // before a byte was buffered: say so for that request.
                Err(e @ (WireError::TooLarge { .. } | WireError::Encode(_))) => {
                    let refusal = ResponseFrame {
                        id,
                        response: Response::Error(RemoteError::Invalid {
                            node,
                            reason: format!("the answer could not be sent: {e}"),
                        }),
                    };
                    if sink.send(refusal).await.is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    });
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let budget = Arc::new(Semaphore::new(shared.max_in_flight_bytes));
    // Who greeted: `Some(Some(id))` a node, `Some(None)` a client.
    let mut greeted: Option<Option<u64>> = None;
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            break;
        };
        // A connection that does not greet in time is closed: it holds
        // nothing worth waiting for.
        let greeting = greeted.is_none().then_some(GREETING_TIMEOUT);
        let frame = tokio::select! {
            _ = stop.changed() => break,
            // The writer ended (the connection failed, or the node
            // stopped): nothing read now could be answered.
            () = answers.closed() => break,
            frame = next_within(&mut frames, greeting) => frame,
        };
        match frame {
            Some(Ok(frame)) => {
                let refusal = refuse(&shared, greeted, certificate.as_ref(), &frame.request);
                if let (None, Request::Hello { node, .. }) = (&refusal, &frame.request) {
                    greeted = Some(*node);
                    // A node back (a restart, a healed partition) hears
                    // the heartbeats of the quiet groups led here.
                    if let Some(peer) = node {
                        crate::quiesce::peer_greeted(&shared, *peer);
                    }
                }
                if let Some(refusal) = refusal {
                    let _ = answers
                        .send(ResponseFrame {
                            id: frame.id,
                            response: Response::Error(refusal),
                        })
                        .await;
                    continue;
                }
                // The frame's bytes count against the connection's budget
                // until it is answered; at the limit, nothing more is read.
                let len = frames
                    .decoder()
                    .last_frame_len()
                    .min(shared.max_in_flight_bytes);
                let held = tokio::select! {
                    _ = stop.changed() => break,
                    () = answers.closed() => break,
                    held = Arc::clone(&budget)
                        .acquire_many_owned(u32::try_from(len).unwrap_or(u32::MAX)) => held,
                };
                let Ok(held) = held else { break };
                let in_hand = shared.max_in_flight_bytes - budget.available_permits();
                shared.inbound_bytes_peak.fetch_max(
                    u64::try_from(in_hand).unwrap_or(u64::MAX),
                    std::sync::atomic::Ordering::Relaxed,
                );
                let shared = Arc::clone(&shared);
                let answers = answers.clone();
                tokio::spawn(async move {
                    let response = crate::handle::handle(&shared, frame.request).await;
                    let _ = answers
                        .send(ResponseFrame {
                            id: frame.id,
                            response,
                        })
                        .await;
                    drop((slot, held));
                });
            }
            Some(Err(e)) => {
                tracing::warn!(node = shared.id, peer = %from, error = %e, "closing a connection that sent an unreadable frame");
                break;
            }
            None => {
                if greeted.is_none() {
                    tracing::debug!(node = shared.id, peer = %from, "closing a connection that did not greet");
                }
                break;
            }
        }
    }
    drop(answers);
    // Answers still being worked out are sent when done; the writer ends
    // with the last of them.
    let _ = writer.await;
}

/// A request this connection may not make: anything before the greeting,
/// a greeting as a node that the connection's certificate does not name
/// (over TLS), and a Raft message from a connection that did not greet as
/// a node (a client).
fn refuse(
    shared: &Shared,
    greeted: Option<Option<u64>>,
    certificate: Option<&CertificateDer<'static>>,
    request: &Request,
) -> Option<RemoteError> {
    let reason = match (greeted, request) {
        // Another version is refused and greets nothing: the connection
        // may only greet again.
        (None, Request::Hello { protocol, .. }) if *protocol != PROTOCOL_VERSION => {
            return Some(RemoteError::Protocol {
                node: shared.id,
                expected: PROTOCOL_VERSION,
                found: *protocol,
            });
        }
        (
            None,
            Request::Hello {
                node: Some(node), ..
            },
        ) if shared.tls.is_some() => {
            if certificate.is_some_and(|cert| crate::tls::names_node(cert, *node)) {
                return None;
            }
            return Some(RemoteError::Invalid {
                node: shared.id,
                reason: format!(
                    "a connection greeting as node {node} must present a certificate naming {}",
                    crate::tls::node_certificate_name(*node)
                ),
            });
        }
        (None, Request::Hello { .. }) => return None,
        (None, _) => "the connection's first request must be its greeting",
        (Some(_), Request::Hello { .. }) => "a connection greets once",
        (
            Some(None),
            Request::Raft { .. } | Request::OpenGroup { .. } | Request::Quiesce { .. },
        ) => "Raft and group messages come from nodes, and this connection greeted as a client",
        _ => return None,
    };
    Some(RemoteError::Invalid {
        node: shared.id,
        reason: reason.to_owned(),
    })
}

/// One open connection in the node's count, for as long as it lives.
struct Inbound<'a>(&'a Shared);

impl<'a> Inbound<'a> {
    fn count(shared: &'a Shared) -> Self {
        shared
            .inbound
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self(shared)
    }
}

impl Drop for Inbound<'_> {
    fn drop(&mut self) {
        self.0
            .inbound
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}
