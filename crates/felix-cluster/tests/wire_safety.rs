//! What a node does with a connection that breaks the protocol: requests
//! before the greeting and Raft messages from a client are refused with a
//! reason; a frame that is no message, or too long, closes the connection
//! and the node goes on serving others. A Pre-Vote is its own message and
//! moves nothing.

mod common;

use std::time::Duration;

use common::ask;
use felix_cluster::wire::{
    ClientCodec, GroupStatus, PROTOCOL_VERSION, RaftRequest, RaftResponse, RemoteError, Request,
    Response, ShardName, SnapshotDefect,
};
use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

/// The group of `shard` in a status answer.
fn group_in(status: &Response, shard: &ShardName) -> Option<GroupStatus> {
    match status {
        Response::Status(s) => s.groups.iter().find(|g| g.shard == *shard).cloned(),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_before_the_greeting_and_raft_messages_from_clients_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let nodes = common::cluster(root.path(), 1).await;
    let addr = nodes[0].addr();
    let mut conn = Framed::new(
        TcpStream::connect(addr).await.unwrap(),
        ClientCodec::client(),
    );

    let early = ask(&mut conn, 1, Request::Status).await;
    assert!(
        matches!(early, Response::Error(RemoteError::Invalid { node: 1, ref reason }) if reason.contains("greeting")),
        "{early:?}"
    );
    let hello = ask(
        &mut conn,
        2,
        Request::Hello {
            protocol: PROTOCOL_VERSION,
            node: None,
        },
    )
    .await;
    assert!(matches!(hello, Response::Hello { node: 1 }), "{hello:?}");
    let vote = openraft::raft::VoteRequest::new(felix_raft::Vote::new(1, 9), None);
    let raft = ask(
        &mut conn,
        3,
        Request::Raft {
            shard: ShardName::from(&common::key(0)),
            rpc: RaftRequest::Vote(vote),
        },
    )
    .await;
    assert!(
        matches!(raft, Response::Error(RemoteError::Invalid { ref reason, .. }) if reason.contains("client")),
        "{raft:?}"
    );
    let again = ask(
        &mut conn,
        5,
        Request::Hello {
            protocol: PROTOCOL_VERSION,
            node: Some(2),
        },
    )
    .await;
    assert!(
        matches!(again, Response::Error(RemoteError::Invalid { ref reason, .. }) if reason.contains("greets once")),
        "{again:?}"
    );
    let open = ask(
        &mut conn,
        6,
        Request::OpenGroup {
            shard: ShardName::from(&common::key(1)),
            members: [(1, "127.0.0.1:1".to_owned())].into(),
            initialize: true,
        },
    )
    .await;
    assert!(
        matches!(open, Response::Error(RemoteError::Invalid { ref reason, .. }) if reason.contains("client")),
        "{open:?}"
    );
    let status = ask(&mut conn, 4, Request::Status).await;
    assert!(
        matches!(status, Response::Status(ref s) if s.groups.is_empty()),
        "{status:?}"
    );
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_or_oversized_frame_closes_only_its_connection() {
    let root = tempfile::tempdir().unwrap();
    let nodes = common::cluster(root.path(), 1).await;
    let addr = nodes[0].addr();
    for bytes in [
        // A frame of 3 bytes that are no message.
        vec![0, 0, 0, 3, 0xff, 0xff, 0xff],
        // A length past the limit, and nothing after it.
        u32::MAX.to_be_bytes().to_vec(),
    ] {
        let mut raw = TcpStream::connect(addr).await.unwrap();
        raw.write_all(&bytes).await.unwrap();
        let mut conn = Framed::new(raw, ClientCodec::client());
        let end = tokio::time::timeout(Duration::from_secs(5), conn.next())
            .await
            .unwrap();
        assert!(end.is_none(), "the node closed the connection: {end:?}");
    }
    // Others are still served.
    let client = common::client(&nodes);
    assert_eq!(client.status(&addr.to_string()).await.unwrap().node, 1);
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_never_has_more_bytes_in_the_node_s_hands_than_its_budget() {
    const BUDGET: usize = 256 << 10;
    let root = tempfile::tempdir().unwrap();
    let mut config = felix_cluster::NodeConfig::new(1, root.path().join("n1"), "127.0.0.1:0");
    config.timings = common::timings();
    config.max_in_flight_bytes = BUDGET;
    let node = felix_cluster::Node::start(config).await.unwrap();
    let client = common::client(std::slice::from_ref(&node));
    let shard = common::key(0);
    client.create_shard(&shard, vec![1]).await.unwrap();
    // Sixteen appends of 64 KiB at once on the client's one connection:
    // four times the budget. The node reads on as answers free room, and
    // every append is acknowledged.
    let appends = (0..16u8).map(|i| client.append(&shard, vec![vec![i; 64 << 10]]));
    let acked = futures::future::join_all(appends).await;
    let mut offsets: Vec<u64> = acked.into_iter().map(|a| a.unwrap()[0]).collect();
    offsets.sort_unstable();
    offsets.dedup();
    assert_eq!(offsets.len(), 16);
    let status = client.status(&node.addr().to_string()).await.unwrap();
    assert!(
        status.inbound_bytes_peak > 64 << 10 && status.inbound_bytes_peak <= BUDGET as u64,
        "peak {} of a {BUDGET}-byte budget",
        status.inbound_bytes_peak
    );
    node.shutdown().await.unwrap();
}

/// A Pre-Vote travels as its own message (openraft's default would grant
/// it without asking) and moves nothing on the node asked: not its term,
/// not its leader, even from a candidate whose log is ahead and whose term
/// is higher.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_vote_is_answered_without_moving_the_askeds_term() {
    let root = tempfile::tempdir().unwrap();
    let nodes = common::cluster(root.path(), 3).await;
    let client = common::client(&nodes);
    let shard = common::key(0);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    client.append(&shard, vec![b"x".to_vec()]).await.unwrap();
    let leader = common::leader_of(&client, &nodes, &shard).await;
    let follower = nodes.iter().find(|n| n.id() != leader).unwrap();
    let addr = follower.addr().to_string();
    let name = ShardName::from(&shard);
    let group = |status: &Response| group_in(status, &name);
    let mut conn = common::greet_as(&addr, 9).await;
    let before = group(&ask(&mut conn, 2, Request::Status).await).unwrap();

    let ahead = Some(felix_raft::LogId::new_term_index(before.term, 1_000_000));
    let vote = felix_raft::Vote::new(before.term + 5, 9);
    let pre_vote = openraft::raft::VoteRequest::new(vote, ahead);
    let answer = ask(
        &mut conn,
        3,
        Request::Raft {
            shard: name.clone(),
            rpc: RaftRequest::PreVote(pre_vote),
        },
    )
    .await;
    assert!(
        matches!(answer, Response::Raft(RaftResponse::PreVote(Ok(_)))),
        "{answer:?}"
    );
    let after = group(&ask(&mut conn, 4, Request::Status).await).unwrap();
    assert_eq!((after.term, after.leader), (before.term, before.leader));

    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

/// A snapshot no leader could send — its last entry from a term after the
/// sender's vote, or contradicting an entry committed here — is refused
/// with the reason, and the group goes on (openraft would stop it on an
/// assertion).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impossible_snapshot_is_refused_and_the_group_goes_on() {
    let root = tempfile::tempdir().unwrap();
    let nodes = common::cluster(root.path(), 3).await;
    let client = common::client(&nodes);
    let shard = common::key(0);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    common::append_acked(&client, &shard, 2, 3).await;
    let leader = common::leader_of(&client, &nodes, &shard).await;
    let follower = nodes.iter().find(|n| n.id() != leader).unwrap();
    let name = ShardName::from(&shard);
    let group = |status: &Response| group_in(status, &name);
    let mut conn = common::greet_as(&follower.addr().to_string(), 9).await;
    let before = group(&ask(&mut conn, 1, Request::Status).await).unwrap();
    // Applied here, so committed here too.
    let committed = before.last_applied.unwrap();
    let members = openraft::Membership::new(
        vec![[1u64, 2, 3].into()],
        std::collections::BTreeMap::from([
            (1u64, openraft::BasicNode::new("a:1")),
            (2, openraft::BasicNode::new("b:2")),
            (3, openraft::BasicNode::new("c:3")),
        ]),
    )
    .unwrap();
    let snapshot = |vote: felix_raft::Vote, term: u64, index: u64| Request::Raft {
        shard: name.clone(),
        rpc: RaftRequest::Snapshot {
            vote,
            meta: openraft::storage::SnapshotMeta {
                last_log_id: Some(felix_raft::LogId::new_term_index(term, index)),
                last_membership: openraft::StoredMembership::new(None, members.clone()),
            },
        },
    };
    let leader_vote = |term| felix_raft::Vote::new_committed(term, 9);
    let refused = |answer: &Response| match answer {
        Response::Error(RemoteError::ImpossibleSnapshot {
            node,
            shard: s,
            defect,
        }) if *node == follower.id() && *s == shard.to_string() => Some(defect.clone()),
        _ => None,
    };

    let later = snapshot(leader_vote(before.term), before.term + 5, committed + 10);
    let later_term = ask(&mut conn, 2, later).await;
    assert_eq!(
        refused(&later_term),
        Some(SnapshotDefect::LaterTerm {
            index: committed + 10,
            term: before.term + 5,
            vote_term: before.term
        }),
        "{later_term:?}"
    );
    let contradicting = snapshot(leader_vote(before.term + 1), before.term + 1, committed);
    let contradicts = ask(&mut conn, 3, contradicting).await;
    assert!(
        matches!(refused(&contradicts), Some(SnapshotDefect::ContradictsCommitted { index, term, committed_index, .. })
            if index == committed && term == before.term + 1 && committed_index >= committed),
        "{contradicts:?}"
    );
    let candidate = felix_raft::Vote::new(before.term + 1, 9);
    let not_a_leader = ask(
        &mut conn,
        5,
        snapshot(candidate, before.term, committed + 10),
    )
    .await;
    assert_eq!(
        refused(&not_a_leader),
        Some(SnapshotDefect::VoteNotCommitted {
            vote_term: before.term + 1,
            vote_node: 9
        }),
        "{not_a_leader:?}"
    );
    let after = group(&ask(&mut conn, 4, Request::Status).await).unwrap();
    assert_eq!(
        (after.role.as_str(), after.term, after.leader),
        ("follower", before.term, before.leader)
    );
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

/// A greeting in another protocol version is refused with both versions
/// and greets nothing: the next request is still refused as before any
/// greeting, and a greeting in this version is then taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_greeting_in_another_protocol_version_is_refused_and_greets_nothing() {
    let root = tempfile::tempdir().unwrap();
    let nodes = common::cluster(root.path(), 1).await;
    let mut conn = Framed::new(
        TcpStream::connect(nodes[0].addr()).await.unwrap(),
        ClientCodec::client(),
    );
    let old = Request::Hello {
        protocol: PROTOCOL_VERSION - 1,
        node: Some(2),
    };
    let refused = ask(&mut conn, 1, old).await;
    assert!(
        matches!(refused, Response::Error(RemoteError::Protocol { node: 1, expected, found })
            if expected == PROTOCOL_VERSION && found == PROTOCOL_VERSION - 1),
        "{refused:?}"
    );
    let status = ask(&mut conn, 2, Request::Status).await;
    assert!(
        matches!(&status, Response::Error(RemoteError::Invalid { reason, .. }) if reason.contains("greeting")),
        "{status:?}"
    );
    let hello = Request::Hello {
        protocol: PROTOCOL_VERSION,
        node: None,
    };
    assert!(matches!(
        ask(&mut conn, 3, hello).await,
        Response::Hello { node: 1 }
    ));
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}
