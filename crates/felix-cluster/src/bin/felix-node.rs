//! `felix-node`: one node of a felix cluster, serving replicated shards.
//!
//! ```text
//! felix-node --id 1 --dir /var/lib/felix/n1 --listen 127.0.0.1:7101 \
//!     --peer 2=127.0.0.1:7102 --peer 3=127.0.0.1:7103
//! ```
//!
//! Starting on a directory a node used before is a restart. SIGTERM or
//! Ctrl-C shut it down cleanly (every shard's clean-shutdown file
//! written). Log lines go to stderr; `RUST_LOG` filters them (default
//! `info,openraft=warn`: felix-cluster's own lines name elections, leader
//! and membership changes once per group).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use felix_cluster::{Node, NodeConfig, RaftTimings, TlsFiles};
use felix_storage::Retention;

/// One node of a felix cluster.
#[derive(Debug, Parser)]
#[command(name = "felix-node", version)]
struct Args {
    /// The node's id, unique in the cluster (not 0).
    #[arg(long)]
    id: u64,
    /// The node's store directory (created if missing).
    #[arg(long)]
    dir: PathBuf,
    /// The address to listen on; peers and clients reach the node there
    /// unless `--advertise` names another.
    #[arg(long, default_value = "127.0.0.1:7101")]
    listen: String,
    /// The address peers and clients reach this node at, when not
    /// `--listen` (e.g. listening on 0.0.0.0).
    #[arg(long, value_name = "HOST:PORT")]
    advertise: Option<String>,
    /// Another node, as ID=HOST:PORT (repeat for each).
    #[arg(long = "peer", value_parser = parse_peer)]
    peers: Vec<(u64, String)>,
    /// How often a leader sends heartbeats, in milliseconds.
    #[arg(long, default_value_t = RaftTimings::default().heartbeat_ms)]
    heartbeat_ms: u64,
    /// The shortest election timeout, in milliseconds.
    #[arg(long, default_value_t = RaftTimings::default().election_min_ms)]
    election_min_ms: u64,
    /// The longest election timeout, in milliseconds.
    #[arg(long, default_value_t = RaftTimings::default().election_max_ms)]
    election_max_ms: u64,
    /// Keep each shard at or below this many bytes of segment files (whole
    /// sealed segments go, on every replica, through the log). Default:
    /// no size limit.
    #[arg(long, value_name = "BYTES")]
    retention_bytes: Option<u64>,
    /// Delete a shard's sealed segments once every record in them is older
    /// than this many milliseconds (by the records' own timestamps).
    /// Default: no age limit.
    #[arg(long, value_name = "MS")]
    retention_ms: Option<u64>,
    /// How often each shard's leader applies the retention limits, in
    /// milliseconds (when one is set).
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    retention_check_ms: u64,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9101).
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<String>,
    /// This node's certificate chain (PEM): turns TLS on for every
    /// connection, both ways; peers and clients must then present a
    /// certificate chaining to `--tls-ca`. It must name this node's address
    /// and carry the DNS name node-ID.felix-cluster (ID: `--id`).
    #[arg(long, requires_all = ["tls_key", "tls_ca"], value_name = "PEM")]
    tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM).
    #[arg(long, requires = "tls_cert", value_name = "PEM")]
    tls_key: Option<PathBuf>,
    /// The CA certificate(s) trusted for peers and clients (PEM).
    #[arg(long, requires = "tls_cert", value_name = "PEM")]
    tls_ca: Option<PathBuf>,
}

fn parse_peer(text: &str) -> Result<(u64, String), String> {
    let (id, addr) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: expected ID=HOST:PORT"))?;
    let id: u64 = id.parse().map_err(|_| format!("{id:?}: not a node id"))?;
    if addr.is_empty() {
        return Err(format!("{text:?}: no address after '='"));
    }
    Ok((id, addr.to_owned()))
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.id == 0 {
        return Err("node id 0 is reserved; use 1 or more".into());
    }
    let mut config = NodeConfig::new(args.id, args.dir.clone(), args.listen.clone());
    config.advertise = args.advertise.clone();
    config.peers = args.peers.iter().cloned().collect::<BTreeMap<_, _>>();
    config.timings = RaftTimings {
        heartbeat_ms: args.heartbeat_ms,
        election_min_ms: args.election_min_ms,
        election_max_ms: args.election_max_ms,
    };
    if args.retention_bytes.is_some() || args.retention_ms.is_some() {
        config.retention = Retention {
            max_bytes: args.retention_bytes,
            max_age: args.retention_ms.map(Duration::from_millis),
            interval: Some(Duration::from_millis(args.retention_check_ms)),
        };
    }
    if let (Some(cert), Some(key), Some(ca)) = (
        args.tls_cert.clone(),
        args.tls_key.clone(),
        args.tls_ca.clone(),
    ) {
        config.tls = Some(TlsFiles { cert, key, ca });
    }
    if let Some(addr) = &args.metrics_addr {
        let bound = felix_cluster::serve_prometheus(addr).await?;
        tracing::info!(addr = %bound, "serving Prometheus metrics");
    }
    let node = Node::start(config).await?;
    // The line a supervisor (or a test) waits for.
    println!("felix-node {} listening on {}", node.id(), node.addr());
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: shutting down"),
    }
    node.shutdown().await?;
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn")),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("felix-node: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("felix-node: {e}");
            ExitCode::FAILURE
        }
    }
}
