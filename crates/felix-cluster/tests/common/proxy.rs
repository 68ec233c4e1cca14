//! A fault-injecting proxy in front of each node: connections from node
//! `a` to node `b` (known from the greeting every connection starts with)
//! are refused, and cut when open, while `a` and `b` are partitioned.
//! Clients' connections (no node id in the greeting) always pass.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::BytesMut;
use felix_cluster::wire::{Request, ServerCodec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::codec::Decoder;

/// The pairs of nodes that cannot reach each other.
#[derive(Clone)]
pub(crate) struct Partitions {
    cut: Arc<watch::Sender<BTreeSet<(u64, u64)>>>,
}

impl Partitions {
    pub(crate) fn new() -> Self {
        Self {
            cut: Arc::new(watch::channel(BTreeSet::new()).0),
        }
    }

    /// Cuts `node` off from each of `others`, both ways.
    pub(crate) fn isolate(&self, node: u64, others: &[u64]) {
        self.cut.send_modify(|cut| {
            for &o in others {
                cut.insert((node.min(o), node.max(o)));
            }
        });
    }

    /// Heals every cut.
    pub(crate) fn heal(&self) {
        self.cut.send_modify(BTreeSet::clear);
    }

    fn blocked(cut: &BTreeSet<(u64, u64)>, a: Option<u64>, b: u64) -> bool {
        a.is_some_and(|a| cut.contains(&(a.min(b), a.max(b))))
    }
}

/// Starts a proxy for node `target` (listening at `target_addr`) and
/// returns the proxy's address.
pub(crate) async fn proxy(target: u64, target_addr: String, partitions: Partitions) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let (target_addr, partitions) = (target_addr.clone(), partitions.clone());
            tokio::spawn(async move {
                let _ = pass(inbound, target, &target_addr, &partitions).await;
            });
        }
    });
    addr
}

/// Reads the greeting to learn who connects, then pipes both ways until
/// either side closes or the two are partitioned.
async fn pass(
    mut inbound: TcpStream,
    target: u64,
    target_addr: &str,
    partitions: &Partitions,
) -> std::io::Result<()> {
    let mut first = BytesMut::new();
    let from = loop {
        if inbound.read_buf(&mut first).await? == 0 {
            return Ok(());
        }
        let mut probe = first.clone();
        match ServerCodec::server().decode(&mut probe) {
            Ok(Some(frame)) => match frame.request {
                Request::Hello { node, .. } => break node,
                _ => break None,
            },
            Ok(None) => continue,
            Err(_) => return Ok(()),
        }
    };
    let mut cut = partitions.cut.subscribe();
    if Partitions::blocked(&cut.borrow_and_update(), from, target) {
        return Ok(());
    }
    let mut outbound = TcpStream::connect(target_addr).await?;
    outbound.write_all(&first).await?;
    let piping = tokio::io::copy_bidirectional(&mut inbound, &mut outbound);
    tokio::pin!(piping);
    loop {
        tokio::select! {
            _ = &mut piping => return Ok(()),
            changed = cut.changed() => {
                if changed.is_err() || Partitions::blocked(&cut.borrow_and_update(), from, target) {
                    // Dropping both streams cuts the connection.
                    return Ok(());
                }
            }
        }
    }
}
