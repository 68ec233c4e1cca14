//! `felix-store`: the operator tool for felix shard directories.
//!
//! One binary for the person at the console at 3am (`verify`, `recover`,
//! `dump`, `stat`, and for a tiered shard's remote copy `--remote` and
//! `manifest`), for scripts (`--json`: one JSON object per line), and
//! for benchmarks and crash tests (`write`, `bench`, which speak the
//! reference implementation's flags and JSON lines so one script drives
//! both), `produce`, `consume` and `cluster` for a cluster of `felix-node`
//! processes (through felix-cluster's client), plus `demo`, the README's
//! first command.
//!
//! Exit status is the contract scripts rely on. Its meanings are defined
//! in one place, `error::EXIT_STATUS`, which `felix-store --help` prints and
//! the README's "Exit status" section quotes; `Outcome` and `CliError` (in
//! `error.rs`) are what map to it.
//!
//! Invariant: this crate has no format or repair logic of its own. Every
//! byte it reads or writes goes through `felix-format`, `felix-segment`,
//! `felix-recovery` and `felix-storage`; it only chooses what to call and
//! how to print the result.

mod cmd;
mod error;
mod output;
mod pattern;
mod report;
mod target;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::{CliError, EXIT_STATUS, Outcome};
use crate::output::Out;

/// felix-store: verify, recover, inspect and exercise felix shard directories.
///
/// A tiered shard's remote copy is named with `--remote URL`: `file:///DIR`
/// (a local-directory object store) or `s3://BUCKET[/PREFIX]` with
/// `--s3-endpoint URL`; S3 credentials come from AWS_ACCESS_KEY_ID and
/// AWS_SECRET_ACCESS_KEY, the region from AWS_REGION (default us-east-1).
#[derive(Debug, Parser)]
#[command(name = "felix-store", version, about, long_about, after_help = EXIT_STATUS)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a store, append from several threads, crash it and recover.
    Demo(cmd::demo::Args),
    /// Check shards without modifying a byte; exit 1 if one would not open.
    Verify(cmd::verify::Args),
    /// Open a shard the way the store does: repair what policy allows.
    Recover(cmd::recover::Args),
    /// Print records (or an index) with their positions and checksums.
    Dump(cmd::dump::Args),
    /// Per-segment figures: offsets, records, bytes, state, index.
    Stat(cmd::stat::Args),
    /// List, fetch or check a tiered shard's remote manifest versions.
    Manifest(cmd::manifest::Args),
    /// Append records in the reference pattern, printing acks (crash tests).
    Write(cmd::write::Args),
    /// Measure append throughput and latency (JSON, like the reference tool).
    Bench(cmd::bench::Args),
    /// Append records to a replicated shard through a cluster's leader.
    Produce(cmd::produce::Args),
    /// Read a replicated shard's committed records from any replica.
    Consume(cmd::consume::Args),
    /// A cluster's status, and its shards' members.
    Cluster(cmd::cluster::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut out = Out::stdout();
    let result = match cli.command {
        Command::Demo(args) => cmd::demo::run(args, &mut out),
        Command::Verify(args) => cmd::verify::run(args, &mut out),
        Command::Recover(args) => cmd::recover::run(args, &mut out),
        Command::Dump(args) => cmd::dump::run(args, &mut out),
        Command::Stat(args) => cmd::stat::run(args, &mut out),
        Command::Manifest(args) => cmd::manifest::run(args, &mut out),
        Command::Write(args) => cmd::write::run(args, &mut out),
        Command::Bench(args) => cmd::bench::run(args, &mut out),
        Command::Produce(args) => cmd::produce::run(args, &mut out),
        Command::Consume(args) => cmd::consume::run(args, &mut out),
        Command::Cluster(args) => cmd::cluster::run(args, &mut out),
    };
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Damage) => ExitCode::from(1),
        // Each failure was reported where it happened.
        Ok(Outcome::Failed) => ExitCode::from(2),
        // A reader that went away (`felix-store dump … | head`) is not an
        // error worth a message: it saw what it wanted.
        Err(CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("felix-store: {err}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap's own consistency checks (conflicting names, bad defaults),
    /// which otherwise only fire when the faulty flag is used.
    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
