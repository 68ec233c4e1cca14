//! `felix-store verify`: what a default open of each shard would find and
//! do, without modifying a byte.
//!
//! Everything goes through `felix_recovery::inspect`, which opens every file
//! read-only, so `verify` is safe on a shard a live writer holds (it may then
//! see a tail still being written) and on a read-only copy.
//!
//! A PATH naming one segment file verifies that segment's whole shard:
//! whether damage is repairable depends on whether a later segment exists,
//! so a segment cannot be judged alone.

use std::path::PathBuf;

use felix_recovery::{IndexCheck, InspectOptions, Inspection, inspect};
use serde_json::Value;

use crate::error::{CliError, Outcome};
use crate::output::{Out, Progress, progress_allowed};
use crate::report::{self, Verdict};
use crate::target::{Resolved, ShardDir, resolve};

/// Arguments of `verify`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A shard directory, a root of shard directories, or one segment file
    /// (which verifies its whole shard).
    path: PathBuf,
    /// Print one JSON object per shard per line.
    #[arg(long)]
    json: bool,
    /// Checksum every record of every segment. By default sealed segments get
    /// a header check, a walk of their record headers (which checks every
    /// index entry and the offsets) and no payload checksums; the newest
    /// segment is always checked in full.
    #[arg(long)]
    full: bool,
}

/// Runs `verify`.
pub(crate) fn run(args: Args, out: &mut Out) -> Result<Outcome, CliError> {
    let resolved = resolve(&args.path)?;
    let shards = resolved.shards();
    if let Resolved::File { shard, id, kind } = &resolved
        && !args.json
    {
        out.line(format!(
            "{} is {} {id} of shard {}; verifying the whole shard, since whether damage is repairable depends on the segments after it",
            args.path.display(),
            match kind {
                felix_format::FileKind::Segment => "segment",
                felix_format::FileKind::Index => "the index of segment",
                felix_format::FileKind::TimeIndex => "the time index of segment",
            },
            shard.name
        ))?;
    }
    let options = InspectOptions {
        full_verify: args.full,
        // What `recover` checks, so the two agree on every index.
        index_check: IndexCheck::EveryEntry,
        ..InspectOptions::default()
    };
    let progress_on = progress_allowed(args.json);
    let bar = if shards.len() > 1 {
        Progress::bar(shards.len() as u64, "verifying shards", progress_on)
    } else {
        Progress::spinner(format!("verifying {}", args.path.display()), progress_on)
    };
    let mut outcome = Outcome::Success;
    let mut verdicts = Vec::with_capacity(shards.len());
    let mut unreadable = 0;
    for shard in &shards {
        bar.set_message(shard.name.clone());
        // A shard that cannot be read is reported and the rest still
        // checked: the status is the worst of them all.
        let inspection = match inspect(
            &felix_io::FileSystem::os(),
            &shard.dir,
            &shard.name,
            &options,
        ) {
            Ok(inspection) => inspection,
            Err(err) => {
                bar.suspend(|| report::unreadable(out, shard, &err, args.json))?;
                outcome = outcome.and(Outcome::Failed);
                unreadable += 1;
                bar.inc(1);
                continue;
            }
        };
        let verdict = Verdict::of(&inspection);
        bar.suspend(|| {
            if args.json {
                out.json(&json_line(shard, &inspection, verdict))
            } else {
                print_human(out, shard, &inspection, verdict)
            }
        })?;
        outcome = outcome.and(verdict.outcome());
        verdicts.push(verdict);
        bar.inc(1);
    }
    bar.finish();
    if !args.json && shards.len() > 1 {
        let count = |v: Verdict| verdicts.iter().filter(|&&x| x == v).count();
        out.line(format!(
            "{} shards: {} ok, {} need repair, {} refused by default, {} refused{}",
            shards.len(),
            count(Verdict::Ok),
            count(Verdict::NeedsRepair),
            count(Verdict::RefusedByDefault),
            count(Verdict::Refused),
            if unreadable > 0 {
                format!(", {unreadable} could not be read")
            } else {
                String::new()
            },
        ))?;
    }
    Ok(outcome)
}

/// The `--json` line for one shard.
fn json_line(shard: &ShardDir, inspection: &Inspection, verdict: Verdict) -> Value {
    let mut map = report::shard_findings(&shard.name, inspection);
    map.insert("verdict".into(), verdict.as_str().into());
    map.insert("dir".into(), shard.dir.display().to_string().into());
    Value::Object(map)
}

fn print_human(
    out: &mut Out,
    shard: &ShardDir,
    inspection: &Inspection,
    verdict: Verdict,
) -> Result<(), CliError> {
    out.line(report::summary_line(&shard.name, inspection))?;
    if let Some(key) = report::key_line(inspection) {
        out.line(key)?;
    }
    if let Some(start) = report::start_line(inspection) {
        out.line(start)?;
    }
    for finding in &inspection.findings {
        out.line(report::finding_line(finding))?;
    }
    for note in report::notes(inspection) {
        out.line(format!("  note: {note}"))?;
    }
    out.line(format!("  {}", verdict.human(&shard.dir)))
}
