//! Three node processes (`examples/node`) over loopback TCP: writes, the
//! leader killed with SIGKILL, more writes, the leader restarted from its
//! directory; every node applies every acknowledged write once, in the
//! order the writes were acknowledged, and all three apply the same
//! entries at the same indexes. Every wait is bounded in time, and the
//! processes are killed however the test ends.
//!
//! The example binary is the one `cargo test` builds beside the tests
//! (`target/<profile>/examples/node`).

#[path = "../examples/node/proto.rs"]
mod proto;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use proto::{Request, Response};

fn node_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap();
    let node = profile.join("examples").join("node");
    assert!(
        node.exists(),
        "{} is missing: cargo test builds it with the tests (a test run limited to --test tcp does not)",
        node.display()
    );
    node
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The three processes, killed when the test ends however it ends.
struct Cluster {
    binary: PathBuf,
    root: PathBuf,
    addrs: Vec<String>,
    children: Vec<Option<Child>>,
}

impl Cluster {
    fn start(&mut self, id: usize, init: bool) {
        let mut command = Command::new(&self.binary);
        command
            .arg("--id")
            .arg(id.to_string())
            .arg("--dir")
            .arg(self.root.join(format!("node-{id}")))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (i, addr) in self.addrs.iter().enumerate() {
            command.arg("--peer").arg(format!("{}={addr}", i + 1));
        }
        if init {
            command.arg("--init");
        }
        self.children[id - 1] = Some(command.spawn().unwrap());
    }

    fn kill(&mut self, id: usize) {
        if let Some(mut child) = self.children[id - 1].take() {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for id in 1..=self.children.len() {
            self.kill(id);
        }
    }
}

/// Writes `bytes` through whichever node leads; returns the leader's id.
async fn write(addrs: &[String], leader: &mut usize, bytes: Vec<u8>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "no leader took the write");
        let request = Request::Write(bytes.clone());
        let call = proto::call(&addrs[*leader - 1], &request);
        match tokio::time::timeout(Duration::from_secs(5), call).await {
            Ok(Ok(Response::Write(Ok(_index)))) => return,
            Ok(Ok(Response::Write(Err(Some(hint))))) if hint as usize != *leader => {
                *leader = hint as usize;
                continue;
            }
            _ => {
                *leader = *leader % addrs.len() + 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// What `addr`'s state machine applied, or `None` if it does not answer
/// within 5 s (a node still starting, or hung).
async fn applied(addr: &str) -> Option<Vec<(u64, Vec<u8>)>> {
    let call = proto::call(addr, &Request::Applied);
    match tokio::time::timeout(Duration::from_secs(5), call).await {
        Ok(Ok(Response::Applied(entries))) => Some(entries),
        _ => None,
    }
}

/// Why `entries` (one node's applied entries) is not yet, or never, what
/// the writes acknowledged: the first fact found, or `None` when it holds
/// every acknowledged write once, in the order they were acknowledged
/// (each write was acknowledged before the next was sent, so a later
/// acknowledged write has a higher index), with indexes strictly rising.
fn out_of_order(entries: &[(u64, Vec<u8>)], acknowledged: &[Vec<u8>]) -> Option<String> {
    if let Some(w) = entries.windows(2).find(|w| w[0].0 >= w[1].0) {
        return Some(format!("index {} applied after {}", w[1].0, w[0].0));
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some((index, _)) = entries.iter().find(|(_, b)| !seen.insert(b)) {
        return Some(format!("the entry at {index} applied twice"));
    }
    let mut applied = entries.iter();
    for (n, bytes) in acknowledged.iter().enumerate() {
        // Unacknowledged entries (a write retried after a timeout) may lie
        // between acknowledged ones.
        if !applied.any(|(_, b)| b == bytes) {
            return Some(format!(
                "acknowledged write {n} ({}) missing or out of order",
                String::from_utf8_lossy(bytes)
            ));
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_cluster_leader_killed_and_restarted_loses_no_acknowledged_write() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster {
        binary: node_binary(),
        root: root.path().to_path_buf(),
        addrs: (0..3)
            .map(|_| format!("127.0.0.1:{}", free_port()))
            .collect(),
        children: vec![None, None, None],
    };
    for id in 1..=3 {
        cluster.start(id, id == 1);
    }
    let addrs = cluster.addrs.clone();
    let mut leader = 1;
    let mut acknowledged = Vec::new();
    for n in 0..200 {
        let bytes = format!("write {n:05}").into_bytes();
        write(&addrs, &mut leader, bytes.clone()).await;
        acknowledged.push(bytes);
    }
    let killed = leader;
    cluster.kill(killed);
    for n in 200..400 {
        let bytes = format!("write {n:05}").into_bytes();
        write(&addrs, &mut leader, bytes.clone()).await;
        acknowledged.push(bytes);
    }
    assert_ne!(leader, killed, "another node leads");
    cluster.start(killed, false);

    // Every node holds every acknowledged write in order, and all three
    // applied the same entries at the same indexes.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut nodes = Vec::new();
        for addr in &addrs {
            nodes.push(applied(addr).await);
        }
        let why: Option<String> = nodes
            .iter()
            .zip(&addrs)
            .find_map(|(entries, addr)| match entries {
                None => Some(format!("{addr} did not answer")),
                Some(entries) => {
                    out_of_order(entries, &acknowledged).map(|e| format!("{addr}: {e}"))
                }
            })
            .or_else(|| {
                let first = nodes[0].as_ref()?;
                nodes.iter().zip(&addrs).skip(1).find_map(|(other, addr)| {
                    (other.as_ref() != Some(first)).then(|| {
                        format!(
                            "{addr} applied other entries than {} ({} against {})",
                            addrs[0],
                            other.as_ref().map_or(0, Vec::len),
                            first.len()
                        )
                    })
                })
            });
        let Some(why) = why else { break };
        assert!(
            Instant::now() < deadline,
            "the nodes never agreed on the {} acknowledged writes within 30 s: {why}",
            acknowledged.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
