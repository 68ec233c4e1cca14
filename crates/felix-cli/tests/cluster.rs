//! `felix-store produce`, `consume` and `cluster` against three nodes
//! started in the test's process on 127.0.0.1.

mod common;

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use common::{bin, run};
use felix_cluster::{Node, NodeConfig, RaftTimings};

/// Three nodes on free ports, each told of the others, on a runtime that
/// outlives the test's commands.
struct Cluster {
    runtime: tokio::runtime::Runtime,
    nodes: Vec<Node>,
    _root: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Self {
        let root = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let nodes = runtime.block_on(async {
            let mut nodes = Vec::new();
            for id in 1..=3 {
                let mut config =
                    NodeConfig::new(id, root.path().join(format!("n{id}")), "127.0.0.1:0");
                config.timings = RaftTimings {
                    heartbeat_ms: 50,
                    election_min_ms: 300,
                    election_max_ms: 600,
                };
                nodes.push(Node::start(config).await.unwrap());
            }
            for a in &nodes {
                for b in &nodes {
                    a.add_peer(b.id(), b.addr().to_string());
                }
            }
            nodes
        });
        Self {
            runtime,
            nodes,
            _root: root,
        }
    }

    /// Shuts every node down cleanly; returns their store directories.
    fn stop(mut self) -> (Vec<std::path::PathBuf>, tempfile::TempDir) {
        let nodes = std::mem::take(&mut self.nodes);
        self.runtime.block_on(async {
            for node in nodes {
                node.shutdown().await.unwrap();
            }
        });
        let root = tempfile::tempdir().unwrap();
        let root = std::mem::replace(&mut self._root, root);
        let dirs = (1..=3)
            .map(|id| root.path().join(format!("n{id}")))
            .collect();
        (dirs, root)
    }

    fn addrs(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.addr().to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let nodes = std::mem::take(&mut self.nodes);
        self.runtime.block_on(async {
            for node in nodes {
                let _ = node.shutdown().await;
            }
        });
    }
}

const KEY: [&str; 5] = ["--key", "acme", "default", "orders", "0"];

fn with_key<'a>(args: &[&'a str]) -> Vec<&'a str> {
    args.iter().copied().chain(KEY).collect()
}

