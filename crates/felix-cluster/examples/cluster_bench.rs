//! Figures of replicated shards on loopback: three `felix-node` processes
//! on 127.0.0.1 and a [`Client`] in this process. `cargo xtask bench` runs
//! it (rows `cluster-…`); each run prints one JSON line with the keys
//! `felix-bench` and felix-raft's `raft_bench` print
//! (`records_per_second`, `latency_us` `{p50,p99,max}`, `notes`…):
//!
//! ```text
//! cargo build --release -p felix-cluster --bin felix-node --example cluster_bench
//! target/release/examples/cluster_bench produce --dir /tmp/cb --shards 1 --in-flight 64 --records 20000
//! target/release/examples/cluster_bench produce --dir /tmp/cb --shards 100 --in-flight 64 --records 40000
//! target/release/examples/cluster_bench idle --dir /tmp/cb --shards 1000 --seconds 10
//! target/release/examples/cluster_bench catch-up --dir /tmp/cb --records 200000
//! target/release/examples/cluster_bench failover --dir /tmp/cb --kills 20
//! ```
//!
//! * `produce`: `--records` single-record appends of `--payload-bytes`
//!   (128), `--in-flight` (64) at a time, the k-th to shard k mod
//!   `--shards`; each append's latency runs from the call to its
//!   acknowledgement (a majority holds it durably). The shards are created
//!   and written once (500 appends) before the clock starts.
//! * `idle`: `--shards` shards created (three replicas each), every node
//!   knowing a leader of every group (within a bound: a cluster that does
//!   not settle is measured all the same and says so, `settled`), then
//!   nothing for `--seconds`: each node's CPU over that time
//!   (`/proc/PID/stat`), its threads and open descriptors, and how far the
//!   groups' terms moved around the window (elections while idle).
//! * `catch-up`: `--records` records of 128 B written in batches (untimed),
//!   then read from offset 0 from a follower with `read_at`, 1 MiB a read.
//! * `failover`: producers append all along; `--kills` times, the shard's
//!   leader is SIGKILLed, the time to the first acknowledgement of an
//!   append started after the kill taken (each kill's wall-clock time is
//!   printed on stderr, to read beside the nodes' logs), and the node
//!   restarted on its directory and address.
//!
//! The nodes run with [`RaftTimings::default`] (heartbeat 100 ms, election
//! timeout drawn in 500–1,000 ms), passed on their command lines. The
//! `felix-node` binary is the one beside this example's directory
//! (`target/release/felix-node`). `--dir` is emptied first and removed at
//! the end; every node process is killed when the run ends, failed or
//! not, and every wait is bounded.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use felix_cluster::wire::{GroupStatus, ShardName};
use felix_cluster::{Client, ClientOptions, RaftTimings};
use felix_storage::ShardKey;
use futures::StreamExt;

/// Nodes in the cluster, ids 1 to 3, every shard on all of them.
const NODES: u64 = 3;
/// Appends written before the timed ones (leaders found, files created).
const WARMUP: u64 = 500;
/// Shards created at once.
const CREATE_IN_FLIGHT: usize = 16;
/// How long a node may take to answer its first status.
const START_BOUND: Duration = Duration::from_secs(30);
/// How long creating the shards may take.
const CREATE_BOUND: Duration = Duration::from_secs(300);
/// How long every group may take to have a leader.
const SETTLE_BOUND: Duration = Duration::from_secs(120);
/// How long a whole run may take before it is abandoned.
const RUN_BOUND: Duration = Duration::from_secs(900);
/// One read of the catch-up.
const READ_BYTES: u64 = 1 << 20;
/// Records per untimed append of the catch-up's data.
const FILL_BATCH: usize = 1_000;
/// The record header felix stores before each payload, counted in
/// `bytes_per_second` as `felix-bench` counts it.
const RECORD_HEADER_LEN: u64 = 28;

type Result<T> = std::result::Result<T, String>;

/// What the command line asks for.
struct Args {
    mode: String,
    dir: PathBuf,
    shards: u32,
    in_flight: u64,
    records: u64,
    payload_bytes: usize,
    seconds: u64,
    kills: u64,
}

