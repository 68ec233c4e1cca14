//! Committed entries per second and commit latency through openraft: a
//! three-node cluster in one process (an in-process network), each node's
//! log on felix-raft or on the `raft-log` crate, the state machine the
//! tests' one. `cargo xtask bench` runs it (row `raft-commit`) and prints
//! one JSON line per run:
//!
//! ```text
//! cargo run --release -p felix-raft --example raft_bench -- felix --dir /tmp/rb \
//!     --entries 20000 --writers 64
//! cargo run --release -p felix-raft --example raft_bench -- raft-log --dir /tmp/rb \
//!     --entries 20000 --writers 64 --flush-batch-wait-us 0
//! ```
//!
//! `--writers` client writes are in flight at once, each writer waiting for
//! its write to be applied on the leader (committed) before the next; a
//! write's latency is its `client_write` from call to return. Payloads are
//! 128 bytes. `--dir` is emptied first and removed at the end.

#[path = "../../tests/common/net.rs"]
#[allow(dead_code, unreachable_pub)]
mod net;
mod raft_log_store;
#[path = "../../tests/common/sm.rs"]
#[allow(dead_code, unreachable_pub)]
mod sm;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use felix_raft::{FelixLogStore, Request, TypeConfig};
use net::{Node, Router};
use openraft::async_runtime::WatchReceiver;
use openraft::storage::RaftLogStorage;
use openraft::{BasicNode, Config, Raft, SnapshotPolicy};
use raft_log_store::RaftLogStore;
use sm::StateMachine;

/// The payload of every write.
const PAYLOAD: usize = 128;
/// Writes before the timed ones (elections settled, files created).
const WARMUP: u64 = 500;

/// What the command line asks for.
struct Args {
    log: String,
    dir: PathBuf,
    entries: u64,
    writers: u64,
    flush_batch_wait: Duration,
}

fn parse() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let log = it
        .next()
        .ok_or("usage: raft_bench felix|raft-log --dir DIR ...")?;
    let mut args = Args {
        log,
        dir: PathBuf::new(),
        entries: 20_000,
        writers: 64,
        flush_batch_wait: Duration::from_millis(1),
    };
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let number = || value.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--dir" => args.dir = PathBuf::from(&value),
            "--entries" => args.entries = number()?,
            "--writers" => args.writers = number()?.max(1),
            "--flush-batch-wait-us" => args.flush_batch_wait = Duration::from_micros(number()?),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if args.dir.as_os_str().is_empty() {
        return Err("--dir is required".into());
    }
    Ok(args)
}

fn config() -> Arc<Config> {
    Arc::new(
        Config {
            heartbeat_interval: 100,
            election_timeout_min: 1_000,
            election_timeout_max: 2_000,
            snapshot_policy: SnapshotPolicy::Never,
            ..Config::default()
        }
        .validate()
        .expect("a valid config"),
    )
}

async fn start<L>(router: &Router, id: u64, log: L) -> Node
where
    L: RaftLogStorage<TypeConfig>,
{
    let raft = Raft::new(id, config(), router.clone(), log, StateMachine::default())
        .await
        .expect("raft starts");
    router.add(id, raft.clone());
    raft
}