#[test]
fn produce_then_consume_from_every_replica_returns_the_acknowledged_records() {
    let cluster = Cluster::start();
    let addrs = cluster.addrs();
    let created = run(with_key(&[
        "cluster",
        "create-shard",
        "--cluster",
        &addrs,
        "--replicas",
        "1,2,3",
    ]));
    assert_eq!(created.code, 0, "{}", created.stderr);
    assert_eq!(
        created.stdout,
        "created acme/default/orders/0 on nodes 1,2,3\n"
    );

    let mut produce = bin()
        .args(with_key(&[
            "produce",
            "--cluster",
            &addrs,
            "--stdin",
            "--report-acks",
        ]))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    produce
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello\nworld\n")
        .unwrap();
    let output = produce.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let acks: Vec<u64> = lines
        .iter()
        .filter(|l| l["event"] == "ack")
        .map(|l| {
            assert_eq!(l["first_offset"], l["last_offset"]);
            l["first_offset"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(acks.len(), 2, "{lines:?}");
    assert_eq!(lines.last().unwrap()["event"], "finished");
    assert_eq!(lines.last().unwrap()["records"], 2);

    for node in ["1", "2", "3"] {
        let consumed = run(with_key(&[
            "consume",
            "--cluster",
            &addrs,
            "--node",
            node,
            "--json",
        ]));
        assert_eq!(consumed.code, 0, "{}", consumed.stderr);
        let records = consumed.json_lines();
        let got: Vec<(u64, &str)> = records
            .iter()
            .map(|r| {
                (
                    r["offset"].as_u64().unwrap(),
                    r["payload"].as_str().unwrap(),
                )
            })
            .collect();
        // base64 of "hello" and "world".
        assert_eq!(
            got,
            [(acks[0], "aGVsbG8="), (acks[1], "d29ybGQ=")],
            "node {node}"
        );
    }

    let text = run(with_key(&[
        "consume",
        "--cluster",
        &addrs,
        "--from",
        &acks[1].to_string(),
    ]));
    assert_eq!(text.code, 0, "{}", text.stderr);
    let fields: Vec<&str> = text.stdout.trim_end().split('\t').collect();
    assert_eq!(fields[0], acks[1].to_string());
    assert_eq!(fields[2], "world");
}

#[test]
fn status_names_one_leader_and_every_replica() {
    let cluster = Cluster::start();
    let addrs = cluster.addrs();
    assert_eq!(
        run(with_key(&[
            "cluster",
            "create-shard",
            "--cluster",
            &addrs,
            "--replicas",
            "1,2,3"
        ]))
        .code,
        0
    );
    assert_eq!(
        run(with_key(&[
            "produce",
            "--cluster",
            &addrs,
            "--records",
            "10",
            "--batch",
            "5"
        ]))
        .code,
        0
    );
    let status = run(["cluster", "status", "--cluster", &addrs, "--json"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    let groups = status.json_lines();
    assert_eq!(groups.len(), 3);
    let leaders: Vec<_> = groups.iter().filter(|g| g["role"] == "leader").collect();
    assert_eq!(leaders.len(), 1, "{groups:?}");
    for g in &groups {
        assert_eq!(g["shard"], "acme/default/orders/0");
        assert_eq!(g["voters"], serde_json::json!([1, 2, 3]));
        assert_eq!(g["leader"], leaders[0]["node"]);
    }
}

#[test]
fn consume_follow_prints_records_produced_after_it_started() {
    let cluster = Cluster::start();
    let addrs = cluster.addrs();
    assert_eq!(
        run(with_key(&[
            "cluster",
            "create-shard",
            "--cluster",
            &addrs,
            "--replicas",
            "1,2,3"
        ]))
        .code,
        0
    );
    let follower = bin()
        .args(with_key(&[
            "consume",
            "--cluster",
            &addrs,
            "--follow",
            "--max-records",
            "3",
        ]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        run(with_key(&[
            "produce",
            "--cluster",
            &addrs,
            "--records",
            "3",
            "--payload-bytes",
            "8"
        ]))
        .code,
        0
    );
    let output = follower.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8(output.stdout).unwrap().lines().count(), 3);
}

#[test]
fn produce_to_nodes_that_do_not_answer_fails_within_its_timeout_naming_them() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let started = std::time::Instant::now();
    let produce = run(with_key(&[
        "produce",
        "--cluster",
        &closed,
        "--records",
        "1",
        "--timeout-ms",
        "300",
    ]));
    assert_eq!(produce.code, 2);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        produce.stderr.starts_with(&format!(
            "felix-store: cluster: no answer within 300ms from {closed}; last: "
        )),
        "{}",
        produce.stderr
    );
}

#[test]
fn after_a_clean_shutdown_every_replica_s_store_verifies_clean() {
    let cluster = Cluster::start();
    let addrs = cluster.addrs();
    assert_eq!(
        run(with_key(&[
            "cluster",
            "create-shard",
            "--cluster",
            &addrs,
            "--replicas",
            "1,2,3"
        ]))
        .code,
        0
    );
    let produced = run(with_key(&[
        "produce",
        "--cluster",
        &addrs,
        "--records",
        "200",
        "--batch",
        "10",
        "--in-flight",
        "4",
    ]));
    assert_eq!(produced.code, 0, "{}", produced.stderr);
    let (dirs, _root) = cluster.stop();
    for dir in dirs {
        let verify = run(["verify".as_ref(), dir.as_os_str()]);
        assert_eq!(
            verify.code,
            0,
            "{}: {}{}",
            dir.display(),
            verify.stdout,
            verify.stderr
        );
        assert!(
            verify.stdout.contains("acme/default/orders/0"),
            "{}",
            verify.stdout
        );
    }
}
