//! A consumer's reader: reads in order, one ahead, from one replica.

mod common;

use std::time::Duration;

use common::{append_acked, client, cluster, key, leader_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_hands_out_every_record_once_in_order_from_a_follower() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    let shard = key(0);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let acked = append_acked(&client, &shard, 10, 30).await;
    let last = acked.last().unwrap().0;
    let leader = leader_of(&client, &nodes, &shard).await;
    let follower = nodes.iter().find(|n| n.id() != leader).unwrap();
    let addr = follower.addr().to_string();
    // Reads of about 200 bytes: many batches, each asked for while the
    // one before is handed out. A read waits up to 200 ms for a record
    // the follower does not know committed yet.
    let mut reader = client.reader_at(&addr, &shard, 0, 200, Duration::from_millis(200));
    let mut read = Vec::new();
    let mut batches = 0;
    let started = std::time::Instant::now();
    while reader.position() <= last {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "read {} of {} records in 20 s",
            read.len(),
            acked.len()
        );
        let batch = reader.next_batch().await.unwrap();
        assert_eq!(reader.position(), batch.next);
        read.extend(batch.records().map(|r| (r.offset, r.payload.to_vec())));
        batches += 1;
    }
    assert_eq!(read, acked);
    assert!(batches > 10, "{batches} reads");
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_at_the_tail_waits_for_the_next_record() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 1).await;
    let client = client(&nodes);
    let shard = key(1);
    client.create_shard(&shard, vec![1]).await.unwrap();
    let first = client.append(&shard, vec![b"a".to_vec()]).await.unwrap()[0];
    let addr = nodes[0].addr().to_string();
    let mut reader = client.reader_at(&addr, &shard, first + 1, 1 << 20, Duration::from_secs(5));
    let producer = {
        let client = common::client(&nodes);
        let shard = shard.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            client.append(&shard, vec![b"b".to_vec()]).await.unwrap()[0]
        })
    };
    // One read waits for it: the record comes 100 ms into a 5 s wait.
    let batch = tokio::time::timeout(Duration::from_secs(20), reader.next_batch())
        .await
        .unwrap()
        .unwrap();
    let second = producer.await.unwrap();
    let records: Vec<(u64, &[u8])> = batch.records().map(|r| (r.offset, r.payload)).collect();
    assert_eq!(records, [(second, &b"b"[..])]);
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}