async fn wait_leader(raft: &Node) {
    let deadline = Instant::now() + Duration::from_secs(20);
    // Node 1 leads once it is elected and a quorum acknowledged it (its
    // lease, which openraft 0.10 asks of a leader before it takes writes):
    // an entry of its own term applied says so.
    loop {
        let m = raft.metrics().borrow_watched().clone();
        let acknowledged = m
            .last_applied
            .is_some_and(|l| l.leader_id.term == m.current_term);
        if m.current_leader == Some(1) && acknowledged {
            return;
        }
        assert!(Instant::now() < deadline, "no leader elected");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Writes `count` entries through `raft`, `writers` at a time; every
/// write's latency in microseconds.
async fn write(raft: &Node, count: u64, writers: u64) -> Vec<u64> {
    let mut tasks = Vec::new();
    for w in 0..writers {
        let raft = raft.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut n = w;
            while n < count {
                let mut payload = vec![0u8; PAYLOAD];
                payload[..8].copy_from_slice(&n.to_be_bytes());
                let t = Instant::now();
                raft.client_write(Request::new(payload))
                    .await
                    .expect("a write commits");
                latencies.push(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
                n += writers;
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("a writer"));
    }
    all
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted.get(i).copied().unwrap_or(0)
}

async fn run(args: &Args) -> String {
    let router = Router::default();
    let node_dir = |id: u64| args.dir.join(format!("node-{id}"));
    let mut rafts = Vec::new();
    // Node 1's felix log, to count the leader's syncs.
    let mut leader_log = None;
    for id in 1..=3 {
        let raft = match args.log.as_str() {
            "felix" => {
                let log: FelixLogStore<TypeConfig> = FelixLogStore::options(node_dir(id))
                    .open()
                    .expect("felix log opens");
                if id == 1 {
                    leader_log = Some(log.clone());
                }
                start(&router, id, log).await
            }
            _ => {
                let log = RaftLogStore::open(&node_dir(id), args.flush_batch_wait)
                    .expect("raft-log opens");
                start(&router, id, log).await
            }
        };
        rafts.push(raft);
    }
    let leader = rafts[0].clone();
    leader
        .initialize(BTreeMap::from(
            [1, 2, 3].map(|id| (id, BasicNode::default())),
        ))
        .await
        .expect("cluster initializes");
    wait_leader(&leader).await;
    write(&leader, WARMUP, args.writers).await;
    let leader_counts = || {
        leader_log.as_ref().map(|log| {
            let stats = log.shard().stats();
            (stats.records_appended, stats.syncs)
        })
    };
    let before = leader_counts();
    let started = Instant::now();
    let mut latencies = write(&leader, args.entries, args.writers).await;
    let elapsed = started.elapsed().as_secs_f64();
    // Entries the leader appended per `fdatasync` of its log over the timed
    // writes (blank and membership entries included): how many appends one
    // sync covered. raft-log counts no syncs, so it reports none.
    let entries_per_leader_sync = match (before, leader_counts()) {
        (Some((records_0, syncs_0)), Some((records_1, syncs_1))) if syncs_1 > syncs_0 => {
            format!(
                "{:.1}",
                (records_1 - records_0) as f64 / (syncs_1 - syncs_0) as f64
            )
        }
        _ => "null".to_string(),
    };
    for raft in rafts {
        raft.shutdown().await.expect("raft stops");
    }
    latencies.sort_unstable();
    let rate = args.entries as f64 / elapsed;
    format!(
        "{{\"log\":\"{}\",\"records_per_second\":{rate:.1},\"bytes_per_second\":{:.1},\
         \"elapsed_seconds\":{elapsed:.4},\"peak_rss_bytes\":{},\"latency_us\":{{\"p50\":{},\"p99\":{},\"max\":{}}},\
         \"notes\":{{\"writers\":{},\"entries\":{},\"flush_batch_wait_us\":{},\"entries_per_leader_sync\":{}}}}}",
        args.log,
        rate * PAYLOAD as f64,
        peak_rss_bytes(),
        quantile(&latencies, 0.5),
        quantile(&latencies, 0.99),
        latencies.last().copied().unwrap_or(0),
        args.writers,
        args.entries,
        if args.log == "felix" {
            "null".to_string()
        } else {
            args.flush_batch_wait.as_micros().to_string()
        },
        entries_per_leader_sync,
    )
}

/// The process's peak resident set (`VmHWM`), in bytes.
fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}

fn clear(dir: &Path) {
    if dir.exists() {
        std::fs::remove_dir_all(dir).expect("remove the bench directory");
    }
}

fn main() {
    let args = match parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    if !matches!(args.log.as_str(), "felix" | "raft-log") {
        eprintln!("the log is felix or raft-log, not {}", args.log);
        std::process::exit(2);
    }
    clear(&args.dir);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let line = runtime.block_on(run(&args));
    drop(runtime);
    clear(&args.dir);
    println!("{line}");
}
