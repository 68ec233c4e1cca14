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

mod nodes;
mod runs;

use nodes::*;
use runs::*;

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
