//! The node's listener: each connection's requests are read in order,
//! handled concurrently (at most [`MAX_IN_FLIGHT`] at a time, so a peer
//! that sends faster than the node answers is slowed down, not buffered
//! without bound), and answered as each is done.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::node::Shared;
use crate::peer::MAX_IN_FLIGHT;
use crate::tls::BoxedIo;

/// How long a connecting side may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
use crate::wire::{RemoteError, Request, Response, ResponseFrame, ServerCodec};

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
    let stream: BoxedIo = match &shared.tls {
        Some(tls) => {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor.accept(stream)).await {
                Ok(Ok(stream)) => Box::new(stream),
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
    let writer = tokio::spawn(async move {
        while let Some(frame) = answered.recv().await {
            if sink.send(frame).await.is_err() {
                return;
            }
        }
    });
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    // Who greeted: `Some(Some(id))` a node, `Some(None)` a client.
    let mut greeted: Option<Option<u64>> = None;
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            break;
        };
        let frame = tokio::select! {
            _ = stop.changed() => break,
            frame = frames.next() => frame,
        };
        match frame {
            Some(Ok(frame)) => {
                if let Request::Hello { node, .. } = &frame.request {
                    greeted = Some(*node);
                }
                if let Some(refusal) = refuse(&shared, greeted, &frame.request) {
                    let _ = answers
                        .send(ResponseFrame {
                            id: frame.id,
                            response: Response::Error(refusal),
                        })
                        .await;
                    continue;
                }
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
                    drop(slot);
                });
            }
            Some(Err(e)) => {
                tracing::warn!(node = shared.id, peer = %from, error = %e, "closing a connection that sent an unreadable frame");
                break;
            }
            None => break,
        }
    }
    drop(answers);
    // Answers still being worked out are sent when done; the writer ends
    // with the last of them.
    let _ = writer.await;
}

/// A request this connection may not make: anything before the greeting,
/// and a Raft message from a connection that did not greet as a node
/// (a client).
fn refuse(shared: &Shared, greeted: Option<Option<u64>>, request: &Request) -> Option<RemoteError> {
    let reason = match (greeted, request) {
        (None, _) => "the connection's first request must be its greeting",
        (Some(None), Request::Raft { .. }) => {
            "Raft messages come from nodes, and this connection greeted as a client"
        }
        _ => return None,
    };
    Some(RemoteError::Invalid {
        node: shared.id,
        reason: reason.to_owned(),
    })
}
