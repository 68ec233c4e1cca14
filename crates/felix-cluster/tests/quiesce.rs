//! Quiet groups: an idle group turns its timers and heartbeats off on
//! every replica, wakes for a write without an election, and elects a new
//! leader when its leader's node is gone.

mod common;

use std::time::Duration;

use common::{all_records, append_acked, ask, client, cluster, eventually, key, leader_of};
use felix_cluster::wire::{GroupStatus, QuiesceRefusal, RemoteError, Request, Response, ShardName};
use felix_cluster::{Client, Node, ShardError};
use felix_storage::ShardKey;

/// The group of `shard` as each of `nodes` reports it, when all answer.
async fn statuses(client: &Client, nodes: &[Node], shard: &ShardKey) -> Option<Vec<GroupStatus>> {
    let name = ShardName::from(shard);
    let mut out = Vec::new();
    for node in nodes {
        let status = client.status(&node.addr().to_string()).await.ok()?;
        out.push(status.groups.into_iter().find(|g| g.shard == name)?);
    }
    Some(out)
}

/// Waits until `shard` is quiet on every one of `nodes`; returns its term.
async fn quiet_everywhere(client: &Client, nodes: &[Node], shard: &ShardKey) -> u64 {
    eventually(
        "the group quiet on every node",
        Duration::from_secs(20),
        || async {
            let groups = statuses(client, nodes, shard).await?;
            let term = groups[0].term;
            groups
                .iter()
                .all(|g| g.quiet && g.term == term && g.leader.is_some())
                .then_some(term)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_group_goes_quiet_and_a_write_wakes_it_without_an_election() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    let shard = key(0);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let mut acked = append_acked(&client, &shard, 2, 5).await;
    let term = quiet_everywhere(&client, &nodes, &shard).await;

    // Quiet for longer than the longest election timeout (600 ms): no
    // replica stood for election.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let groups = statuses(&client, &nodes, &shard).await.unwrap();
    assert!(
        groups.iter().all(|g| g.quiet && g.term == term),
        "{groups:?}"
    );

    // A write sent to a follower is refused there, naming the leader,
    // and wakes nothing: no follower stands for election.
    let leader = leader_of(&client, &nodes, &shard).await;
    let follower = nodes.iter().find(|n| n.id() != leader).unwrap();
    let refused = follower
        .shard(&shard)
        .await
        .unwrap()
        .append(vec![b"to a follower".to_vec()])
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ShardError::NotLeader { leader: Some((id, _)), .. } if id == leader),
        "{refused}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let groups = statuses(&client, &nodes, &shard).await.unwrap();
    assert!(
        groups.iter().all(|g| g.quiet && g.term == term),
        "{groups:?}"
    );

    // A write on the leader's own handle wakes it and is taken at once:
    // the lease that ran out while the group was quiet is renewed first
    // (openraft refuses a write from a leader without one). Then writes
    // through the client; all are acknowledged in the same term and reach
    // every replica.
    let leader_node = nodes.iter().find(|n| n.id() == leader).unwrap();
    let first = b"the first write after the quiet".to_vec();
    let offsets = leader_node
        .shard(&shard)
        .await
        .unwrap()
        .append(vec![first.clone()])
        .await
        .unwrap();
    acked.push((offsets[0], first));
    acked.extend(append_acked(&client, &shard, 1, 3).await);
    let groups = statuses(&client, &nodes, &shard).await.unwrap();
    assert!(groups.iter().all(|g| g.term == term), "{groups:?}");
    for node in &nodes {
        let read = all_records(&client, &node.addr().to_string(), &shard, acked.len()).await;
        assert_eq!(read, acked, "node {}", node.id());
    }
    // And once idle again, it goes quiet again, still in the same term.
    assert_eq!(quiet_everywhere(&client, &nodes, &shard).await, term);
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_group_whose_leader_is_gone_elects_another_and_loses_nothing() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    let shard = key(1);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let mut acked = append_acked(&client, &shard, 3, 4).await;
    let term = quiet_everywhere(&client, &nodes, &shard).await;
    let leader = leader_of(&client, &nodes, &shard).await;

    let at = nodes.iter().position(|n| n.id() == leader).unwrap();
    nodes.remove(at).shutdown().await.unwrap();
    // The others notice the node gone (no answer to their pings for the
    // longest election timeout), wake the group and elect a new leader.
    let survivors = common::client(&nodes);
    let new_leader = eventually("a new leader", Duration::from_secs(20), || async {
        let groups = statuses(&survivors, &nodes, &shard).await?;
        groups
            .iter()
            .find(|g| g.role == "leader" && g.term > term)
            .map(|g| g.leader)
    })
    .await;
    assert_ne!(new_leader, Some(leader));
    acked.extend(append_acked(&survivors, &shard, 1, 2).await);
    for node in &nodes {
        let read = all_records(&survivors, &node.addr().to_string(), &shard, acked.len()).await;
        assert_eq!(read, acked, "node {}", node.id());
    }
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

/// A follower lets its group sleep only once it has applied the leader's
/// last entry: holding it is not enough, since it learns the entry
/// committed only from the leader's next message, and asleep before that
/// it would serve reads without the last acknowledged records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_refuses_to_sleep_before_it_has_applied_the_leaders_last_entry() {
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    let shard = key(0);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    append_acked(&client, &shard, 3, 4).await;
    let leader = leader_of(&client, &nodes, &shard).await;
    let follower = nodes.iter().find(|n| n.id() != leader).unwrap();
    let addr = follower.addr().to_string();
    let name = ShardName::from(&shard);
    // The follower has applied what the leader has.
    let (term, applied) = eventually(
        "the follower applied the leader's last entry",
        Duration::from_secs(10),
        || async {
            let groups = statuses(&client, &nodes, &shard).await?;
            let lead = groups.iter().find(|g| g.role == "leader")?;
            let here = &groups[nodes.iter().position(|n| n.id() == follower.id())?];
            (here.last_applied == lead.last_applied).then_some((lead.term, lead.last_applied?))
        },
    )
    .await;
    let mut conn = common::greet_as(&addr, leader).await;
    let quiesce = |term: u64, applied: u64| Request::Quiesce {
        shard: name.clone(),
        term,
        leader,
        applied: Some(applied),
    };

    // Far ahead of anything applied here: refused, saying how far it got.
    let wanted = applied + 1_000;
    let ahead = ask(&mut conn, 1, quiesce(term, wanted)).await;
    let Response::Error(
        error @ RemoteError::StaysAwake {
            refusal:
                QuiesceRefusal::Behind {
                    applied: Some(here),
                    ..
                },
            ..
        },
    ) = &ahead
    else {
        panic!("{ahead:?}");
    };
    assert!(*here >= applied && *here < wanted, "{ahead:?}");
    assert_eq!(
        error.to_string(),
        format!(
            "node {} keeps shard {shard} awake: entries applied up to {here} here, the leader's last is {wanted}",
            follower.id()
        )
    );
    // Asked in a term the sender does not lead here: refused.
    let other_term = ask(&mut conn, 2, quiesce(term + 1, applied)).await;
    assert!(
        matches!(&other_term, Response::Error(RemoteError::StaysAwake {
            refusal: QuiesceRefusal::NotLeader { asked_by, term: asked_in, .. }, ..
        }) if *asked_by == leader && *asked_in == term + 1),
        "{other_term:?}"
    );

    // Applied up to the leader's last entry: it agrees, and sleeps.
    let agreed = ask(&mut conn, 3, quiesce(term, applied)).await;
    assert!(matches!(agreed, Response::Done), "{agreed:?}");
    let index = nodes.iter().position(|n| n.id() == follower.id()).unwrap();
    let here = statuses(&client, &nodes, &shard).await.unwrap();
    assert!(here[index].quiet, "{here:?}");
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}
