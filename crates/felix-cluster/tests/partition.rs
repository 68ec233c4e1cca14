//! A network partition, through a proxy in front of each node: a leader
//! cut off from the majority commits nothing more; the majority elects a
//! new leader and goes on; after healing, the old leader's uncommitted
//! tail is truncated and every replica holds the same records.

mod common;

use std::time::Duration;

use common::proxy::{Partitions, proxy};
use common::{all_records, cluster, eventually, key};
use felix_cluster::{Client, ClientError, ClientOptions};

fn client_of(addrs: &[String], deadline_ms: u64) -> Client {
    Client::with_options(
        addrs.iter().cloned(),
        ClientOptions {
            deadline: Duration::from_millis(deadline_ms),
            call_timeout: Duration::from_millis(deadline_ms.min(5000)),
            ..ClientOptions::default()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_commits_nothing_and_its_tail_is_truncated_after_healing() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 3).await;
    let partitions = Partitions::new();
    // Peers reach each other through the proxies only.
    for target in &nodes {
        let via = proxy(target.id(), target.addr().to_string(), partitions.clone()).await;
        for node in &nodes {
            node.add_peer(target.id(), via.clone());
        }
    }
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr().to_string()).collect();
    let client = client_of(&addrs, 20_000);
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
    let name = felix_cluster::wire::ShardName::from(&shard);
    let leader = eventually("a leader", Duration::from_secs(10), || async {
        let status = client.status(&addrs[0]).await.ok()?;
        status.groups.iter().find(|g| g.shard == name)?.leader
    })
    .await;
    let leader_addr = addrs[(leader - 1) as usize].clone();
    let others: Vec<u64> = (1..=3).filter(|n| *n != leader).collect();
    let committed_before = client
        .read_at(&leader_addr, &shard, 0, 1, Duration::ZERO)
        .await
        .unwrap()
        .offsets
        .committed;

    partitions.isolate(leader, &others);

    // The old leader takes the append but cannot commit it.
    let cut_off = client_of(std::slice::from_ref(&leader_addr), 1500);
    let lost = cut_off
        .append(&shard, vec![b"lost".to_vec()])
        .await
        .unwrap_err();
    assert!(
        matches!(
            lost,
            ClientError::OutcomeUnknown { .. } | ClientError::Timeout { .. }
        ),
        "{lost}"
    );
    let on_leader = client
        .read_at(&leader_addr, &shard, 0, 1, Duration::ZERO)
        .await
        .unwrap()
        .offsets;
    assert_eq!(on_leader.committed, committed_before);
    assert!(
        on_leader.written > committed_before,
        "the entry is written but not committed: {on_leader:?}"
    );

    // The majority elects a leader of its own and goes on.
    let majority: Vec<String> = others
        .iter()
        .map(|n| addrs[(*n - 1) as usize].clone())
        .collect();
    let majority_client = client_of(&majority, 20_000);
    for i in 0..10u32 {
        let payload = format!("during-{i}").into_bytes();
        acked.push((
            majority_client
                .append(&shard, vec![payload.clone()])
                .await
                .unwrap()[0],
            payload,
        ));
    }
    let still = client
        .read_at(&leader_addr, &shard, 0, 1, Duration::ZERO)
        .await
        .unwrap()
        .offsets;
    assert_eq!(
        still.committed, committed_before,
        "the cut-off leader committed nothing more"
    );

    partitions.heal();
    for i in 0..5u32 {
        let payload = format!("after-{i}").into_bytes();
        acked.push((
            client.append(&shard, vec![payload.clone()]).await.unwrap()[0],
            payload,
        ));
    }
    let mut logs = Vec::new();
    for addr in &addrs {
        logs.push(all_records(&client, addr, &shard, acked.len()).await);
    }
    for log in &logs {
        assert_eq!(*log, acked);
        assert!(!log.iter().any(|(_, p)| p == b"lost"));
    }
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}
