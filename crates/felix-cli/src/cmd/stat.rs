//! `felix-store stat`: per segment, its id, offsets, records, bytes, whether
//! it is sealed or the active (newest) one, and whether its index can be
//! used; then the shard's totals.
//!
//! Figures come from `felix_recovery::inspect` (read-only), so they are the
//! shard as a default open would leave it: a torn tail is already counted
//! out, and damage that would stop the open is listed after the table.
//! With `--remote`, a tiered shard's remote copy follows: the manifest in
//! force, the remote offsets and each remote segment.

use std::path::PathBuf;

use felix_recovery::{IndexCheck, InspectOptions, Inspection, SegmentSummary, inspect};
use serde_json::{Value, json};

use crate::cmd::remote::{self, Found, RemoteArgs};
use crate::error::{CliError, Outcome};
use crate::output::{Out, Progress, opt, opt_text, progress_allowed, shell_quote};
use crate::report::{self, Verdict};
use crate::target::{ShardDir, resolve};

/// Arguments of `stat`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A shard directory, a root of shard directories, or one segment file
    /// (which shows its whole shard).
    path: PathBuf,
    /// Print one JSON object per shard per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    remote: RemoteArgs,
}

/// Runs `stat`.
pub(crate) fn run(args: Args, out: &mut Out) -> Result<Outcome, CliError> {
    let shards = resolve(&args.path)?.shards();
    let opened = args.remote.open()?;
    let bar = Progress::bar(
        shards.len() as u64,
        "reading shards",
        progress_allowed(args.json) && shards.len() > 1,
    );
    // Every index entry is checked, as `verify` and `recover` check them,
    // so the three agree on which indexes are rebuilt.
    let options = InspectOptions {
        index_check: IndexCheck::EveryEntry,
        ..InspectOptions::default()
    };
    let mut outcome = Outcome::Success;
    for shard in &shards {
        bar.set_message(shard.name.clone());
        let inspection = match inspect(
            &felix_io::FileSystem::os(),
            &shard.dir,
            &shard.name,
            &options,
        ) {
            Ok(inspection) => inspection,
            Err(err) => {
                // Reported, and the other shards still shown.
                bar.suspend(|| report::unreadable(out, shard, &err, args.json))?;
                outcome = outcome.and(Outcome::Failed);
                bar.inc(1);
                continue;
            }
        };
        // The remote copy, named by the key the shard's key file holds.
        // Records an offload deleted locally that it does not hold are
        // damage.
        let found = opened.as_ref().map(|o| {
            let found = Found::load(o, inspection.key.as_ref());
            let gap = remote::held_nowhere(&found, &inspection);
            (o, found, gap)
        });
        bar.suspend(|| {
            if args.json {
                let mut line = json_line(shard, &inspection);
                if let (Value::Object(map), Some((o, found, gap))) = (&mut line, &found) {
                    map.insert("remote".into(), remote::json(o, found, gap.as_ref(), None));
                }
                out.json(&line)?;
            } else {
                print_human(out, shard, &inspection)?;
                if let Some((o, found, gap)) = &found {
                    out.line(remote::summary_lines(o, found, gap.as_ref()))?;
                    if let Found::Manifest(m) = found {
                        remote::print_segments(out, m)?;
                    }
                }
            }
            match &found {
                Some((o, found, _)) => remote::tell_failures(out, &shard.name, o, found, &[]),
                None => Ok(()),
            }
        })?;
        outcome = outcome.and(Verdict::of(&inspection).outcome());
        if let Some((_, found, gap)) = &found {
            outcome = outcome.and(found.outcome());
            if gap.is_some() {
                outcome = outcome.and(Outcome::Damage);
            }
        }
        bar.inc(1);
    }
    Ok(outcome)
}

fn state(segment: &SegmentSummary) -> &'static str {
    match (segment.removed, segment.newest) {
        (true, _) => "abandoned",
        (false, true) => "active",
        (false, false) => "sealed",
    }
}

fn index_state(segment: &SegmentSummary) -> &'static str {
    if segment.removed {
        "-"
    } else if segment.index_ok {
        "ok"
    } else {
        "rebuild"
    }
}

fn json_line(shard: &ShardDir, inspection: &Inspection) -> Value {
    let mut map = report::shard_fields(&shard.name, inspection);
    map.insert(
        "bytes".into(),
        inspection
            .segments
            .iter()
            .map(|s| s.file_len)
            .sum::<u64>()
            .into(),
    );
    map.insert(
        "per_segment".into(),
        inspection
            .segments
            .iter()
            .map(|s| {
                json!({
                    "id": s.id,
                    "base_offset": opt(s.base_offset),
                    "next_offset": opt(s.next_offset),
                    "records": opt(s.records()),
                    "bytes": s.file_len,
                    "valid_bytes": s.valid_len,
                    "state": state(s),
                    "index": index_state(s),
                })
            })
            .collect(),
    );
    // Where the log begins, when a log-start file moved it past the first
    // segment's base offset (`null` without one).
    map.insert(
        "log_start".into(),
        opt(inspection.log_start.and_then(|_| inspection.start_offset())),
    );
    // What moved it: "deletion" (a deletion of records or a reset) or
    // "offload" (`null` without a log-start file).
    map.insert(
        "log_start_moved_by".into(),
        inspection.log_start.map_or(Value::Null, |s| {
            crate::report::moved_by_json(s.moved_by).into()
        }),
    );
    map.insert("findings".into(), inspection.findings.len().into());
    map.insert("verdict".into(), Verdict::of(inspection).as_str().into());
    Value::Object(map)
}

fn print_human(out: &mut Out, shard: &ShardDir, inspection: &Inspection) -> Result<(), CliError> {
    out.line(format!("shard {} ({})", shard.name, shard.dir.display()))?;
    if let Some(key) = report::key_line(inspection) {
        out.line(key)?;
    }
    if let Some(start) = report::start_line(inspection) {
        out.line(start)?;
    }
    out.line(format!(
        "  {:<20}  {:>10}  {:>10}  {:>10}  {:>12}  {:<9}  {}",
        "segment", "base", "next", "records", "bytes", "state", "index"
    ))?;
    for s in &inspection.segments {
        out.line(format!(
            "  {:<20}  {:>10}  {:>10}  {:>10}  {:>12}  {:<9}  {}",
            format!("{:020}", s.id),
            opt_text(s.base_offset),
            opt_text(s.next_offset),
            opt_text(s.records()),
            s.file_len,
            state(s),
            index_state(s),
        ))?;
    }
    let bytes: u64 = inspection.segments.iter().map(|s| s.file_len).sum();
    let segments = inspection.live_segments().count();
    out.line(format!(
        "  total: {segments} segment{}, offsets {}..{}, {} records, {bytes} bytes",
        if segments == 1 { "" } else { "s" },
        opt_text(inspection.start_offset()),
        opt_text(inspection.next_offset()),
        opt_text(report::live_records(inspection)),
    ))?;
    if !inspection.findings.is_empty() {
        let verdict = Verdict::of(inspection);
        out.line(format!(
            "  damage: {} finding{} ({}); details: `felix-store verify {}`",
            inspection.findings.len(),
            if inspection.findings.len() == 1 {
                ""
            } else {
                "s"
            },
            verdict.as_str().replace('_', " "),
            shell_quote(&shard.dir)
        ))?;
    }
    Ok(())
}
