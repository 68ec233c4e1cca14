//! Three `felix-node` processes on 127.0.0.1: producers write while the
//! leader is killed (SIGKILL) and restarted, again and again; afterwards
//! every acknowledged record is on every replica exactly once at its
//! offset, and the replicas' logs are identical.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{eventually, key};
use felix_cluster::{Client, ClientError, ClientOptions};
use felix_storage::{Durability, ReadBound, ShardKey, Store, StoreConfig};

/// One `felix-node` process; killed when dropped, so a failing test leaves
/// none behind.
struct Proc {
    id: u64,
    dir: PathBuf,
    addr: String,
    peers: Vec<(u64, String)>,
    log: PathBuf,
    /// More flags.
    extra: Vec<String>,
    child: Option<Child>,
}

impl Proc {
    fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_felix-node"));
        command
            .args(["--id", &self.id.to_string()])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--listen", &self.addr])
            .args([
                "--heartbeat-ms",
                "50",
                "--election-min-ms",
                "300",
                "--election-max-ms",
                "600",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for (id, addr) in &self.peers {
            command.args(["--peer", &format!("{id}={addr}")]);
        }
        command.args(&self.extra);
        self.child = Some(command.spawn().unwrap());
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then wait (bounded) for the clean exit.
    fn terminate(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = child.try_wait() {
                assert!(status.success(), "node {} exited with {status}", self.id);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("node {} did not stop within 10 s of SIGTERM", self.id);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Free ports on 127.0.0.1, held together so they differ.
fn free_addrs(count: usize) -> Vec<String> {
    let listeners: Vec<_> = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().to_string())
        .collect()
}

fn procs(root: &Path, count: u64) -> Vec<Proc> {
    let addrs = free_addrs(count as usize);
    (1..=count)
        .map(|id| Proc {
            id,
            dir: root.join(format!("n{id}")),
            addr: addrs[(id - 1) as usize].clone(),
            peers: (1..=count)
                .filter(|p| *p != id)
                .map(|p| (p, addrs[(p - 1) as usize].clone()))
                .collect(),
            log: root.join(format!("n{id}.log")),
            extra: Vec::new(),
            child: None,
        })
        .collect()
}

fn dump_logs(procs: &[Proc]) {
    for p in procs {
        if let Ok(text) = std::fs::read_to_string(&p.log) {
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!("--- node {} (last lines) ---", p.id);
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

async fn leader(client: &Client, procs: &[Proc], shard: &ShardKey) -> u64 {
    let name = felix_cluster::wire::ShardName::from(shard);
    eventually("a leader", Duration::from_secs(15), || async {
        for p in procs.iter().filter(|p| p.child.is_some()) {
            if let Ok(status) = client.status(&p.addr).await {
                let group = status.groups.iter().find(|g| g.shard == name)?;
                if group.role == "leader" {
                    return Some(p.id);
                }
            }
        }
        None
    })
    .await
}

/// Every record of the shard in the node's store: (offset, timestamp,
/// record payload as stored).
fn stored(dir: &Path, shard: &ShardKey) -> Vec<(u64, u64, Vec<u8>)> {
    let config = StoreConfig {
        durability: Durability::None,
        ..StoreConfig::default()
    };
    let store = Store::options(dir).config(config).open().unwrap();
    let opened = store.open_shard(shard).unwrap();
    let end = opened.offsets().written;
    let mut out = Vec::new();
    let mut from = opened.offsets().base;
    while from < end {
        let read = opened.read(from, 1 << 20, ReadBound::Written).unwrap();
        for r in &read {
            out.push((r.offset, r.timestamp_micros, r.payload.to_vec()));
        }
        from = read.last().unwrap().offset + 1;
    }
    store.close().unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_leader_again_and_again_loses_and_duplicates_no_acknowledged_record() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = procs(root.path(), 3);
    for p in &mut nodes {
        p.start();
    }
    let client = Arc::new(Client::with_options(
        nodes.iter().map(|p| p.addr.clone()),
        ClientOptions {
            deadline: Duration::from_secs(15),
            call_timeout: Duration::from_secs(3),
            ..Default::default()
        },
    ));
    let shard = key(0);
    let created = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match client.create_shard(&shard, vec![1, 2, 3]).await {
                Ok(()) => return,
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    })
    .await;
    if created.is_err() {
        dump_logs(&nodes);
        panic!("the shard was not created within 20 s");
    }

    // Producers: each record's payload is unique; what is acknowledged is
    // kept with its offset. An unknown outcome is not retried.
    let acked = Arc::new(Mutex::new(Vec::<(u64, Vec<u8>)>::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut producers = Vec::new();
    for p in 0..4 {
        let (client, acked, stop, shard) = (
            Arc::clone(&client),
            Arc::clone(&acked),
            Arc::clone(&stop),
            shard.clone(),
        );
        producers.push(tokio::spawn(async move {
            let mut n = 0u64;
            let mut unknown = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let payload = format!("p{p}-{n}").into_bytes();
                n += 1;
                match client.append(&shard, vec![payload.clone()]).await {
                    Ok(offsets) => acked.lock().unwrap().push((offsets[0], payload)),
                    Err(ClientError::OutcomeUnknown { .. } | ClientError::Timeout { .. }) => {
                        unknown += 1;
                    }
                    Err(e) => panic!("producer {p}: {e}"),
                }
            }
            unknown
        }));
    }

    // SIGKILL, and between them SIGTERM: a leader shutting down cleanly
    // with appends in flight must not leave any to be sent twice.
    let rounds = 4;
    for round in 0..rounds {
        tokio::time::sleep(Duration::from_millis(600)).await;
        let leader = leader(&client, &nodes, &shard).await;
        let before = acked.lock().unwrap().len();
        let p = nodes.iter_mut().find(|p| p.id == leader).unwrap();
        if round % 2 == 0 {
            p.kill();
        } else {
            p.terminate();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        p.start();
        // Records are acknowledged again after the election.
        let waited = eventually(
            "an acknowledgement after the kill",
            Duration::from_secs(20),
            || {
                let acked = Arc::clone(&acked);
                async move { (acked.lock().unwrap().len() > before).then_some(()) }
            },
        );
        waited.await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for producer in producers {
        producer.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    eprintln!(
        "{} records acknowledged over {rounds} leader kills",
        acked.len()
    );
    assert!(
        acked.len() > 20,
        "only {} records acknowledged",
        acked.len()
    );

    // Every replica converges on the same committed end.
    let last = acked.iter().map(|(o, _)| *o).max().unwrap();
    for p in &nodes {
        let addr = p.addr.clone();
        let client = Arc::clone(&client);
        let shard = shard.clone();
        eventually(
            &format!("node {} to commit {last}", p.id),
            Duration::from_secs(20),
            move || {
                let (client, addr, shard) = (Arc::clone(&client), addr.clone(), shard.clone());
                async move {
                    let batch = client
                        .read_at(&addr, &shard, last, 1, Duration::ZERO)
                        .await
                        .ok()?;
                    (batch.offsets.committed > last).then_some(())
                }
            },
        )
        .await;
    }
    for p in &mut nodes {
        p.terminate();
    }

    // The logs, read from each store after a clean shutdown, are
    // identical up to the shortest, which holds every acknowledged
    // record, exactly once, at its offset.
    let logs: Vec<_> = nodes.iter().map(|p| stored(&p.dir, &shard)).collect();
    let common = logs.iter().map(Vec::len).min().unwrap();
    for (i, log) in logs.iter().enumerate() {
        assert_eq!(log[..common], logs[0][..common], "node {} differs", i + 1);
    }
    let by_offset: HashMap<u64, &Vec<u8>> =
        logs[0][..common].iter().map(|(o, _, p)| (*o, p)).collect();
    let mut seen: BTreeMap<&[u8], u64> = BTreeMap::new();
    for (_, _, payload) in &logs[0][..common] {
        if let Some((&felix_raft::ENTRY_NORMAL, body)) = payload.split_first() {
            *seen.entry(body).or_default() += 1;
        }
    }
    for (offset, payload) in &acked {
        let stored = by_offset
            .get(offset)
            .unwrap_or_else(|| panic!("offset {offset} missing"));
        assert_eq!(&stored[1..], &payload[..], "offset {offset}");
        assert_eq!(
            seen.get(&payload[..]),
            Some(&1),
            "{:?} not exactly once",
            String::from_utf8_lossy(payload)
        );
    }
}

/// GET `path` from `addr`, the whole answer as text.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_serves_prometheus_metrics_and_stops_cleanly_on_sigterm() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = procs(root.path(), 1);
    let metrics_addr = free_addrs(1).remove(0);
    nodes[0].extra = vec!["--metrics-addr".into(), metrics_addr.clone()];
    nodes[0].start();
    let client = Client::new([nodes[0].addr.clone()]);
    let shard = key(0);
    let created = tokio::time::timeout(Duration::from_secs(20), async {
        while client.create_shard(&shard, vec![1]).await.is_err() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    if created.is_err() {
        dump_logs(&nodes);
        panic!("no shard within 20 s");
    }
    let offset = client.append(&shard, vec![b"m".to_vec()]).await.unwrap()[0];
    let wanted = format!("felix_cluster_commit_index{{node=\"1\",shard=\"{shard}\"}} {offset}");
    let text = eventually(
        "the commit index in the metrics",
        Duration::from_secs(10),
        || {
            let (addr, wanted) = (metrics_addr.clone(), wanted.clone());
            async move {
                let text = tokio::task::spawn_blocking(move || http_get(&addr, "/metrics"))
                    .await
                    .ok()?;
                text.contains(&wanted).then_some(text)
            }
        },
    )
    .await;
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(
        text.contains("felix_cluster_is_leader{node=\"1\""),
        "{text}"
    );

    nodes[0].terminate();
    let shard_dir = Store::options(&nodes[0].dir)
        .config(StoreConfig {
            durability: Durability::None,
            ..StoreConfig::default()
        })
        .open()
        .unwrap()
        .root()
        .join(shard.dir_name());
    assert!(
        shard_dir
            .join(felix_format::CLEAN_SHUTDOWN_FILE_NAME)
            .exists(),
        "clean shutdown recorded"
    );

    // Starting again on the same directory is a restart: the record is there.
    nodes[0].extra.clear();
    nodes[0].start();
    let batch = eventually(
        "the restarted node to serve",
        Duration::from_secs(20),
        || async {
            let batch = client
                .read(&shard, offset, 1 << 20, Duration::ZERO)
                .await
                .ok()?;
            (!batch.is_empty()).then_some(batch)
        },
    )
    .await;
    assert_eq!(batch.records().next().map(|r| r.payload), Some(&b"m"[..]));
}
