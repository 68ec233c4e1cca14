//! `felix-store recover`: what opening a shard does — repair what the policy
//! allows and rebuild indexes — as a separate, reported step.
//!
//! Before looking, `recover` takes the lock of the directory above the
//! shard, which a running store holds for its whole life (it closes the
//! files of shards it is not using, and their locks, but not its root's),
//! and the shard directory's own lock, which its writer holds; when either
//! is held it refuses (exit 2) having read nothing, even for `--dry-run`,
//! since a report on a live shard would be out of date as it is printed.
//! Both locks are taken on the directories themselves, creating no file.
//!
//! The shard is then inspected read-only, as an open inspects it (its tail,
//! segment headers and indexes; the records of sealed segments are not
//! checksummed, which `verify` does), and every entry of every index is
//! checked against the records (an open checks only what it must, and
//! leaves a wrong entry in a sealed index to the read that meets it);
//! `recover` rebuilds every index that fails that check. Damage the policy
//! may not repair ends the command with exit 1 having modified nothing.
//! Otherwise, unless `--dry-run`, the shard's writer lock is taken in full
//! (with the earlier releases' lock file), the shard is inspected again
//! under it, and `felix_recovery::repair` carries out the plan.

use std::path::{Path, PathBuf};

use felix_format::LOCK_FILE_NAME;
use felix_io::{FileSystem, LockGuard};
use felix_recovery::{
    Action, IndexCheck, InspectOptions, Inspection, LockError, RecoveryError, RepairClass,
    RepairPolicy, ShardLock, StoreLock, inspect, repair,
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

/// The locks `recover` holds while it looks at a shard: the store root's
/// (the directory above the shard; for a shard outside any store an
/// ordinary directory, whose lock keeps out only another tool beside this
/// one) and the shard directory's own. Both are taken on the directories,
/// creating nothing, so a dry or refused run modifies nothing.
struct Looking {
    root: StoreLock,
    _dir: LockGuard,
    /// An earlier release's writer locks only `<shard>/lock`: held while
    /// the file exists (taking it when it does not would create it, and
    /// such a writer would have created it).
    _file: Option<LockGuard>,
}

impl Looking {
    /// Takes both locks without waiting; [`CliError::Held`] when one is
    /// held.
    fn take(fs: &FileSystem, dir: &Path) -> Result<Self, CliError> {
        let parent = match dir.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            // `recover shard` run from inside the store's root.
            _ => Path::new("."),
        };
        let root = StoreLock::acquire(fs, parent).map_err(held)?;
        let dir_guard = match fs.try_lock_dir(dir) {
            Ok(Some(guard)) => guard,
            Ok(None) => {
                return Err(CliError::Held(LockError::Locked {
                    dir: dir.to_path_buf(),
                }));
            }
            Err(e) => return Err(CliError::io("lock", dir, e)),
        };
        let lock_file = dir.join(LOCK_FILE_NAME);
        let file = match std::fs::symlink_metadata(&lock_file) {
            Ok(meta) if meta.is_file() => match fs.try_lock(&lock_file) {
                Ok(Some(guard)) => Some(guard),
                Ok(None) => {
                    return Err(CliError::Held(LockError::Locked {
                        dir: dir.to_path_buf(),
                    }));
                }
                Err(e) => return Err(CliError::io("lock", lock_file, e)),
            },
            // Missing, or not a regular file (which the shard lock leaves
            // alone too): the directory's lock is the one that counts.
            _ => None,
        };
        Ok(Self {
            root,
            _dir: dir_guard,
            _file: file,
        })
    }

    /// The shard's writer lock in full, in place of the directory's alone,
    /// for a repair; the root's stays held throughout.
    fn for_repair(self, fs: &FileSystem, dir: &Path) -> Result<(StoreLock, ShardLock), CliError> {
        let Self { root, _dir, _file } = self;
        drop((_dir, _file));
        let lock = ShardLock::acquire(fs, dir).map_err(held)?;
        Ok((root, lock))
    }
}

/// A lock `recover` could not take: held by someone, or an I/O error.
fn held(err: LockError) -> CliError {
    match err {
        LockError::Io(err) => CliError::Io(err),
        other => CliError::Held(other),
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
    let looking = Looking::take(&fs, &shard.dir)?;
    let mut inspection = inspect(&fs, &shard.dir, &shard.name, &options)?;
    let will_write = !args.dry_run && inspection.would_open(policy) && !inspection.plan.is_empty();
    // Held until the end of `run`: the repair must not race a writer.
    let lock = if will_write {
        let lock = looking.for_repair(&fs, &shard.dir)?;
        // A writer may have come between the two locks; acting on the
        // first look could cut records it appended.
        inspection = inspect(&fs, &shard.dir, &shard.name, &options)?;
        Some(lock)
    } else {
        drop(looking);
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
    // What an open checks, no more: rot inside a sealed segment is
    // `verify`'s to find.
    map.insert("sealed_records_checked".into(), false.into());
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
    out.line(closing)?;
    if ending != Ending::Refused {
        out.line(format!(
            "not checked: the records of sealed segments, which an open does not checksum either; `felix-store verify {}` checks every record",
            shell_quote(&shard.dir)
        ))?;
    }
    Ok(())
}
