//! Every node records its groups' figures through the `metrics` facade.

mod common;

use common::{client, cluster, key};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_index_leadership_lag_and_elections_are_recorded_per_node_and_shard() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    let root = tempfile::tempdir().unwrap();
    let nodes = cluster(root.path(), 3).await;
    let client = client(&nodes);
    let shard = key(0);
    client.create_shard(&shard, vec![1, 2, 3]).await.unwrap();
    let mut last = 0;
    for i in 0..10u8 {
        last = client.append(&shard, vec![vec![i]]).await.unwrap()[0];
    }
    // Followers learn the commit with the next message, and figures are
    // recorded each second: wait until every node's shows it.
    let wanted = format!("{last}");
    // The debugging recorder hands out each value once (a snapshot resets
    // it): counters are summed over every snapshot taken.
    let elections = std::cell::RefCell::new(std::collections::BTreeMap::<String, u64>::new());
    let figures = common::eventually(
        "every node's commit index recorded",
        std::time::Duration::from_secs(10),
        || {
            let figures = snapshotter.snapshot().into_vec();
            for (key, _, _, value) in &figures {
                if key.key().name() != "felix_cluster_elections_total" {
                    continue;
                }
                if let DebugValue::Counter(n) = value {
                    let node = key
                        .key()
                        .labels()
                        .find(|l| l.key() == "node")
                        .map(|l| l.value().to_owned())
                        .unwrap_or_default();
                    *elections.borrow_mut().entry(node).or_default() += *n;
                }
            }
            let recorded = figures
            .iter()
            .filter(|(key, _, _, value)| {
                key.key().name() == "felix_cluster_commit_index"
                    && matches!(value, DebugValue::Gauge(g) if g.into_inner().to_string() == wanted)
            })
            .count();
            std::future::ready((recorded == 3).then_some(figures))
        },
    )
    .await;
    let value = |name: &str, node: &str| {
        figures.iter().find_map(|(key, _, _, value)| {
            let labels: Vec<(String, String)> = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            let wanted = key.key().name() == name
                && labels.contains(&("node".into(), node.into()))
                && labels.contains(&("shard".into(), shard.to_string()));
            wanted.then_some(value)
        })
    };
    let leaders: Vec<&str> = ["1", "2", "3"]
        .into_iter()
        .filter(|n| gauge(value("felix_cluster_is_leader", n)) == Some(1.0))
        .collect();
    assert_eq!(leaders.len(), 1, "{figures:?}");
    for node in ["1", "2", "3"] {
        assert_eq!(
            gauge(value("felix_cluster_commit_index", node)),
            Some(last as f64),
            "node {node}"
        );
    }
    assert!(
        elections.borrow().get(leaders[0]).is_some_and(|n| *n >= 1),
        "the leader stood in an election: {elections:?}"
    );
    let lags: Vec<_> = figures
        .iter()
        .filter(|(key, ..)| key.key().name() == "felix_cluster_follower_lag")
        .collect();
    assert_eq!(lags.len(), 2, "one lag per follower: {lags:?}");
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

fn gauge(value: Option<&DebugValue>) -> Option<f64> {
    match value {
        Some(DebugValue::Gauge(g)) => Some(g.into_inner()),
        _ => None,
    }
}
