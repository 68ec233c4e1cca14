//! `felix-store recover`: what opening a shard does — repair what the policy
//! allows and rebuild indexes — as a separate, reported step.
//!
//! The shard is inspected read-only first, checking every entry of every
//! index against the records (an open checks only what it must, and leaves
//! a wrong entry in a sealed index to the read that meets it); `recover`
//! rebuilds every index that fails that check. Damage the policy may not repair
//! ends the command with exit 1 having modified nothing (not even a lock
//! file). Otherwise, unless `--dry-run`, the shard's writer lock is taken,
//! and the lock of the directory above it, which a running store holds for
//! its whole life (so a live writer's tail is never cut under it, even while
//! its store has the shard's files closed); the shard is inspected again
//! under the locks, and `felix_recovery::repair` carries out the plan.

use std::path::PathBuf;

use felix_io::FileSystem;
use felix_recovery::{
    Action, IndexCheck, InspectOptions, Inspection, RecoveryError, RepairClass, RepairPolicy,
    ShardLock, StoreLock, inspect, repair,
};
use serde_json::{Value, json};

use crate::error::{CliError, Outcome};
use crate::output::{Out, Progress, progress_allowed, shell_quote};
use crate::report::{self};
use crate::target::{Resolved, ShardDir, resolve};

/// Arguments of `recover`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The shard directory (holding `*.log` files).
    shard_dir: PathBuf,
    /// Also truncate damage that may be rot of an acknowledged record
    /// (checksum failures, out-of-order offsets, impossible lengths) when it
    /// is confined to the newest segment's tail. Those records are lost.
    #[arg(long)]
    repair_checksum_tail: bool,
    /// Print what would be done, and do nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print one JSON object (one line).
    #[arg(long)]
    json: bool,
    /// Spacing of the entries of rebuilt indexes.
    #[arg(long, default_value_t = InspectOptions::default().index_spacing_bytes)]
    index_spacing_bytes: u64,
}

impl Args {
    /// The repair policy `--repair-checksum-tail` chooses.
    fn policy(&self) -> RepairPolicy {
        if self.repair_checksum_tail {
            RepairPolicy::ChecksumTail
        } else {
            RepairPolicy::Default
        }
    }
}

/// How `recover` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Nothing to repair.
    Clean,
    /// The plan was carried out.
    Repaired,
    /// `--dry-run`: the plan was printed.
    WouldRepair,
    /// Damage outside the policy: nothing was modified.
    Refused,
}

impl Ending {
    fn as_str(self) -> &'static str {
        match self {
            Self::Clean => "clean",
            Self::Repaired => "repaired",
            Self::WouldRepair => "would_repair",
            Self::Refused => "refused",
        }
    }
}

/// Runs `recover`.
pub(crate) fn run(args: Args, out: &mut Out) -> Result<Outcome, CliError> {
    let shard = match resolve(&args.shard_dir)? {
        Resolved::Shard(shard) => shard,
        Resolved::Root(shards) => {
            return Err(CliError::Usage(format!(
                "{} is a root of {} shard directories; recover takes one shard directory",
                args.shard_dir.display(),
                shards.len()
            )));
        }
        Resolved::File { shard, .. } => {
            return Err(CliError::Usage(format!(
                "{} is a file; recover takes its shard directory, {}",
                args.shard_dir.display(),
                shard.dir.display()
            )));
        }
    };
    let options = InspectOptions {
        index_spacing_bytes: args.index_spacing_bytes,
        full_verify: false,
        // Every index whose entries the records do not vouch for is
        // rebuilt, not only those an open would notice.
        index_check: IndexCheck::EveryEntry,
    };
    let spinner = Progress::spinner(
        format!("inspecting {}", shard.dir.display()),
        progress_allowed(args.json),
    );
    let fs = FileSystem::os();
    let policy = args.policy();
    let mut inspection = inspect(&fs, &shard.dir, &shard.name, &options)?;
    let will_write = !args.dry_run && inspection.would_open(policy) && !inspection.plan.is_empty();
    // Held until the end of `run`: the repair must not race a writer.
    let lock = if will_write {
        // A store closes the files of shards it is not using, releasing
        // their locks, but holds its root's for its whole life: taking it
        // too keeps the repair off every shard a running store owns.
        let root_lock = match shard.dir.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => {
                Some(StoreLock::acquire(&fs, parent)?)
            }
            _ => None,
        };
        let lock = (root_lock, ShardLock::acquire(&fs, &shard.dir)?);
        // What a writer did before we held the lock is only seen by looking
        // again; acting on the first look could cut records it appended.
        inspection = inspect(&fs, &shard.dir, &shard.name, &options)?;
        Some(lock)
    } else {
        None
    };

    let blocking: Vec<_> = inspection.blocking(policy).into_iter().cloned().collect();
    let (ending, actions) = if !blocking.is_empty() {
        (Ending::Refused, Vec::new())
    } else if inspection.plan.is_empty() {
        (Ending::Clean, Vec::new())
    } else if let Some(lock) = &lock {
        spinner.set_message(format!("repairing {}", shard.dir.display()));
        let repaired = repair(&fs, &inspection, policy, &lock.1)?;
        // An index that could not be written is reported, not a failure:
        // the shard opens all the same.
        inspection.notes.extend(repaired.notes);
        (Ending::Repaired, repaired.actions)
    } else {
        // No lock with a plan the policy allows: only a dry run.
        (Ending::WouldRepair, inspection.plan.clone())
    };
    spinner.finish();

    if args.json {
        out.json(&json_line(&shard, &inspection, &args, ending, &actions))?;
    } else {
        print_human(out, &shard, &inspection, &args, ending, &actions, &blocking)?;
    }
    if ending == Ending::Refused {
        let reason = RecoveryError::Unrepairable {
            dir: shard.dir.clone(),
            blocking,
            policy,
        }
        .to_string();
        // The report went to stdout; stderr gets the one-line reason.
        out.flush()?;
        eprintln!("felix-store: {}", reason.lines().next().unwrap_or_default());
        return Ok(Outcome::Damage);
    }
    Ok(Outcome::Success)
}

