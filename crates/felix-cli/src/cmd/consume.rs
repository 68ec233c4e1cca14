//! `felix-store consume`: read a replicated shard's committed records,
//! from any replica.
//!
//! Without `--node`, from the first node named with `--cluster` that
//! answers; with `--node ID`, from that node only (its address found by
//! asking the nodes' status). Each record is printed as
//! `OFFSET<TAB>TIMESTAMP<TAB>PAYLOAD` (the payload as UTF-8, invalid bytes
//! replaced), or with `--json` as `{"offset":…,"timestamp_micros":…,
//! "payload":"BASE64"}`. It stops at the committed end, or with `--follow`
//! waits for more until interrupted (or `--max-records`).

use std::time::Duration;

use base64::Engine;
use felix_cluster::Client;
use serde_json::json;

use crate::cmd::cluster_args::{ClusterArgs, KeyArg};
use crate::error::{CliError, Outcome};
use crate::output::Out;

/// How long one read waits for a record with `--follow`.
const FOLLOW_WAIT: Duration = Duration::from_secs(1);

/// Arguments of `consume`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    key: KeyArg,
    /// The first offset to read.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Read from this node (by id) only.
    #[arg(long)]
    node: Option<u64>,
    /// Wait for new records at the end instead of stopping.
    #[arg(long)]
    follow: bool,
    /// Stop after this many records.
    #[arg(long)]
    max_records: Option<u64>,
    /// About how many bytes one read asks for.
    #[arg(long, default_value_t = 1 << 20)]
    max_bytes: u64,
    /// Print one JSON object per record, the payload in base64.
    #[arg(long)]
    json: bool,
}

/// The address of node `node`, from the status of the nodes named.
async fn node_addr(client: &Client, seeds: &[String], node: u64) -> Result<String, CliError> {
    for addr in seeds {
        if let Ok(status) = client.status(addr).await
            && status.node == node
        {
            return Ok(addr.clone());
        }
    }
    Err(CliError::Usage(format!(
        "--node {node}: none of the nodes named with --cluster ({}) is node {node}",
        seeds.join(",")
    )))
}

/// Runs `consume`.
pub(crate) fn run(args: Args, out: &mut Out) -> Result<Outcome, CliError> {
    let key = args.key.key()?;
    let seeds = args.cluster.cluster.clone();
    args.cluster.run(|client| async move {
        let wait = if args.follow {
            FOLLOW_WAIT
        } else {
            Duration::ZERO
        };
        // From one node, its reader keeps the next read on its way.
        let mut reader = match args.node {
            Some(node) => {
                let addr = node_addr(&client, &seeds, node).await?;
                Some(client.reader_at(&addr, &key, args.from, args.max_bytes, wait))
            }
            None => None,
        };
        let mut from = args.from;
        let mut printed = 0u64;
        loop {
            let batch = match &mut reader {
                Some(reader) => reader.next_batch().await?,
                None => client.read(&key, from, args.max_bytes, wait).await?,
            };
            for record in batch.records() {
                if args.max_records.is_some_and(|max| printed >= max) {
                    return Ok(Outcome::Success);
                }
                if args.json {
                    out.json(&json!({
                        "offset": record.offset,
                        "timestamp_micros": record.timestamp_micros,
                        "payload": base64::engine::general_purpose::STANDARD.encode(record.payload),
                    }))?;
                } else {
                    out.line(format_args!(
                        "{}\t{}\t{}",
                        record.offset,
                        record.timestamp_micros,
                        String::from_utf8_lossy(record.payload)
                    ))?;
                }
                printed += 1;
            }
            out.flush()?;
            let done = args.max_records.is_some_and(|max| printed >= max);
            if done || (!args.follow && batch.next == from) {
                return Ok(Outcome::Success);
            }
            from = batch.next;
        }
    })
}
