//! `felix-store cluster`: a cluster's state, and its shards' members.
//!
//! `status` asks every node named with `--cluster` for every group it
//! hosts: its role, the leader it knows, the term, the commit index, the
//! last entry applied, its offsets, and on a leader each follower's lag in
//! entries. `create-shard`, `add-node` and `remove-node` change which
//! nodes replicate a shard; a new node's data moves by replication alone.
//! `delete-records` moves a shard's log start on every replica, through
//! its log.

use felix_cluster::wire::{GroupStatus, NodeStatus};
use felix_format::ShardKey;
use serde_json::json;

use crate::cmd::cluster_args::{ClusterArgs, KeyArg};
use crate::error::{CliError, Outcome};
use crate::output::Out;

/// Arguments of `cluster`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Every node's groups: role, leader, term, commit index, lag.
    Status {
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Print JSON lines, one per node and group.
        #[arg(long)]
        json: bool,
    },
    /// Create a shard replicated on the given nodes.
    CreateShard {
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        key: KeyArg,
        /// The replicas, by node id (ids the nodes know addresses of).
        #[arg(long, value_delimiter = ',', required = true, value_name = "ID[,ID…]")]
        replicas: Vec<u64>,
    },
    /// Add a node to a shard: a learner until caught up, then a voter.
    AddNode {
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        key: KeyArg,
        /// The node's id.
        #[arg(long)]
        node: u64,
        /// Where it listens, HOST:PORT.
        #[arg(long)]
        addr: String,
    },
    /// Remove a node from a shard's replicas.
    RemoveNode {
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        key: KeyArg,
        /// The node's id.
        #[arg(long)]
        node: u64,
    },
    /// Delete a shard's records before an offset, on every replica.
    DeleteRecords {
        #[command(flatten)]
        cluster: ClusterArgs,
        #[command(flatten)]
        key: KeyArg,
        /// The new log start: every record below it goes.
        #[arg(long, value_name = "OFFSET")]
        before: u64,
    },
}

/// Runs `cluster`.
pub(crate) fn run(args: Args, out: &mut Out) -> Result<Outcome, CliError> {
    match args.command {
        Command::Status { cluster, json } => status(&cluster, json, out),
        Command::CreateShard {
            cluster,
            key,
            replicas,
        } => {
            let key = key.key()?;
            cluster.run(|client| async move {
                client.create_shard(&key, replicas.clone()).await?;
                out.line(format_args!("created {key} on nodes {}", ids(&replicas)))?;
                Ok(Outcome::Success)
            })
        }
        Command::AddNode {
            cluster,
            key,
            node,
            addr,
        } => {
            let key = key.key()?;
            cluster.run(|client| async move {
                client.add_node(&key, node, &addr).await?;
                out.line(format_args!("node {node} ({addr}) is a voter of {key}"))?;
                Ok(Outcome::Success)
            })
        }
        Command::DeleteRecords {
            cluster,
            key,
            before,
        } => {
            let key = key.key()?;
            cluster.run(|client| async move {
                let start = client.delete_records_before(&key, before).await?;
                out.line(format_args!("{key}: log start {start} committed; each replica deletes the records below it as it applies it"))?;
                Ok(Outcome::Success)
            })
        }
        Command::RemoveNode { cluster, key, node } => {
            let key = key.key()?;
            cluster.run(|client| async move {
                client.remove_node(&key, node).await?;
                out.line(format_args!("node {node} removed from {key}"))?;
                Ok(Outcome::Success)
            })
        }
    }
}

fn ids(ids: &[u64]) -> String {
    ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

fn status(cluster: &ClusterArgs, json: bool, out: &mut Out) -> Result<Outcome, CliError> {
    cluster.run(|client| async move {
        let mut outcome = Outcome::Success;
        for addr in &cluster.cluster {
            match client.status(addr).await {
                Ok(status) => print_status(addr, &status, json, out)?,
                Err(e) => {
                    // One node down is what status is for: say so, go on.
                    outcome = Outcome::Failed;
                    if json {
                        out.json(&json!({"addr": addr, "error": e.to_string()}))?;
                    } else {
                        out.line(format_args!("{addr}: {e}"))?;
                    }
                }
            }
        }
        Ok(outcome)
    })
}

fn print_status(
    addr: &str,
    status: &NodeStatus,
    json: bool,
    out: &mut Out,
) -> Result<(), CliError> {
    if !json {
        out.line(format_args!(
            "node {} at {addr}: {} groups, {} peer connections",
            status.node,
            status.groups.len(),
            status.peer_connections
        ))?;
    }
    for group in &status.groups {
        let key = ShardKey::from(&group.shard);
        if json {
            out.json(&group_json(status.node, addr, &key, group))?;
        } else {
            out.line(group_line(&key, group))?;
        }
    }
    Ok(())
}

fn opt(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn group_line(key: &ShardKey, g: &GroupStatus) -> String {
    let lag = if g.lag.is_empty() {
        String::new()
    } else {
        let lags: Vec<String> = g.lag.iter().map(|(n, l)| format!("{n}:{l}")).collect();
        format!(" lag {}", lags.join(","))
    };
    let quiet = if g.quiet { " quiet" } else { "" };
    format!(
        "  {key} {} term {} leader {} commit {} applied {} offsets {}..{} (written {}) voters {}{lag}{quiet}",
        g.role,
        g.term,
        opt(g.leader),
        opt(g.commit_index),
        opt(g.last_applied),
        g.offsets.base,
        g.offsets.committed,
        g.offsets.written,
        ids(&g.voters),
    )
}

fn group_json(node: u64, addr: &str, key: &ShardKey, g: &GroupStatus) -> serde_json::Value {
    let lag: serde_json::Map<String, serde_json::Value> = g
        .lag
        .iter()
        .map(|(n, l)| (n.to_string(), json!(l)))
        .collect();
    json!({
        "node": node,
        "addr": addr,
        "shard": key.to_string(),
        "role": g.role,
        "term": g.term,
        "leader": g.leader,
        "commit_index": g.commit_index,
        "last_applied": g.last_applied,
        "base_offset": g.offsets.base,
        "committed_offset": g.offsets.committed,
        "written_offset": g.offsets.written,
        "voters": g.voters,
        "learners": g.learners,
        "lag": lag,
        "quiet": g.quiet,
    })
}