fn action_json(action: &Action) -> Value {
    match action {
        Action::Truncate {
            segment,
            path,
            from_len,
            to_len,
        } => json!({
            "action": "truncate",
            "segment": segment,
            "path": path.display().to_string(),
            "from_len": from_len,
            "to_len": to_len,
        }),
        Action::RemoveSegment { segment, path, len } => json!({
            "action": "remove_segment",
            "segment": segment,
            "path": path.display().to_string(),
            "len": len,
        }),
        Action::RebuildIndex {
            segment,
            path,
            entries,
        } => json!({
            "action": "rebuild_index",
            "segment": segment,
            "path": path.display().to_string(),
            "entries": entries,
        }),
        Action::RebuildTimeIndex {
            segment,
            path,
            entries,
        } => json!({
            "action": "rebuild_time_index",
            "segment": segment,
            "path": path.display().to_string(),
            "entries": entries,
        }),
        Action::RemoveBelowLogStart {
            segment,
            path,
            len,
            start_offset,
        } => json!({
            "action": "remove_below_log_start",
            "segment": segment,
            "path": path.display().to_string(),
            "len": len,
            "start_offset": start_offset,
        }),
    }
}

fn json_line(
    shard: &ShardDir,
    inspection: &Inspection,
    args: &Args,
    ending: Ending,
    actions: &[Action],
) -> Value {
    let mut map = report::shard_findings(&shard.name, inspection);
    map.insert("outcome".into(), ending.as_str().into());
    map.insert("dry_run".into(), args.dry_run.into());
    map.insert(
        "repair_checksum_tail".into(),
        args.repair_checksum_tail.into(),
    );
    map.insert("actions".into(), actions.iter().map(action_json).collect());
    map.insert("dir".into(), shard.dir.display().to_string().into());
    Value::Object(map)
}

fn print_human(
    out: &mut Out,
    shard: &ShardDir,
    inspection: &Inspection,
    args: &Args,
    ending: Ending,
    actions: &[Action],
    blocking: &[felix_recovery::Finding],
) -> Result<(), CliError> {
    out.line(report::summary_line(&shard.name, inspection))?;
    for finding in &inspection.findings {
        out.line(report::finding_line(finding))?;
    }
    for note in report::notes(inspection) {
        out.line(format!("  note: {note}"))?;
    }
    let done = if ending == Ending::WouldRepair {
        "would"
    } else {
        "done"
    };
    for action in actions {
        out.line(format!("  {done}: {action}"))?;
    }
    let closing = match ending {
        Ending::Clean => "nothing to repair: the shard opens as it is".to_owned(),
        Ending::Repaired => format!(
            "recovered: {} action{} done; the shard opens with offsets {}..{}",
            actions.len(),
            if actions.len() == 1 { "" } else { "s" },
            crate::output::opt_text(inspection.base_offset()),
            crate::output::opt_text(inspection.next_offset()),
        ),
        Ending::WouldRepair => {
            "dry run: nothing was modified; run without --dry-run to do the above".to_owned()
        }
        Ending::Refused => {
            let opt_in_only = blocking.iter().all(|f| f.repair == RepairClass::OptIn);
            let advice = if opt_in_only && !args.repair_checksum_tail {
                format!(
                    "the damaged records may have been acknowledged: restore the shard from a replica, or drop them with `felix-store recover --repair-checksum-tail {}`",
                    shell_quote(&shard.dir)
                )
            } else {
                "restore the shard from a replica or backup".to_owned()
            };
            format!(
                "REFUSED: {} finding{} not repairable{}; nothing was modified; {advice}",
                blocking.len(),
                if blocking.len() == 1 { "" } else { "s" },
                if args.repair_checksum_tail {
                    ""
                } else {
                    " by default"
                },
            )
        }
    };
    out.line(closing)
}
