//! A shard's members change: a fourth node added to a shard holding
//! 100 MiB catches up by replication alone and becomes a voter; a node is
//! removed; creating a shard again changes nothing.

mod common;

use std::time::{Duration, Instant};

use common::{client, cluster, eventually, key, start};
use felix_cluster::ShardError;
use felix_cluster::wire::ShardName;

/// Bytes the shard holds before the fourth node joins.
const HELD: usize = 100 << 20;
/// One record's payload.
const RECORD: usize = 64 << 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fourth_node_catches_up_on_100_mib_and_becomes_a_voter() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    let shard = key(0);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    // Creating it again is harmless.
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let mut last = 0;
    for batch in 0..HELD / RECORD / 16 {
        let records: Vec<Vec<u8>> = (0..16)
            .map(|i| vec![(batch * 16 + i) as u8; RECORD])
            .collect();
        last = *client
            .append(&shard, records)
            .await
            .unwrap()
            .last()
            .unwrap();
    }

    let fourth = start(root.path(), 4, "127.0.0.1:0").await;
    let fourth_addr = fourth.addr().to_string();
    let started = Instant::now();
    client.add_node(&shard, 4, &fourth_addr).await.unwrap();
    eprintln!(
        "node 4 caught up on {} MiB in {:?}",
        HELD >> 20,
        started.elapsed()
    );
    nodes.push(fourth);

    // It holds every record, and it votes.
    let batch = client
        .read_at(&fourth_addr, &shard, last, 1 << 20, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(batch.len(), 1);
    assert_eq!(
        batch.records().next().map(|r| r.payload.len()),
        Some(RECORD)
    );
    let name = ShardName::from(&shard);
    let voters = eventually(
        "node 4 a voter everywhere",
        Duration::from_secs(10),
        || async {
            let status = client.status(&fourth_addr).await.ok()?;
            let group = status.groups.into_iter().find(|g| g.shard == name)?;
            (group.voters == [1, 2, 3, 4]).then_some(group.voters)
        },
    )
    .await;
    assert_eq!(voters, [1, 2, 3, 4]);

    // Removing one leaves three voters, which still commit.
    client.remove_node(&shard, 4).await.unwrap();
    let first_addr = nodes[0].addr().to_string();
    eventually("node 4 removed", Duration::from_secs(10), || async {
        let status = client.status(&first_addr).await.ok()?;
        let group = status.groups.into_iter().find(|g| g.shard == name)?;
        (group.voters == [1, 2, 3]).then_some(())
    })
    .await;
    client
        .append(&shard, vec![b"after".to_vec()])
        .await
        .unwrap();
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

/// A node added at an address nothing answers at takes no entry: the add
/// ends after ten of the longest election timeouts (6 s with the tests'
/// timings) with the learner named, and the learner counts in no quorum,
/// so writes go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_a_node_nothing_answers_for_ends_with_the_learner_stalled_and_writes_go_on() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 1).await;
    let client = client(&nodes);
    let shard = key(0);
    client.create_shard(&shard, vec![1]).await.unwrap();
    client.append(&shard, vec![b"a".to_vec()]).await.unwrap();
    let replica = nodes[0].shard(&shard).await.unwrap();
    // A port on loopback that takes connections and never answers (held
    // to the end, so no other test's node can take it meanwhile).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();

    let started = Instant::now();
    let err = replica.add_node(4, addr.clone()).await.unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(&err, ShardError::LearnerStalled { learner: 4, addr: a, matched: None, stalled, .. }
            if *a == addr && *stalled == Duration::from_millis(6_000)),
        "{err}"
    );
    assert!(
        took >= Duration::from_secs(6) && took < Duration::from_secs(30),
        "{took:?}"
    );
    let status = client.status(&nodes[0].addr().to_string()).await.unwrap();
    let group = status
        .groups
        .iter()
        .find(|g| g.shard == ShardName::from(&shard))
        .unwrap();
    assert_eq!(
        (group.voters.clone(), group.learners.clone()),
        (vec![1], vec![4])
    );
    client.append(&shard, vec![b"b".to_vec()]).await.unwrap();
    drop(silent);
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}