fn parse() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let mode = it
        .next()
        .ok_or("usage: cluster_bench produce|idle|catch-up|failover --dir DIR ...")?;
    let mut args = Args {
        mode,
        dir: PathBuf::new(),
        shards: 1,
        in_flight: 64,
        records: 20_000,
        payload_bytes: 128,
        seconds: 10,
        kills: 20,
    };
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag}: {value:?} is not a number"))
        };
        match flag.as_str() {
            "--dir" => args.dir = PathBuf::from(&value),
            "--shards" => {
                args.shards = u32::try_from(number()?.max(1))
                    .map_err(|_| format!("--shards {value}: too many"))?;
            }
            "--in-flight" => args.in_flight = number()?.max(1),
            "--records" => args.records = number()?.max(1),
            "--payload-bytes" => args.payload_bytes = number()? as usize,
            "--seconds" => args.seconds = number()?.max(1),
            "--kills" => args.kills = number()?.max(1),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if args.dir.as_os_str().is_empty() {
        return Err("--dir is required".into());
    }
    Ok(args)
}

/// One `felix-node` process, restartable on its directory and address.
struct NodeProc {
    id: u64,
    dir: PathBuf,
    addr: String,
    peers: Vec<(u64, String)>,
    log: PathBuf,
    child: Option<Child>,
}

impl NodeProc {
    fn start(&mut self, exe: &Path, timings: RaftTimings) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("open {}: {e}", self.log.display()))?;
        let mut command = Command::new(exe);
        command
            .args(["--id", &self.id.to_string()])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--listen", &self.addr])
            .args(["--heartbeat-ms", &timings.heartbeat_ms.to_string()])
            .args(["--election-min-ms", &timings.election_min_ms.to_string()])
            .args(["--election-max-ms", &timings.election_max_ms.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for (id, addr) in &self.peers {
            command.args(["--peer", &format!("{id}={addr}")]);
        }
        let child = command
            .spawn()
            .map_err(|e| format!("start {}: {e}", exe.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// SIGKILL, and reap it.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// An error when the process has exited.
    fn check_running(&mut self) -> Result<()> {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => Ok(()),
            Some(Ok(Some(status))) => Err(format!("node {} exited: {status}", self.id)),
            Some(Err(e)) => Err(format!("node {}: {e}", self.id)),
            None => Err(format!("node {} is not running", self.id)),
        }
    }
}

/// The cluster's processes; dropping it kills every one still running,
/// so no run, failed or not, leaves a node behind.
struct Cluster {
    exe: PathBuf,
    timings: RaftTimings,
    nodes: Vec<NodeProc>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
    }
}

impl Cluster {
    /// Starts the nodes on free ports of 127.0.0.1, in `root/n{id}`.
    fn start(root: &Path, timings: RaftTimings) -> Result<Cluster> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("current_exe: {e}"))?
            .parent()
            .and_then(Path::parent)
            .map(|release| release.join("felix-node"))
            .ok_or("no directory above the example's")?;
        if !exe.exists() {
            return Err(format!(
                "{} is missing: cargo build --release -p felix-cluster --bin felix-node",
                exe.display()
            ));
        }
        // Held together so the ports differ; released just before the
        // nodes bind them.
        let listeners = (0..NODES)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| format!("bind 127.0.0.1:0: {e}"))?;
        let addrs = listeners
            .iter()
            .map(|l| l.local_addr().map(|a| a.to_string()))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| format!("local_addr: {e}"))?;
        drop(listeners);
        let nodes = addrs
            .iter()
            .zip(1..)
            .map(|(addr, id)| NodeProc {
                id,
                dir: root.join(format!("n{id}")),
                addr: addr.clone(),
                peers: addrs
                    .iter()
                    .zip(1..)
                    .filter(|(_, p)| *p != id)
                    .map(|(a, p)| (p, a.clone()))
                    .collect(),
                log: root.join(format!("n{id}.log")),
                child: None,
            })
            .collect();
        let mut cluster = Cluster {
            exe,
            timings,
            nodes,
        };
        for i in 0..cluster.nodes.len() {
            cluster.restart(i)?;
        }
        Ok(cluster)
    }

    fn restart(&mut self, index: usize) -> Result<()> {
        let (exe, timings) = (self.exe.clone(), self.timings);
        let node = self
            .nodes
            .get_mut(index)
            .ok_or_else(|| format!("no node at {index}"))?;
        node.start(&exe, timings)
    }

    fn addrs(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.addr.clone()).collect()
    }

    fn check_running(&mut self) -> Result<()> {
        self.nodes.iter_mut().try_for_each(NodeProc::check_running)
    }

    /// The last lines of every node's log, for an error message.
    fn log_tails(&self) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            let text = std::fs::read_to_string(&node.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let _ = writeln!(out, "--- node {} ({}) ---", node.id, node.log.display());
            for line in &lines[lines.len().saturating_sub(15)..] {
                let _ = writeln!(out, "{line}");
            }
        }
        out
    }
}

