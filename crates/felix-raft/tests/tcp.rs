//! Three node processes (`examples/node`) over loopback TCP: writes, the
//! leader killed with SIGKILL, more writes, the leader restarted from its
//! directory; no acknowledged write is lost on any node.
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

async fn applied(addr: &str) -> Option<Vec<(u64, Vec<u8>)>> {
    match proto::call(addr, &Request::Applied).await {
        Ok(Response::Applied(entries)) => Some(entries),
        _ => None,
    }
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

    let deadline = Instant::now() + Duration::from_secs(30);
    for addr in &addrs {
        loop {
            if let Some(entries) = applied(addr).await {
                let have: std::collections::BTreeSet<_> =
                    entries.iter().map(|(_, b)| b.clone()).collect();
                if acknowledged.iter().all(|b| have.contains(b)) {
                    // In log order, each once.
                    assert_eq!(have.len(), entries.len(), "{addr}: an entry applied twice");
                    break;
                }
            }
            assert!(Instant::now() < deadline, "{addr} never caught up");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
