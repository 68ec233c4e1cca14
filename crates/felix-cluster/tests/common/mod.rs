//! Nodes started in the test's process on 127.0.0.1, and waiting with a
//! bound.
#![allow(dead_code)]

pub(crate) mod proxy;

use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use felix_cluster::wire::{ClientCodec, PROTOCOL_VERSION, Request, RequestFrame, Response};
use felix_cluster::{Client, ClientOptions, Node, NodeConfig, RaftTimings};
use felix_storage::ShardKey;
use futures::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

/// Test timings: short, so elections take well under a second.
pub(crate) fn timings() -> RaftTimings {
    RaftTimings {
        heartbeat_ms: 50,
        election_min_ms: 300,
        election_max_ms: 600,
    }
}

/// Starts node `id` in `root/n{id}` on `listen`.
pub(crate) async fn start(root: &Path, id: u64, listen: &str) -> Node {
    let mut config = NodeConfig::new(id, root.join(format!("n{id}")), listen);
    config.timings = timings();
    Node::start(config).await.unwrap()
}

/// Starts `count` nodes (ids from 1) on free ports, each told of the others.
pub(crate) async fn cluster(root: &Path, count: u64) -> Vec<Node> {
    let mut nodes = Vec::new();
    for id in 1..=count {
        nodes.push(start(root, id, "127.0.0.1:0").await);
    }
    introduce(&nodes);
    nodes
}

/// Tells every node where every other listens.
pub(crate) fn introduce(nodes: &[Node]) {
    for a in nodes {
        for b in nodes {
            a.add_peer(b.id(), b.addr().to_string());
        }
    }
}

pub(crate) fn client(nodes: &[Node]) -> Client {
    Client::with_options(
        nodes.iter().map(|n| n.addr().to_string()),
        ClientOptions {
            deadline: Duration::from_secs(20),
            call_timeout: Duration::from_secs(5),
            ..Default::default()
        },
    )
}

pub(crate) fn key(shard: u32) -> ShardKey {
    ShardKey::new("acme", "default", "orders", shard)
}

/// Polls `check` until it returns `Some`, failing the test after `limit`.
pub(crate) async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every committed record of `shard` on the node at `addr`, as (offset,
/// payload), once it has at least `at_least` of them.
pub(crate) async fn all_records(
    client: &Client,
    addr: &str,
    shard: &ShardKey,
    at_least: usize,
) -> Vec<(u64, Vec<u8>)> {
    records_from(client, addr, shard, 0, at_least).await
}

/// The committed records of `shard` on the node at `addr` from offset
/// `from`, as (offset, payload), once it has at least `at_least` of them.
pub(crate) async fn records_from(
    client: &Client,
    addr: &str,
    shard: &ShardKey,
    from: u64,
    at_least: usize,
) -> Vec<(u64, Vec<u8>)> {
    eventually(
        &format!("{at_least} records from {from} on {addr}"),
        Duration::from_secs(20),
        || async {
            let (mut at, mut out) = (from, Vec::new());
            loop {
                let batch = client
                    .read_at(addr, shard, at, 1 << 20, Duration::ZERO)
                    .await
                    .ok()?;
                if batch.next == at {
                    break;
                }
                out.extend(batch.records().map(|r| (r.offset, r.payload.to_vec())));
                at = batch.next;
            }
            (out.len() >= at_least).then_some(out)
        },
    )
    .await
}

/// The leader of `shard` as node 1 of `nodes` reports it (bounded wait).
pub(crate) async fn leader_of(
    client: &felix_cluster::Client,
    nodes: &[felix_cluster::Node],
    shard: &felix_storage::ShardKey,
) -> u64 {
    let addr = nodes[0].addr().to_string();
    let name = felix_cluster::wire::ShardName::from(shard);
    eventually("a leader", Duration::from_secs(10), || async {
        let status = client.status(&addr).await.ok()?;
        status.groups.iter().find(|g| g.shard == name)?.leader
    })
    .await
}

/// Appends `batches` batches of `per_batch` records (`r{batch}-{i}`) through
/// `client`, each acknowledged with consecutive offsets; returns every
/// record with its acknowledged offset, in order.
pub(crate) async fn append_acked(
    client: &Client,
    shard: &ShardKey,
    batches: u32,
    per_batch: u32,
) -> Vec<(u64, Vec<u8>)> {
    let mut acked = Vec::new();
    for batch in 0..batches {
        let records: Vec<Vec<u8>> = (0..per_batch)
            .map(|i| format!("r{batch}-{i}").into_bytes())
            .collect();
        let offsets = client.append(shard, records.clone()).await.unwrap();
        assert_eq!(offsets.len(), records.len());
        assert!(offsets.windows(2).all(|w| w[1] == w[0] + 1), "{offsets:?}");
        acked.extend(offsets.into_iter().zip(records));
    }
    acked
}

/// A connection that speaks the wire protocol by hand.
pub(crate) type Raw = Framed<TcpStream, ClientCodec>;

/// Sends `request` as frame `id` on `conn` and returns its answer, waiting
/// 5 s at most.
pub(crate) async fn ask(conn: &mut Raw, id: u64, request: Request) -> Response {
    conn.send(RequestFrame { id, request }).await.unwrap();
    let frame = tokio::time::timeout(Duration::from_secs(5), conn.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(frame.id, id);
    frame.response
}

/// A connection to `addr` that greeted as node `node` (frame 0).
pub(crate) async fn greet_as(addr: &str, node: u64) -> Raw {
    let mut conn = Framed::new(
        TcpStream::connect(addr).await.unwrap(),
        ClientCodec::client(),
    );
    let hello = Request::Hello {
        protocol: PROTOCOL_VERSION,
        node: Some(node),
    };
    let answer = ask(&mut conn, 0, hello).await;
    assert!(matches!(answer, Response::Hello { .. }), "{answer:?}");
    conn
}