/// CPU time (user + system) of a process so far, in clock ticks, from
/// `/proc/PID/stat` (fields 14 and 15, counted after the command name's
/// closing parenthesis, which may itself hold spaces).
fn cpu_ticks(pid: &str) -> Result<u64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).map_err(|e| format!("read {path}: {e}"))?;
    let after = stat
        .rfind(')')
        .and_then(|i| stat.get(i + 1..))
        .ok_or_else(|| format!("{path}: no command name"))?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (state), so utime (14) is its 12th.
    let field = |i: usize| -> Result<u64> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| format!("{path}: field {} unreadable", i + 3))
    };
    Ok(field(11)? + field(12)?)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100, Linux's value on
/// every common architecture, if getconf cannot say).
fn clock_ticks_per_second() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}

/// A number from a `/proc/PID/status` line such as `Threads:  12`.
fn status_field(pid: &str, name: &str) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| format!("read {path}: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("{path}: no {name}"))
}

fn open_descriptors(pid: &str) -> Result<u64> {
    let path = format!("/proc/{pid}/fd");
    let entries = std::fs::read_dir(&path).map_err(|e| format!("list {path}: {e}"))?;
    Ok(entries.count() as u64)
}

/// CPU of several processes over an interval.
struct CpuWindow {
    pids: Vec<String>,
    ticks: Vec<u64>,
    started: Instant,
}

impl CpuWindow {
    fn start(pids: Vec<String>) -> Result<CpuWindow> {
        let ticks = pids
            .iter()
            .map(|p| cpu_ticks(p))
            .collect::<Result<Vec<_>>>()?;
        Ok(CpuWindow {
            pids,
            ticks,
            started: Instant::now(),
        })
    }

    /// Each process's CPU since the start, in % of one core.
    fn percent(&self) -> Result<Vec<f64>> {
        let seconds = self.started.elapsed().as_secs_f64();
        let per_second = clock_ticks_per_second() as f64;
        self.pids
            .iter()
            .zip(&self.ticks)
            .map(|(pid, before)| {
                let used = cpu_ticks(pid)?.saturating_sub(*before) as f64 / per_second;
                Ok(used / seconds * 100.0)
            })
            .collect()
    }
}

fn node_pids(cluster: &Cluster) -> Result<Vec<String>> {
    cluster
        .nodes
        .iter()
        .map(|n| {
            n.pid()
                .map(|p| p.to_string())
                .ok_or_else(|| format!("node {} is not running", n.id))
        })
        .collect()
}

