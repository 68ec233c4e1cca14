//! Three Raft nodes in one process, each on its own felix log: writes
//! through the leader, the leader stopped, a new one elected, the old one
//! restarted from its directory (cleanly, or with its newest segment torn
//! as a power loss leaves it) and caught up; then every committed entry is
//! on all three, in order, byte-identical. Every wait is bounded
//! ([`STEP`]), so a hang fails naming the step that hung.

mod common;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::net::{Node as RaftNode, Router};
use common::sm::StateMachine;
use felix_raft::{FelixLogStore, Request, TypeConfig};
use felix_storage::ReadBound;
use openraft::async_runtime::WatchReceiver;
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};

/// Entries written before the leader stops, and after.
const BEFORE: u64 = 10_000;
const AFTER: u64 = 1_000;
/// Client writes in flight at once.
const WRITERS: u64 = 64;
/// How long one step (a node's start or stop, an election, a phase of
/// writes, catching up) may take before the test fails naming it: far
/// above what each takes in a debug build on a loaded machine.
const STEP: Duration = Duration::from_secs(120);

/// Awaits `future`, failing the test with `what` if it does not finish
/// within [`STEP`]: every wait of this test is bounded.
async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(STEP, future)
        .await
        .unwrap_or_else(|_| panic!("{what} took longer than {STEP:?}"))
}

struct Node {
    raft: RaftNode,
    log: FelixLogStore<TypeConfig>,
    sm: StateMachine,
}

fn config(snapshots: bool) -> Arc<Config> {
    let (snapshot_policy, max_in_snapshot_log_to_keep) = if snapshots {
        // A snapshot every 1,000 entries; the log purged up to 100 below it.
        (SnapshotPolicy::LogsSinceLast(1_000), 100)
    } else {
        (SnapshotPolicy::Never, 1_000)
    };
    Arc::new(
        Config {
            heartbeat_interval: 50,
            election_timeout_min: 300,
            election_timeout_max: 600,
            snapshot_policy,
            max_in_snapshot_log_to_keep,
            ..Config::default()
        }
        .validate()
        .unwrap(),
    )
}

async fn start(router: &Router, root: &Path, id: u64, snapshots: bool) -> Node {
    let log = FelixLogStore::options(log_dir(root, id)).open().unwrap();
    start_on(router, root, id, log, snapshots).await
}

async fn start_on(
    router: &Router,
    root: &Path,
    id: u64,
    log: FelixLogStore<TypeConfig>,
    snapshots: bool,
) -> Node {
    // With purging on, the state machine must come back from its snapshot:
    // the entries below the last purge are gone from the log.
    let sm = if snapshots {
        StateMachine::persistent(root.join(format!("node-{id}")).join("snapshot"))
    } else {
        StateMachine::default()
    };
    let raft = within(
        "starting a node",
        Raft::new(
            id,
            config(snapshots),
            router.clone(),
            log.clone(),
            sm.clone(),
        ),
    )
    .await
    .unwrap();
    router.add(id, raft.clone());
    Node { raft, log, sm }
}

fn log_dir(root: &Path, id: u64) -> PathBuf {
    root.join(format!("node-{id}")).join("log")
}

async fn stop(router: &Router, node: Node) {
    router.remove(node.raft.metrics().borrow_watched().id);
    within("stopping a node", node.raft.shutdown())
        .await
        .unwrap();
    node.log.close().unwrap();
}

async fn leader(nodes: &[Option<Node>]) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for node in nodes.iter().flatten() {
            let m = node.raft.metrics().borrow_watched().clone();
            // A leader takes writes once a quorum acknowledged it (its
            // lease, openraft 0.10): an entry of its own term applied says so.
            let acknowledged = m
                .last_applied
                .is_some_and(|l| l.leader_id.term == m.current_term);
            if m.current_leader == Some(m.id) && acknowledged {
                return m.id;
            }
        }
        assert!(Instant::now() < deadline, "no leader elected");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes `count` entries, numbered from `first`, through `raft`,
