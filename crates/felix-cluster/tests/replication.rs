//! Replicated shards on three nodes in one process, over loopback TCP.

mod common;

use std::time::Duration;

use common::{all_records, append_acked, client, cluster, key, leader_of, start};
use felix_cluster::{
    ClientError, MAX_APPEND_RECORDS, MAX_RECORD_BYTES, NodeConfig, NodeError, ShardError,
    wire::RemoteError,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appended_records_are_on_every_replica_at_their_offsets() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    let shard = key(0);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();

    let acked = append_acked(&client, &shard, 20, 5).await;
    for node in &nodes {
        let read = all_records(&client, &node.addr().to_string(), &shard, acked.len()).await;
        assert_eq!(read, acked, "node {}", node.id());
    }
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_refuses_an_append_naming_the_leader() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    let shard = key(1);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    client.append(&shard, vec![b"x".to_vec()]).await.unwrap();
    let leader = leader_of(&client, &nodes, &shard).await;
    let follower = nodes.iter().find(|n| n.id() != leader).unwrap();
    // A client that knows only the follower is sent on to the leader...
    let direct = felix_cluster::Client::with_options(
        [follower.addr().to_string()],
        felix_cluster::ClientOptions {
            deadline: Duration::from_millis(300),
            call_timeout: Duration::from_millis(300),
            ..Default::default()
        },
    );
    let offsets = direct.append(&shard, vec![b"y".to_vec()]).await.unwrap();
    assert_eq!(offsets.len(), 1);
    // ...because the follower names it, with its address.
    let leader_addr = nodes
        .iter()
        .find(|n| n.id() == leader)
        .unwrap()
        .addr()
        .to_string();
    let replica = follower.shard(&shard).await.unwrap();
    let refused = replica.append(vec![b"z".to_vec()]).await.unwrap_err();
    assert!(
        matches!(refused, ShardError::NotLeader { ref shard, leader: Some((id, ref addr)) }
            if shard == "acme/default/orders/1" && id == leader && *addr == leader_addr),
        "{refused}"
    );
    let status = direct.status(&follower.addr().to_string()).await.unwrap();
    assert_eq!(status.groups[0].leader, Some(leader));
    assert_eq!(status.groups[0].role, "follower");
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_leader_stops_the_others_elect_one_and_nothing_acknowledged_is_lost() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    let shard = key(2);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let mut acked = Vec::new();
    for i in 0..10u32 {
        let payload = format!("before-{i}").into_bytes();
        let offsets = client.append(&shard, vec![payload.clone()]).await.unwrap();
        acked.push((offsets[0], payload));
    }
    let leader = leader_of(&client, &nodes, &shard).await;
    let position = nodes.iter().position(|n| n.id() == leader).unwrap();
    let stopped = nodes.remove(position);
    let stopped_addr = stopped.addr().to_string();
    stopped.shutdown().await.unwrap();

    for i in 0..10u32 {
        let payload = format!("after-{i}").into_bytes();
        let offsets = client.append(&shard, vec![payload.clone()]).await.unwrap();
        acked.push((offsets[0], payload));
    }
    for node in &nodes {
        let read = all_records(&client, &node.addr().to_string(), &shard, acked.len()).await;
        assert_eq!(read, acked, "node {}", node.id());
    }
    // The old leader restarts on its directory and address, and catches up.
    let restarted = start(root.path(), leader, &stopped_addr).await;
    let read = all_records(&client, &stopped_addr, &shard, acked.len()).await;
    assert_eq!(read, acked);
    restarted.shutdown().await.unwrap();
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_shards_share_one_connection_per_peer() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    for s in 0..8 {
        client.create_shard(&key(s), vec![1, 2, 3]).await.unwrap();
        client.append(&key(s), vec![vec![s as u8]]).await.unwrap();
    }
    // A first round connects this client to every node.
    for node in &nodes {
        client.status(&node.addr().to_string()).await.unwrap();
    }
    let (mut dialled, mut accepted) = (0, 0);
    for node in &nodes {
        let status = client.status(&node.addr().to_string()).await.unwrap();
        assert_eq!(status.groups.len(), 8);
        // At most one connection to each other node, whatever the number
        // of groups; and accepted: at most one from each, and this client's.
        assert!(status.peer_connections <= 2, "{status:?}");
        assert!(status.inbound_connections <= 3, "{status:?}");
        dialled += status.peer_connections;
        accepted += status.inbound_connections;
    }
    // Every connection a node dialled is one another accepted.
    assert_eq!(accepted, dialled + 3);
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_a_shard_the_node_does_not_host_names_node_and_shard() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 1).await;
    let client = client(&nodes);
    let err = client
        .read_at(
            &nodes[0].addr().to_string(),
            &key(9),
            0,
            1024,
            Duration::ZERO,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::Remote(RemoteError::UnknownShard { node: 1, ref shard }) if shard == "acme/default/orders/9"),
        "{err}"
    );
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creating_a_shard_again_with_other_replicas_is_refused_naming_its_voters() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    let shard = key(3);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    // The same replicas again: harmless.
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let err = client.create_shard(&shard, vec![1, 2]).await.unwrap_err();
    assert!(
        matches!(err, ClientError::Remote(RemoteError::Invalid { ref reason, .. })
            if reason == "shard acme/default/orders/3 exists with voters {1, 2, 3}, not {1, 2}"),
        "{err}"
    );
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_refuses_store_retention_which_would_cut_the_raft_log() {
    let root = tempfile::tempdir().unwrap();
    let mut config = NodeConfig::new(1, root.path().join("n1"), "127.0.0.1:0");
    config.store.retention.max_bytes = Some(1 << 30);
    let err = felix_cluster::Node::start(config).await.err().unwrap();
    assert!(
        matches!(err, NodeError::Retention { node: 1, found } if found.max_bytes == Some(1 << 30)),
        "{err}"
    );
}

/// An append of more records than one append takes, or with a record
/// larger than a replicated record may be, is refused whole, naming the
/// shard, the count or the record and the limit, on the node's handle
/// and through the client alike; nothing is appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_over_the_record_count_or_size_limit_is_refused_whole() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 1).await;
    let client = client(&nodes);
    let shard = key(0);
    client.create_shard(&shard, vec![1]).await.unwrap();
    append_acked(&client, &shard, 1, 2).await;
    let replica = nodes[0].shard(&shard).await.unwrap();
    let before = replica.offsets();

    let many = vec![Vec::new(); MAX_APPEND_RECORDS + 1];
    let refused = replica.append(many.clone()).await.unwrap_err();
    assert!(
        matches!(&refused, ShardError::TooManyRecords { shard: s, records, max }
            if *s == shard.to_string() && *records == MAX_APPEND_RECORDS + 1 && *max == MAX_APPEND_RECORDS),
        "{refused}"
    );
    let remote = client.append(&shard, many).await.unwrap_err();
    assert!(
        matches!(&remote, ClientError::Remote(RemoteError::TooManyRecords { node: 1, records, .. })
            if *records == MAX_APPEND_RECORDS + 1),
        "{remote}"
    );

    let large = vec![b"small".to_vec(), vec![0; MAX_RECORD_BYTES + 1]];
    let refused = replica.append(large).await.unwrap_err();
    assert_eq!(
        refused.to_string(),
        format!(
            "record 1 of the append to shard {shard} holds {} bytes, above the {MAX_RECORD_BYTES}-byte limit of a replicated record",
            MAX_RECORD_BYTES + 1
        )
    );
    // Nothing of the refused appends went in.
    assert_eq!(replica.offsets(), before);
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}