/// The largest peak resident set (`VmHWM`) of the nodes, in bytes.
fn nodes_peak_rss(cluster: &Cluster) -> Result<u64> {
    let mut peak = 0;
    for pid in node_pids(cluster)? {
        peak = peak.max(status_field(&pid, "VmHWM:")? * 1024);
    }
    Ok(peak)
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted.get(i).copied().unwrap_or(0)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn list(values: &[f64]) -> String {
    let items: Vec<String> = values.iter().map(|v| format!("{v:.2}")).collect();
    format!("[{}]", items.join(","))
}

fn key(stream: &str, shard: u32) -> ShardKey {
    ShardKey::new("bench", "default", stream, shard)
}

fn client(cluster: &Cluster) -> Client {
    Client::with_options(
        cluster.addrs(),
        ClientOptions {
            deadline: Duration::from_secs(20),
            call_timeout: Duration::from_secs(10),
            ..ClientOptions::default()
        },
    )
}

/// Waits (bounded) until every node answers a status request.
async fn wait_started(client: &Client, cluster: &mut Cluster) -> Result<()> {
    let started = Instant::now();
    for addr in cluster.addrs() {
        loop {
            if client.status(&addr).await.is_ok() {
                break;
            }
            cluster.check_running()?;
            if started.elapsed() > START_BOUND {
                return Err(format!("{addr} did not answer within {START_BOUND:?}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// Creates the shards, [`CREATE_IN_FLIGHT`] at a time, on all three
/// nodes. A creation that fails is asked again (creating a shard twice is
/// harmless) until [`CREATE_BOUND`]: busy nodes answer late.
async fn create(client: &Client, keys: &[ShardKey]) -> Result<()> {
    let started = Instant::now();
    let mut creations = futures::stream::iter(keys)
        .map(|key| async move {
            loop {
                match client.create_shard(key, (1..=NODES).collect()).await {
                    Ok(()) => return Ok(()),
                    Err(e) if started.elapsed() > CREATE_BOUND => {
                        return Err(format!("create {key}: {e}"));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        })
        .buffer_unordered(CREATE_IN_FLIGHT);
    while let Some(done) = creations.next().await {
        done?;
    }
    Ok(())
}

/// Every group `addr` hosts.
async fn groups(client: &Client, addr: &str) -> Result<Vec<GroupStatus>> {
    client
        .status(addr)
        .await
        .map(|s| s.groups)
        .map_err(|e| format!("status of {addr}: {e}"))
}

/// Waits (bounded) until every node hosts `count` groups and each knows
/// a leader for all of them.
async fn settle(client: &Client, cluster: &Cluster, count: usize) -> Result<()> {
    let started = Instant::now();
    for addr in cluster.addrs() {
        loop {
            let groups = groups(client, &addr).await?;
            let led = groups.iter().filter(|g| g.leader.is_some()).count();
            if groups.len() >= count && led == groups.len() {
                break;
            }
            if started.elapsed() > SETTLE_BOUND {
                return Err(format!(
                    "{addr}: {led} of {count} groups with a leader after {SETTLE_BOUND:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

/// `records` appends of `payload_bytes`, `in_flight` at a time, the k-th
/// to `keys[k % len]`; every append's latency in microseconds.
async fn produce(
    client: &Arc<Client>,
    keys: &Arc<Vec<ShardKey>>,
    records: u64,
    in_flight: u64,
    payload_bytes: usize,
) -> Result<Vec<u64>> {
    let mut tasks = Vec::new();
    for w in 0..in_flight {
        let (client, keys) = (Arc::clone(client), Arc::clone(keys));
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut n = w;
            while n < records {
                let key = &keys[(n % keys.len() as u64) as usize];
                let mut payload = vec![0u8; payload_bytes];
                let id = n.to_be_bytes();
                let len = id.len().min(payload_bytes);
                payload[..len].copy_from_slice(&id[..len]);
                let t = Instant::now();
                client
                    .append(key, vec![payload])
                    .await
                    .map_err(|e| format!("append to {key}: {e}"))?;
                latencies.push(micros(t.elapsed()));
                n += in_flight;
            }
            Ok::<_, String>(latencies)
        }));
    }
    let mut all = Vec::with_capacity(records as usize);
    for task in tasks {
        all.extend(task.await.map_err(|e| format!("a producer: {e}"))??);
    }
    Ok(all)
}

/// How many groups each node leads, by node id.
async fn leaders(client: &Client, cluster: &Cluster) -> Result<BTreeMap<u64, usize>> {
    let mut led = BTreeMap::new();
    for node in &cluster.nodes {
        let groups = groups(client, &node.addr).await?;
        let count = groups.iter().filter(|g| g.role == "leader").count();
        led.insert(node.id, count);
    }
    Ok(led)
}

fn leaders_note(led: &BTreeMap<u64, usize>) -> String {
    let items: Vec<String> = led.iter().map(|(id, n)| format!("\"{id}\":{n}")).collect();
    format!("{{{}}}", items.join(","))
}

async fn run_produce(args: &Args, cluster: &mut Cluster) -> Result<String> {
    let client = Arc::new(client(cluster));
    wait_started(&client, cluster).await?;
    let keys: Vec<ShardKey> = (0..args.shards).map(|s| key("produce", s)).collect();
    create(&client, &keys).await?;
    settle(&client, cluster, keys.len()).await?;
    let keys = Arc::new(keys);
    // One append to each shard finds its leader; then the warm-up.
    produce(
        &client,
        &keys,
        keys.len() as u64,
        args.in_flight,
        args.payload_bytes,
    )
    .await?;
    produce(&client, &keys, WARMUP, args.in_flight, args.payload_bytes).await?;
    let mut pids = node_pids(cluster)?;
    pids.push(std::process::id().to_string());
    let cpu = CpuWindow::start(pids)?;
    let started = Instant::now();
    let mut latencies = produce(
        &client,
        &keys,
        args.records,
        args.in_flight,
        args.payload_bytes,
    )
    .await?;
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu.percent()?;
    cluster.check_running()?;
    let led = leaders(&client, cluster).await?;
    latencies.sort_unstable();
    let rate = args.records as f64 / elapsed;
    Ok(format!(
        "{{\"scenario\":\"produce\",\"impl\":\"felix-cluster\",\
         \"params\":{{\"nodes\":{NODES},\"shards\":{},\"in_flight\":{},\"payload_bytes\":{}}},\
         \"records\":{},\"bytes\":{},\"elapsed_seconds\":{elapsed:.4},\
         \"records_per_second\":{rate:.1},\"bytes_per_second\":{:.1},\
         \"latency_us\":{{\"p50\":{},\"p90\":{},\"p99\":{},\"max\":{}}},\"peak_rss_bytes\":{},\
         \"notes\":{{\"cpu_percent_of_core_per_node\":{},\"client_cpu_percent_of_core\":{:.2},\
         \"groups_led_per_node\":{},{}}}}}",
        args.shards,
        args.in_flight,
        args.payload_bytes,
        args.records,
        args.records * args.payload_bytes as u64,
        rate * args.payload_bytes as f64,
        quantile(&latencies, 0.5),
        quantile(&latencies, 0.9),
        quantile(&latencies, 0.99),
        latencies.last().copied().unwrap_or(0),
        nodes_peak_rss(cluster)?,
        list(&cpu[..cpu.len() - 1]),
        cpu.last().copied().unwrap_or(f64::NAN),
        leaders_note(&led),
        timings_note(cluster.timings),
    ))
}

fn timings_note(t: RaftTimings) -> String {
    format!(
        "\"heartbeat_ms\":{},\"election_min_ms\":{},\"election_max_ms\":{}",
        t.heartbeat_ms, t.election_min_ms, t.election_max_ms
    )
}

/// What the nodes that answered say about their groups.
#[derive(Default)]
struct Census {
    /// Nodes that answered a status request.
    answered: usize,
    /// Groups each node leads, by node id.
    led: BTreeMap<u64, usize>,
    /// The most groups one node knows no leader of.
    leaderless: usize,
    /// Each group's highest term among the nodes.
    terms: BTreeMap<ShardName, u64>,
}

/// Asks every node for its status; a node that does not answer (an
/// overloaded one may not) is left out rather than failing the run.
async fn census(client: &Client, cluster: &Cluster, count: usize) -> Census {
    let mut census = Census::default();
    for node in &cluster.nodes {
        let Ok(groups) = groups(client, &node.addr).await else {
            continue;
        };
        census.answered += 1;
        let led = groups.iter().filter(|g| g.role == "leader").count();
        census.led.insert(node.id, led);
        let known = groups.iter().filter(|g| g.leader.is_some()).count();
        census.leaderless = census.leaderless.max(count.saturating_sub(known));
        for g in groups {
            let term = census.terms.entry(g.shard).or_default();
            *term = (*term).max(g.term);
        }
    }
    census
}

async fn run_idle(args: &Args, cluster: &mut Cluster) -> Result<String> {
    let client = client(cluster);
    wait_started(&client, cluster).await?;
    let keys: Vec<ShardKey> = (0..args.shards).map(|s| key("idle", s)).collect();
    let started = Instant::now();
    create(&client, &keys).await?;
    let create_seconds = started.elapsed().as_secs_f64();
    // Every node knows a leader of every group, within the bound; a
    // cluster that does not settle is measured all the same, and says so.
    let mut before = census(&client, cluster, keys.len()).await;
    while (before.answered < cluster.nodes.len() || before.leaderless > 0)
        && started.elapsed().as_secs_f64() - create_seconds < SETTLE_BOUND.as_secs_f64()
    {
        tokio::time::sleep(Duration::from_millis(500)).await;
        before = census(&client, cluster, keys.len()).await;
    }
    let settled = before.answered == cluster.nodes.len() && before.leaderless == 0;
    let settle_seconds = started.elapsed().as_secs_f64() - create_seconds;
    // What the creations left behind (first syncs) is done.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pids = node_pids(cluster)?;
    let cpu = CpuWindow::start(pids.clone())?;
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    let cpu = cpu.percent()?;
    cluster.check_running()?;
    let mut threads = Vec::new();
    let mut fds = Vec::new();
    for pid in &pids {
        threads.push(status_field(pid, "Threads:")? as f64);
        fds.push(open_descriptors(pid)? as f64);
    }
    let peak_rss = nodes_peak_rss(cluster)?;
    // Elections while idle: the terms the groups moved on by, between
    // the census before the window (taken ≥ 2 s before it) and after.
    let after = census(&client, cluster, keys.len()).await;
    let elections: u64 = after
        .terms
        .iter()
        .filter_map(|(shard, term)| Some(term.saturating_sub(*before.terms.get(shard)?)))
        .sum();
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    Ok(format!(
        "{{\"scenario\":\"idle\",\"impl\":\"felix-cluster\",\
         \"params\":{{\"nodes\":{NODES},\"shards\":{},\"seconds\":{}}},\
         \"peak_rss_bytes\":{peak_rss},\
         \"notes\":{{\"cpu_percent_of_core\":{:.2},\"cpu_percent_of_core_per_node\":{},\
         \"clock_ticks_per_second\":{},\"threads\":{},\"threads_per_node\":{},\
         \"open_descriptors\":{},\"open_descriptors_per_node\":{},\
         \"create_seconds\":{create_seconds:.3},\"settled\":{settled},\"settle_seconds\":{settle_seconds:.3},\
         \"groups_led_per_node\":{},\"groups_without_leader_after\":{},\
         \"term_increases_around_window\":{elections},\"nodes_answering_after\":{},{}}}}}",
        args.shards,
        args.seconds,
        max(&cpu),
        list(&cpu),
        clock_ticks_per_second(),
        max(&threads),
        list(&threads),
        max(&fds),
        list(&fds),
        leaders_note(&before.led),
        after.leaderless,
        after.answered,
        timings_note(cluster.timings),
    ))
}

/// A node that follows `name`, and its address.
async fn follower(client: &Client, cluster: &Cluster, name: &ShardName) -> Result<(u64, String)> {
    for node in &cluster.nodes {
        let groups = groups(client, &node.addr).await?;
        if groups
            .iter()
            .any(|g| &g.shard == name && g.role == "follower")
        {
            return Ok((node.id, node.addr.clone()));
        }
    }
    Err("no follower".into())
}

async fn run_catch_up(args: &Args, cluster: &mut Cluster) -> Result<String> {
    let client = client(cluster);
    wait_started(&client, cluster).await?;
    let shard = key("catch-up", 0);
    create(&client, std::slice::from_ref(&shard)).await?;
    settle(&client, cluster, 1).await?;
    let mut left = args.records;
    let mut last = 0;
    while left > 0 {
        let n = left.min(FILL_BATCH as u64);
        let batch = vec![vec![7u8; args.payload_bytes]; n as usize];
        let offsets = client
            .append(&shard, batch)
            .await
            .map_err(|e| format!("fill: {e}"))?;
        last = offsets.last().copied().unwrap_or(last);
        left -= n;
    }
    let name = ShardName::from(&shard);
    let (follower_id, addr) = follower(&client, cluster, &name).await?;
    // The follower knows every record committed before the clock starts.
    let waited = Instant::now();
    loop {
        let batch = client
            .read_at(&addr, &shard, last, 1, Duration::ZERO)
            .await
            .map_err(|e| format!("read from node {follower_id}: {e}"))?;
        if batch.offsets.committed > last {
            break;
        }
        if waited.elapsed() > SETTLE_BOUND {
            return Err(format!(
                "node {follower_id} did not learn of commit {last} within {SETTLE_BOUND:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    let (mut from, mut records, mut reads) = (0u64, 0u64, 0u64);
    while from <= last {
        let batch = client
            .read_at(&addr, &shard, from, READ_BYTES, Duration::ZERO)
            .await
            .map_err(|e| format!("read from node {follower_id} at {from}: {e}"))?;
        if batch.next <= from {
            return Err(format!("node {follower_id}: no progress at {from}"));
        }
        records += batch.records.len() as u64;
        from = batch.next;
        reads += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    cluster.check_running()?;
    if records != args.records {
        return Err(format!("read {records} records of {}", args.records));
    }
    let rate = records as f64 / elapsed;
    Ok(format!(
        "{{\"scenario\":\"catch-up\",\"impl\":\"felix-cluster\",\
         \"params\":{{\"nodes\":{NODES},\"payload_bytes\":{},\"max_bytes\":{READ_BYTES}}},\
         \"records\":{records},\"bytes\":{},\"elapsed_seconds\":{elapsed:.4},\
         \"records_per_second\":{rate:.1},\"bytes_per_second\":{:.1},\"peak_rss_bytes\":{},\
         \"notes\":{{\"follower\":{follower_id},\"reads\":{reads},{}}}}}",
        args.payload_bytes,
        records * (RECORD_HEADER_LEN + args.payload_bytes as u64),
        rate * (RECORD_HEADER_LEN + args.payload_bytes as u64) as f64,
        nodes_peak_rss(cluster)?,
        timings_note(cluster.timings),
    ))
}

/// The node leading `name`, by index in the cluster (bounded wait).
async fn leader(client: &Client, cluster: &Cluster, name: &ShardName) -> Result<usize> {
    let started = Instant::now();
    loop {
        for (i, node) in cluster.nodes.iter().enumerate() {
            if node.child.is_none() {
                continue;
            }
            if let Ok(status) = client.status(&node.addr).await
                && status
                    .groups
                    .iter()
                    .any(|g| &g.shard == name && g.role == "leader")
            {
                return Ok(i);
            }
        }
        if started.elapsed() > SETTLE_BOUND {
            return Err(format!("no leader of {name:?} within {SETTLE_BOUND:?}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Acknowledged appends of the failover's producers: when each started
/// and when it was acknowledged.
type Acks = Arc<Mutex<Vec<(Instant, Instant)>>>;

/// The first acknowledgement of an append started at or after `since`
/// (bounded wait).
async fn next_ack(acks: &Acks, since: Instant, bound: Duration) -> Result<Instant> {
    loop {
        let first = acks
            .lock()
            .map_err(|_| "acks poisoned")?
            .iter()
            .rev()
            .take_while(|(_, acked)| *acked >= since)
            .filter(|(start, _)| *start >= since)
            .map(|(_, acked)| *acked)
            .min();
        if let Some(acked) = first {
            return Ok(acked);
        }
        if since.elapsed() > bound {
            return Err(format!("no acknowledgement within {bound:?}"));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

async fn run_failover(args: &Args, cluster: &mut Cluster) -> Result<String> {
    let client = Arc::new(client(cluster));
    wait_started(&client, cluster).await?;
    let shard = key("failover", 0);
    create(&client, std::slice::from_ref(&shard)).await?;
    settle(&client, cluster, 1).await?;
    let name = ShardName::from(&shard);
    let acks: Acks = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let unknown = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut producers = Vec::new();
    for p in 0..4u64 {
        let (client, acks, stop, unknown, shard) = (
            Arc::clone(&client),
            Arc::clone(&acks),
            Arc::clone(&stop),
            Arc::clone(&unknown),
            shard.clone(),
        );
        let payload_bytes = args.payload_bytes;
        producers.push(tokio::spawn(async move {
            use std::sync::atomic::Ordering::Relaxed;
            let mut n = p;
            while !stop.load(Relaxed) {
                let payload = vec![(n % 251) as u8; payload_bytes];
                n += 4;
                let t = Instant::now();
                match client.append(&shard, vec![payload]).await {
                    Ok(_) => {
                        if let Ok(mut acks) = acks.lock() {
                            acks.push((t, Instant::now()));
                        }
                    }
                    // A kill makes the appends in flight unknown, and
                    // calls to the dead node fail until the next leader.
                    Err(_) => {
                        unknown.fetch_add(1, Relaxed);
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            }
        }));
    }
    let bound = Duration::from_secs(60);
    let mut failovers = Vec::new();
    let mut killed_nodes = Vec::new();
    for _ in 0..args.kills {
        // The producers are acknowledged before each kill.
        next_ack(&acks, Instant::now(), bound).await?;
        let i = leader(&client, cluster, &name).await?;
        let node = &mut cluster.nodes[i];
        killed_nodes.push(node.id);
        let killed_at = Instant::now();
        let wall = std::time::SystemTime::now();
        node.kill();
        let acked = next_ack(&acks, killed_at, bound).await?;
        failovers.push(micros(acked - killed_at));
        // For reading beside the nodes' logs (their times are UTC).
        eprintln!(
            "killed node {} at {:?} after the epoch; next acknowledgement {:?} later",
            killed_nodes.last().copied().unwrap_or(0),
            wall.duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default(),
            acked - killed_at
        );
        cluster.restart(i)?;
        // Back: the restarted node answers and follows a leader.
        let addr = cluster.nodes[i].addr.clone();
        let back = Instant::now();
        loop {
            if let Ok(status) = client.status(&addr).await
                && status
                    .groups
                    .iter()
                    .any(|g| g.shard == name && g.leader.is_some())
            {
                break;
            }
            cluster.nodes[i].check_running()?;
            if back.elapsed() > bound {
                return Err(format!("node {} not back within {bound:?}", i + 1));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for producer in producers {
        producer.await.map_err(|e| format!("a producer: {e}"))?;
    }
    cluster.check_running()?;
    let acked = acks.lock().map_err(|_| "acks poisoned")?.len();
    let mut sorted = failovers.clone();
    sorted.sort_unstable();
    let p50 = quantile(&sorted, 0.5);
    let t = cluster.timings;
    let ms: Vec<f64> = failovers.iter().map(|us| *us as f64 / 1e3).collect();
    let killed: Vec<String> = killed_nodes.iter().map(u64::to_string).collect();
    Ok(format!(
        "{{\"scenario\":\"failover\",\"impl\":\"felix-cluster\",\
         \"params\":{{\"nodes\":{NODES},\"kills\":{},\"producers\":4,\"payload_bytes\":{}}},\
         \"latency_us\":{{\"p50\":{p50},\"p99\":{},\"max\":{}}},\"peak_rss_bytes\":{},\
         \"notes\":{{\"failover_ms\":{},\"failover_p50_ms\":{:.1},\"failover_max_ms\":{:.1},\
         \"failover_p50_over_election_timeout\":{:.3},\"killed\":[{}],\
         \"acknowledged\":{acked},\"failed_appends\":{},{}}}}}",
        args.kills,
        args.payload_bytes,
        quantile(&sorted, 0.99),
        sorted.last().copied().unwrap_or(0),
        nodes_peak_rss(cluster)?,
        list(&ms),
        p50 as f64 / 1e3,
        sorted.last().copied().unwrap_or(0) as f64 / 1e3,
        p50 as f64 / 1e3 / t.election_max_ms as f64,
        killed.join(","),
        unknown.load(std::sync::atomic::Ordering::Relaxed),
        timings_note(t),
    ))
}

async fn run(args: &Args, cluster: &mut Cluster) -> Result<String> {
    match args.mode.as_str() {
        "produce" => run_produce(args, cluster).await,
        "idle" => run_idle(args, cluster).await,
        "catch-up" => run_catch_up(args, cluster).await,
        "failover" => run_failover(args, cluster).await,
        other => Err(format!(
            "the mode is produce, idle, catch-up or failover, not {other}"
        )),
    }
}

fn clear(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("remove {}: {e}", dir.display()))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let outcome = (|| -> Result<String> {
        clear(&args.dir)?;
        std::fs::create_dir_all(&args.dir)
            .map_err(|e| format!("create {}: {e}", args.dir.display()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("a runtime: {e}"))?;
        let mut cluster = Cluster::start(&args.dir, RaftTimings::default())?;
        let line = runtime.block_on(async {
            match tokio::time::timeout(RUN_BOUND, run(&args, &mut cluster)).await {
                Ok(line) => line,
                Err(_) => Err(format!("the run took over {RUN_BOUND:?}")),
            }
        });
        let line = line.map_err(|e| format!("{e}\n{}", cluster.log_tails()));
        drop(cluster);
        drop(runtime);
        line
    })();
    let _ = clear(&args.dir);
    match outcome {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("cluster_bench {}: {message}", args.mode);
            ExitCode::FAILURE
        }
    }
}