/// `WRITERS` at a time.
async fn write(raft: &RaftNode, first: u64, count: u64) {
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let raft = raft.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = first + w;
            while n < first + count {
                raft.client_write(Request::new(format!("entry {n:08}").into_bytes()))
                    .await
                    .unwrap();
                n += WRITERS;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// Every record of `log`: offset, timestamp, generation and payload,
/// offsets contiguous from the log start to its end. Each read returns at least one record, so this makes at
/// most one read a record.
fn records(log: &FelixLogStore<TypeConfig>) -> Vec<(u64, u64, Option<u64>, Vec<u8>)> {
    let shard = log.shard();
    let end = shard.offsets().written;
    let mut out = Vec::new();
    let mut from = shard.offsets().base;
    while from < end {
        let batch = shard.read(from, 1 << 20, ReadBound::Written).unwrap();
        assert!(
            !batch.is_empty(),
            "a read at {from} returned nothing, below the end {end}"
        );
        for r in batch {
            assert_eq!(r.offset, from, "offsets not contiguous");
            from = r.offset + 1;
            out.push((
                r.offset,
                r.timestamp_micros,
                shard.generation_at(r.offset),
                r.payload.to_vec(),
            ));
        }
    }
    out
}

/// Cuts the newest segment of `dir` in the middle of its last record and
/// removes the clean-shutdown file, as a power loss leaves a directory
/// whose last write was not synced.
fn tear_newest_segment(dir: &Path) {
    let _ = std::fs::remove_file(dir.join("clean-shutdown"));
    let newest = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .unwrap();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&newest)
        .unwrap();
    let len = file.metadata().unwrap().len();
    file.set_len(len - 7).unwrap();
}

async fn run(root: &Path, tear: bool, snapshots: bool) {
    let router = Router::default();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(Some(start(&router, root, id, snapshots).await));
    }
    let first = nodes[0].as_ref().unwrap();
    within(
        "initializing the cluster",
        first.raft.initialize(BTreeMap::from(
            [1, 2, 3].map(|id| (id, BasicNode::default())),
        )),
    )
    .await
    .unwrap();
    let old = leader(&nodes).await;
    let started = Instant::now();
    let raft = nodes[old as usize - 1].as_ref().unwrap().raft.clone();
    within("the writes before the stop", write(&raft, 0, BEFORE)).await;
    eprintln!("{BEFORE} entries in {:?}", started.elapsed());

    let stopped = nodes[old as usize - 1].take().unwrap();
    let written = stopped.log.shard().offsets().written;
    stop(&router, stopped).await;
    if tear {
        tear_newest_segment(&log_dir(root, old));
    }
    let new = leader(&nodes).await;
    assert_ne!(new, old);
    let raft = nodes[new as usize - 1].as_ref().unwrap().raft.clone();
    within("the writes after the stop", write(&raft, BEFORE, AFTER)).await;

    let log = FelixLogStore::options(log_dir(root, old)).open().unwrap();
    // Recovery ran: the torn last entry is gone, the rest kept.
    let reopened = log.shard().offsets().written;
    assert_eq!(reopened, if tear { written - 1 } else { written });
    nodes[old as usize - 1] = Some(start_on(&router, root, old, log, snapshots).await);
    let last = raft.metrics().borrow_watched().last_log_index;
    for node in nodes.iter().flatten() {
        node.raft
            .wait(Some(Duration::from_secs(30)))
            .applied_index_at_least(last, "caught up")
            .await
            .unwrap();
    }

    let mut logs: Vec<_> = nodes.iter().flatten().map(|n| records(&n.log)).collect();
    if snapshots {
        // Compared above the highest purge of the three.
        let above = nodes
            .iter()
            .flatten()
            .map(|n| n.log.shard().offsets().base)
            .max()
            .unwrap();
        assert!(above > 0, "purged");
        for node in nodes.iter().flatten() {
            assert!(
                node.sm.snapshot_last().is_some(),
                "a snapshot was built or installed"
            );
        }
        for log in &mut logs {
            log.retain(|(offset, ..)| *offset >= above);
        }
        assert!(!logs[0].is_empty());
    } else {
        assert!(logs[0].len() as u64 > BEFORE + AFTER, "{}", logs[0].len());
    }
    // Byte-identical replicas: the leader's timestamps were replicated.
    assert_eq!(logs[0], logs[1]);
    assert_eq!(logs[0], logs[2]);
    // So a time lookup answers the same on every node holding the same
    // records (without snapshots, all of them from offset 0): at each
    // normal entry's timestamp, and just past it.
    let normal: Vec<_> = logs[0]
        .iter()
        .filter(|(_, _, _, payload)| payload.first() == Some(&felix_raft::ENTRY_NORMAL))
        .collect();
    assert!(!normal.is_empty());
    for &&(offset, ts, _, ref payload) in normal.iter().step_by(7) {
        assert!(payload.starts_with(b"\x01entry "), "{payload:?}");
        if snapshots {
            continue;
        }
        for t in [ts, ts + 1] {
            let answers: Vec<_> = nodes
                .iter()
                .flatten()
                .map(|n| {
                    n.log
                        .shard()
                        .offset_for_timestamp(t, ReadBound::Written)
                        .unwrap()
                        .map(|hit| hit.offset)
                })
                .collect();
            assert_eq!(answers[0], answers[1], "at {t}");
            assert_eq!(answers[0], answers[2], "at {t}");
            if t == ts {
                assert!(answers[0].is_some_and(|o| o <= offset), "at {t}");
            }
        }
    }
    let applied: Vec<_> = nodes
        .iter()
        .flatten()
        .map(|n| n.sm.data().entries)
        .collect();
    assert_eq!(applied[0].len() as u64, BEFORE + AFTER);
    let mut written: Vec<_> = applied[0].iter().map(|(_, b)| b.clone()).collect();
    written.sort();
    let expected: Vec<_> = (0..BEFORE + AFTER)
        .map(|n| format!("entry {n:08}").into_bytes())
        .collect();
    assert_eq!(written, expected, "every write committed once");
    assert_eq!(applied[0], applied[1]);
    assert_eq!(applied[0], applied[2]);
    for node in nodes.into_iter().flatten() {
        stop(&router, node).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_leader_stops_restarts_and_catches_up() {
    let root = tempfile::tempdir().unwrap();
    run(root.path(), false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_leader_restarts_from_a_torn_segment_and_catches_up() {
    let root = tempfile::tempdir().unwrap();
    run(root.path(), true, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_with_snapshots_and_purging_restarts_and_agrees() {
    let root = tempfile::tempdir().unwrap();
    run(root.path(), false, true).await;
}
