//! A replicated shard's log start moves through its log: deleting records
//! moves every replica's start to the same offset; a replica that missed
//! the records below it is sent the snapshot at the start and restarts its
//! shard there; a node restarted after a purge still knows its members,
//! and one restarted between a snapshot and its purge finishes the purge;
//! retention moves the start on its own.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{
    append_acked, client, cluster, eventually, key, leader_of, records_from, start, timings,
};
use felix_cluster::wire::RemoteError;
use felix_cluster::{ClientError, Node, NodeConfig, ShardError};
use felix_format::LOG_START_FILE_NAME;
use felix_format::log_start::decode_log_start;
use felix_raft::{FelixLogStore, TypeConfig};
use felix_storage::{Durability, Retention, ShardKey, Store, StoreConfig};
use openraft::storage::SnapshotMeta;
use openraft::{EntryPayload, RaftLogReader, StoredMembership};

/// Waits until node `node` has `shard` beginning at `start`.
async fn begins_at(node: &Node, shard: &ShardKey, start: u64) {
    eventually(
        &format!("node {} begins at {start}", node.id()),
        Duration::from_secs(10),
        || async {
            let replica = node.shard(shard).await?;
            (replica.offsets().base == start).then_some(())
        },
    )
    .await;
}

/// Waits until node `id`'s shard files (under `root`) begin at `start` or later:
/// its log-start file says so, the snapshot taken and the log purged, not
/// only the entry applied.
async fn purged_to(root: &Path, id: u64, shard: &ShardKey, start: u64) {
    let file = root
        .join(format!("n{id}"))
        .join(shard.dir_name())
        .join(LOG_START_FILE_NAME);
    eventually(
        &format!("node {id}'s log purged up to {start}"),
        Duration::from_secs(10),
        || async {
            let bytes = std::fs::read(&file).ok()?;
            let recorded = decode_log_start(&bytes).ok()?;
            (recorded.start_offset >= start).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_records_moves_every_replicas_start_to_the_same_offset() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    let shard = key(0);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let acked = append_acked(&client, &shard, 10, 10).await;
    let start = acked[50].0;

    assert_eq!(
        client.delete_records_before(&shard, start).await.unwrap(),
        start
    );
    for node in &nodes {
        begins_at(node, &shard, start).await;
        let addr = node.addr().to_string();
        // Below the start: deleted, and the answer says where to read.
        let below = client
            .read_at(&addr, &shard, acked[0].0, 1 << 20, Duration::ZERO)
            .await;
        assert!(
            matches!(
                below,
                Err(ClientError::Remote(RemoteError::Trimmed { offset, start: s, .. }))
                    if offset == acked[0].0 && s == start
            ),
            "node {}: {below:?}",
            node.id()
        );
        // From it: every acknowledged record from there, as acknowledged.
        let kept = records_from(&client, &addr, &shard, start, 50).await;
        assert_eq!(kept, acked[50..], "node {}", node.id());
    }

    // Never backwards; never past what is committed.
    assert_eq!(
        client
            .delete_records_before(&shard, acked[10].0)
            .await
            .unwrap(),
        start
    );
    let leader = leader_of(&client, &nodes, &shard).await;
    let leader = nodes.iter().find(|n| n.id() == leader).unwrap();
    let replica = leader.shard(&shard).await.unwrap();
    let committed = replica.offsets().committed;
    let past = replica.delete_records_before(committed + 1).await;
    assert!(
        matches!(
            past,
            Err(ShardError::DeletePastEnd { offset, committed: c, .. })
                if offset == committed + 1 && c == committed
        ),
        "{past:?}"
    );
    // A follower names the leader rather than answering.
    let follower = nodes.iter().find(|n| n.id() != leader.id()).unwrap();
    let refused = follower
        .shard(&shard)
        .await
        .unwrap()
        .delete_records_before(start + 1)
        .await;
    assert!(
        matches!(refused, Err(ShardError::NotLeader { leader: Some((id, _)), .. }) if id == leader.id()),
        "{refused:?}"
    );
    // The shard still takes records, at the next offsets.
    let more = client
        .append(&shard, vec![b"after".to_vec()])
        .await
        .unwrap();
    assert!(more[0] > acked[99].0, "{more:?}");
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_behind_the_leaders_start_catches_up_by_snapshot() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    let shard = key(1);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let mut acked = append_acked(&client, &shard, 2, 10).await;
    // A follower stops, holding the first twenty records at most.
    let leader = leader_of(&client, &nodes, &shard).await;
    let at = nodes.iter().position(|n| n.id() != leader).unwrap();
    let stopped = nodes.remove(at);
    let (stopped_id, stopped_addr) = (stopped.id(), stopped.addr().to_string());
    stopped.shutdown().await.unwrap();

    // The others go on, and delete everything the follower holds.
    for (offset, record) in append_acked(&client, &shard, 5, 10).await {
        acked.push((offset, record));
    }
    let start = acked[40].0;
    assert_eq!(
        client.delete_records_before(&shard, start).await.unwrap(),
        start
    );
    for node in &nodes {
        begins_at(node, &shard, start).await;
    }

    // Back, it is sent the snapshot: its shard restarts at the start, and
    // it replicates from there.
    let restarted = restart_node(root.path(), stopped_id, &stopped_addr).await;
    begins_at(&restarted, &shard, start).await;
    purged_to(root.path(), stopped_id, &shard, start).await;
    let kept = records_from(&client, &stopped_addr, &shard, start, 30).await;
    assert_eq!(kept, acked[40..]);
    let below = client
        .read_at(&stopped_addr, &shard, acked[0].0, 1 << 20, Duration::ZERO)
        .await;
    assert!(
        matches!(below, Err(ClientError::Remote(RemoteError::Trimmed { start: s, .. })) if s == start),
        "{below:?}"
    );
    // And it goes on replicating what comes next.
    let next = client.append(&shard, vec![b"next".to_vec()]).await.unwrap();
    let tail = records_from(&client, &stopped_addr, &shard, next[0], 1).await;
    assert_eq!(tail, [(next[0], b"next".to_vec())]);

    restarted.shutdown().await.unwrap();
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

/// Starts node `id` again on its directory and address.
async fn restart_node(root: &std::path::Path, id: u64, addr: &str) -> Node {
    start(root, id, addr).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_restarted_after_a_purge_still_knows_its_members() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    let shard = key(2);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let acked = append_acked(&client, &shard, 3, 10).await;
    // Past every membership entry the log held.
    let start = acked[20].0;
    client.delete_records_before(&shard, start).await.unwrap();
    for node in &nodes {
        begins_at(node, &shard, start).await;
    }
    let addrs: Vec<(u64, String)> = nodes
        .iter()
        .map(|n| (n.id(), n.addr().to_string()))
        .collect();
    for node in nodes {
        node.shutdown().await.unwrap();
    }

    // The membership comes back from each replica's raft-snapshot file:
    // the group elects a leader and commits.
    let mut nodes = Vec::new();
    for (id, addr) in &addrs {
        nodes.push(restart_node(root.path(), *id, addr).await);
    }
    common::introduce(&nodes);
    let offsets = client
        .append(&shard, vec![b"again".to_vec()])
        .await
        .unwrap();
    assert!(offsets[0] > acked[29].0, "{offsets:?}");
    for node in &nodes {
        let replica = node.shard(&shard).await.unwrap();
        assert_eq!(replica.offsets().base, start, "node {}", node.id());
    }
    let kept = records_from(&client, &addrs[0].1, &shard, start, 11).await;
    assert_eq!(kept[..10], acked[20..]);
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_moves_every_replicas_start_through_the_log() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        let mut config = NodeConfig::new(id, root.path().join(format!("n{id}")), "127.0.0.1:0");
        config.timings = timings();
        config.store = StoreConfig {
            segment_size_bytes: 4096,
            ..StoreConfig::default()
        };
        config.retention = Retention {
            max_bytes: Some(8192),
            max_age: None,
            interval: Some(Duration::from_millis(100)),
        };
        nodes.push(Node::start(config).await.unwrap());
    }
    common::introduce(&nodes);
    let client = client(&nodes);
    let shard = key(3);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let mut acked = Vec::new();
    for batch in 0..20u8 {
        let records: Vec<Vec<u8>> = (0..10u8).map(|i| vec![batch ^ i; 200]).collect();
        let offsets = client.append(&shard, records.clone()).await.unwrap();
        acked.extend(offsets.into_iter().zip(records));
    }

    // Every replica ends up beginning at the same offset, past the first
    // records, and holds everything from there.
    let start = eventually(
        "retention moved the start",
        Duration::from_secs(20),
        || async {
            let mut starts = Vec::new();
            for node in &nodes {
                starts.push(node.shard(&shard).await?.offsets().base);
            }
            (starts[0] > acked[0].0 && starts.iter().all(|&s| s == starts[0])).then_some(starts[0])
        },
    )
    .await;
    let first = acked.iter().position(|(o, _)| *o >= start).unwrap();
    for node in &nodes {
        purged_to(root.path(), node.id(), &shard, start).await;
        let kept = records_from(
            &client,
            &node.addr().to_string(),
            &shard,
            start,
            acked.len() - first,
        )
        .await;
        assert_eq!(kept, acked[first..], "node {}", node.id());
    }
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_retention_is_checked_as_a_stores() {
    let root = tempfile::tempdir().unwrap();
    let mut config = NodeConfig::new(1, root.path().join("n1"), "127.0.0.1:0");
    // An interval with nothing to apply.
    config.retention.interval = Some(Duration::from_secs(1));
    let err = Node::start(config).await.err();
    assert!(
        matches!(
            err,
            Some(felix_cluster::NodeError::RetentionConfig {
                node: 1,
                source: felix_storage::ConfigError::RetentionIntervalWithoutRule { .. }
            })
        ),
        "{err:?}"
    );
}

/// A crash after a snapshot was recorded and before the log was purged up
/// to it: the restarted node finishes the purge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_a_crash_cut_short_is_finished_when_the_node_restarts() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    let shard = key(4);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let acked = append_acked(&client, &shard, 2, 10).await;
    let stopped = nodes.pop().unwrap();
    let (id, addr) = (stopped.id(), stopped.addr().to_string());
    eventually(
        "node 3 holds every record",
        Duration::from_secs(10),
        || async {
            let replica = stopped.shard(&shard).await?;
            (replica.offsets().committed > acked[19].0).then_some(())
        },
    )
    .await;
    stopped.shutdown().await.unwrap();

    // What the state machine records before a purge, at the tenth record:
    // the snapshot at its entry, with the membership in force there.
    let store = Store::options(root.path().join(format!("n{id}")))
        .config(StoreConfig {
            durability: Durability::None,
            ..StoreConfig::default()
        })
        .open()
        .unwrap();
    let mut log = FelixLogStore::<TypeConfig>::in_store(&store, &shard).unwrap();
    let target = acked[9].0;
    let entries = log.try_get_log_entries(0..=target).await.unwrap();
    let membership = entries
        .iter()
        .rev()
        .find_map(|e| match &e.payload {
            EntryPayload::Membership(m) => Some(StoredMembership::new(Some(e.log_id), m.clone())),
            _ => None,
        })
        .unwrap();
    let last = entries.last().unwrap().log_id;
    log.save_snapshot(&SnapshotMeta {
        last_log_id: Some(last),
        last_membership: membership,
    })
    .unwrap();
    log.close().unwrap();
    drop(log);
    store.close().unwrap();

    let restarted = restart_node(root.path(), id, &addr).await;
    purged_to(root.path(), id, &shard, target + 1).await;
    begins_at(&restarted, &shard, target + 1).await;
    let kept = records_from(&client, &addr, &shard, target + 1, 10).await;
    assert_eq!(kept, acked[10..]);
    restarted.shutdown().await.unwrap();
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}
