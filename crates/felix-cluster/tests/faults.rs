//! Faults on one node of three: a follower whose disk fails stops serving
//! that shard and says why, while the others go on committing; a node that
//! loses power rejoins without losing a committed entry.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{all_records, client, eventually, introduce, key, timings};
use felix_cluster::wire::{RemoteError, ShardName};
use felix_cluster::{ClientError, Node, NodeConfig};
use felix_io::FileSystem;
use felix_io::sim::{CrashPlan, Fault, FaultEffect, FaultOp, SimFs};

/// Nodes 1 and 2 on the real file system in `root`, node 3 on `sim`.
async fn nodes_with_a_simulated_third(
    root: &std::path::Path,
    sim: &SimFs,
    listen: &str,
) -> Vec<Node> {
    let mut nodes = Vec::new();
    for id in 1..=2 {
        nodes.push(common::start(root, id, "127.0.0.1:0").await);
    }
    nodes.push(start_simulated(sim, listen).await);
    introduce(&nodes);
    nodes
}

async fn start_simulated(sim: &SimFs, listen: &str) -> Node {
    let mut config = NodeConfig::new(3, PathBuf::from("/sim/n3"), listen);
    config.timings = timings();
    config.file_system = FileSystem::new(sim.clone());
    Node::start(config).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_disk_fails_stops_serving_while_the_others_commit() {
    let root = tempfile::tempdir().unwrap();
    let sim = SimFs::new();
    let nodes = nodes_with_a_simulated_third(root.path(), &sim, "127.0.0.1:0").await;
    let client = client(&nodes);
    let shard = key(0);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let mut acked = Vec::new();
    for i in 0..5u32 {
        let payload = format!("before-{i}").into_bytes();
        acked.push((
            client.append(&shard, vec![payload.clone()]).await.unwrap()[0],
            payload,
        ));
    }
    let third = nodes[2].addr().to_string();
    all_records(&client, &third, &shard, acked.len()).await;

    // Every file sync on node 3 fails from now on.
    sim.inject(Fault {
        op: FaultOp::SyncFile,
        path_contains: String::new(),
        skip: 0,
        effect: FaultEffect::Errno(5),
    });
    for i in 0..10u32 {
        let payload = format!("after-{i}").into_bytes();
        acked.push((
            client.append(&shard, vec![payload.clone()]).await.unwrap()[0],
            payload,
        ));
    }
    for node in &nodes[..2] {
        let read = all_records(&client, &node.addr().to_string(), &shard, acked.len()).await;
        assert_eq!(read, acked);
    }
    let name = ShardName::from(&shard);
    let role = eventually(
        "node 3 to report its stop",
        Duration::from_secs(10),
        || async {
            let status = client.status(&third).await.ok()?;
            let group = status.groups.into_iter().find(|g| g.shard == name)?;
            group.role.starts_with("stopped: ").then_some(group.role)
        },
    )
    .await;
    assert!(
        role.contains("sync") || role.contains("Input/output"),
        "{role}"
    );
    let refused = client
        .read_at(&third, &shard, 0, 1 << 20, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ClientError::Remote(RemoteError::Stopped { node: 3, ref shard, .. }) if shard == "acme/default/orders/0"),
        "{refused}"
    );
    for node in nodes {
        let _ = node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_loses_power_rejoins_with_every_committed_entry() {
    let root = tempfile::tempdir().unwrap();
    let sim = SimFs::new();
    let mut nodes = nodes_with_a_simulated_third(root.path(), &sim, "127.0.0.1:0").await;
    let client = client(&nodes);
    let shard = key(0);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let mut acked = Vec::new();
    for i in 0..10u32 {
        let payload = format!("before-{i}").into_bytes();
        acked.push((
            client.append(&shard, vec![payload.clone()]).await.unwrap()[0],
            payload,
        ));
    }

    // The power goes: nothing more reaches node 3's disk, then the disk
    // is what the last syncs left.
    sim.cut_power_after(0);
    let third = nodes.pop().unwrap();
    let addr = third.addr().to_string();
    let _ = third.shutdown().await;
    let after_crash = sim.crash(&CrashPlan::durable_only());

    for i in 0..10u32 {
        let payload = format!("while-down-{i}").into_bytes();
        acked.push((
            client.append(&shard, vec![payload.clone()]).await.unwrap()[0],
            payload,
        ));
    }
    let restarted = start_simulated(&after_crash, &addr).await;
    for i in 0..5u32 {
        let payload = format!("after-{i}").into_bytes();
        acked.push((
            client.append(&shard, vec![payload.clone()]).await.unwrap()[0],
            payload,
        ));
    }
    let read = all_records(&client, &addr, &shard, acked.len()).await;
    assert_eq!(read, acked);
    restarted.shutdown().await.unwrap();
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}
