//! The three node processes, what /proc says of them, and the client's
//! first steps: start, create, settle.

use super::*;

/// One `felix-node` process, restartable on its directory and address.
pub(super) struct NodeProc {
    pub(super) id: u64,
    pub(super) dir: PathBuf,
    pub(super) addr: String,
    pub(super) peers: Vec<(u64, String)>,
    pub(super) log: PathBuf,
    pub(super) child: Option<Child>,
}

impl NodeProc {
    pub(super) fn start(&mut self, exe: &Path, timings: RaftTimings) -> Result<()> {
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
    pub(super) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub(super) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// An error when the process has exited.
    pub(super) fn check_running(&mut self) -> Result<()> {
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
pub(super) struct Cluster {
    pub(super) exe: PathBuf,
    pub(super) timings: RaftTimings,
    pub(super) nodes: Vec<NodeProc>,
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
    pub(super) fn start(root: &Path, timings: RaftTimings) -> Result<Cluster> {
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

    pub(super) fn restart(&mut self, index: usize) -> Result<()> {
        let (exe, timings) = (self.exe.clone(), self.timings);
        let node = self
            .nodes
            .get_mut(index)
            .ok_or_else(|| format!("no node at {index}"))?;
        node.start(&exe, timings)
    }

    pub(super) fn addrs(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.addr.clone()).collect()
    }

    pub(super) fn check_running(&mut self) -> Result<()> {
        self.nodes.iter_mut().try_for_each(NodeProc::check_running)
    }

    /// The last lines of every node's log, for an error message.
    pub(super) fn log_tails(&self) -> String {
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
pub(super) fn cpu_ticks(pid: &str) -> Result<u64> {
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
pub(super) fn clock_ticks_per_second() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100)
}

/// A number from a `/proc/PID/status` line such as `Threads:  12`.
pub(super) fn status_field(pid: &str, name: &str) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| format!("read {path}: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("{path}: no {name}"))
}

pub(super) fn open_descriptors(pid: &str) -> Result<u64> {
    let path = format!("/proc/{pid}/fd");
    let entries = std::fs::read_dir(&path).map_err(|e| format!("list {path}: {e}"))?;
    Ok(entries.count() as u64)
}

/// CPU of several processes over an interval.
pub(super) struct CpuWindow {
    pub(super) pids: Vec<String>,
    pub(super) ticks: Vec<u64>,
    pub(super) started: Instant,
}

impl CpuWindow {
    pub(super) fn start(pids: Vec<String>) -> Result<CpuWindow> {
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
    pub(super) fn percent(&self) -> Result<Vec<f64>> {
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

pub(super) fn node_pids(cluster: &Cluster) -> Result<Vec<String>> {
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
pub(super) fn nodes_peak_rss(cluster: &Cluster) -> Result<u64> {
    let mut peak = 0;
    for pid in node_pids(cluster)? {
        peak = peak.max(status_field(&pid, "VmHWM:")? * 1024);
    }
    Ok(peak)
}

pub(super) fn quantile(sorted: &[u64], q: f64) -> u64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted.get(i).copied().unwrap_or(0)
}

pub(super) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

pub(super) fn list(values: &[f64]) -> String {
    let items: Vec<String> = values.iter().map(|v| format!("{v:.2}")).collect();
    format!("[{}]", items.join(","))
}

pub(super) fn key(stream: &str, shard: u32) -> ShardKey {
    ShardKey::new("bench", "default", stream, shard)
}

pub(super) fn client(cluster: &Cluster) -> Client {
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
pub(super) async fn wait_started(client: &Client, cluster: &mut Cluster) -> Result<()> {
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
pub(super) async fn create(client: &Client, keys: &[ShardKey]) -> Result<()> {
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
pub(super) async fn groups(client: &Client, addr: &str) -> Result<Vec<GroupStatus>> {
    client
        .status(addr)
        .await
        .map(|s| s.groups)
        .map_err(|e| format!("status of {addr}: {e}"))
}

/// Waits (bounded) until every node hosts `count` groups and each knows
/// a leader for all of them.
pub(super) async fn settle(client: &Client, cluster: &Cluster, count: usize) -> Result<()> {
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
