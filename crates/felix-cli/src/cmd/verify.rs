//! `felix-store verify`: every record checksum of every segment, and what a
//! default open of each shard would find and do, without modifying a byte.
//!
//! Two passes over each shard, both read-only: `felix_recovery::inspect`
//! (what an open checks: headers, indexes, the newest segment in full, the
//! sealed segments' tails), then, unless `--quick`, a scrub of every other
//! segment (`felix_recovery::scrub_segment`, the one record walk at full
//! depth, reporting every damaged record). Rot the scrub finds that the
//! inspection did not is reported on its own lines: a default open accepts
//! such a shard, so the report says what an open would do beside it. Every
//! file is opened read-only, so `verify` is safe on a shard a live writer
//! holds (it may then see a tail still being written) and on a read-only
//! copy.
//!
//! With `--remote`, a tiered shard's remote copy is verified too: every
//! object the newest manifest lists is read (as a stream, never held
//! whole) and held to its manifest entry (length, CRC-32), and every
//! record of each remote segment is walked at full depth; damage there ends with exit 1, like
//! damage on disk. So do records an offload deleted locally that no
//! manifest covers (felix-tiered's `held_nowhere`, the check a tiered open
//! makes) and a listed object the store does not have; a store that cannot
//! be reached is exit 2, told on stderr.
//!
//! A PATH naming one segment file verifies that segment's whole shard:
//! whether damage is repairable depends on whether a later segment exists,
//! so a segment cannot be judged alone.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;

use felix_io::{FileSystem, OpenMode};
use felix_recovery::{IndexCheck, InspectOptions, Inspection, ScrubDamage, inspect, scrub_segment};
use felix_segment::SegmentFile;
use serde_json::{Value, json};

use crate::cmd::remote::{self, Found, RemoteArgs};
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
    /// Check only what a default open checks: sealed segments get a header
    /// check, a walk of their record headers (which checks every index
    /// entry and the offsets) and no payload checksums; the newest segment
    /// is checked in full. By default every record checksum of every
    /// segment is checked too.
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// Checksum every record of every segment: the default, kept as an
    /// accepted alias.
    #[arg(long)]
    full: bool,
    #[command(flatten)]
    remote: RemoteArgs,
}

/// What the checks found in one shard.
struct Checked {
    inspection: Inspection,
    /// Damage the scrub found that the inspection did not (`None` with
    /// `--quick`: not looked for).
    rot: Option<Vec<ScrubDamage>>,
}

impl Checked {
    fn verdict(&self) -> Verdict {
        Verdict::with_rot(
            &self.inspection,
            self.rot.as_ref().is_some_and(|r| !r.is_empty()),
        )
    }
}

/// Runs `verify`.
pub(crate) fn run(args: Args, out: &mut Out) -> Result<Outcome, CliError> {
    let resolved = resolve(&args.path)?;
    let shards = resolved.shards();
    let opened = args.remote.open()?;
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
        // The scrub below checks the payloads: the inspection is what an
        // open does.
        full_verify: false,
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
        let fs = FileSystem::os();
        let checked = inspect(&fs, &shard.dir, &shard.name, &options).and_then(|inspection| {
            let rot = if args.quick {
                None
            } else {
                // One shard: a bar of its bytes (a root has its bar of shards).
                let bytes_on = progress_on && shards.len() == 1;
                Some(bar.suspend(|| scrub_rot(&fs, shard, &inspection, bytes_on))?)
            };
            Ok(Checked { inspection, rot })
        });
        let checked = match checked {
            Ok(checked) => checked,
            Err(err) => {
                bar.suspend(|| report::unreadable(out, shard, &err, args.json))?;
                outcome = outcome.and(Outcome::Failed);
                unreadable += 1;
                bar.inc(1);
                continue;
            }
        };
        let verdict = checked.verdict();
        // The remote copy: every object of every listed segment against
        // its manifest entry, every record walked.
        // And every record an offload deleted locally held by it.
        let remote = opened.as_ref().map(|o| {
            let key = checked.inspection.key.as_ref();
            let found = Found::load(o, key);
            let gap = remote::held_nowhere(&found, &checked.inspection);
            let findings = match (&found, key) {
                (Found::Manifest(m), Some(key)) => bar.suspend(|| remote::verify(o, key, m)),
                _ => Vec::new(),
            };
            (o, found, gap, findings)
        });
        bar.suspend(|| {
            if args.json {
                let mut line = json_line(shard, &checked, verdict);
                if let (Value::Object(map), Some((o, found, gap, findings))) = (&mut line, &remote)
                {
                    map.insert(
                        "remote".into(),
                        remote::json(o, found, gap.as_ref(), Some(findings)),
                    );
                }
                out.json(&line)?;
            } else {
                print_human(out, shard, &checked, verdict)?;
                if let Some((o, found, gap, findings)) = &remote {
                    out.line(remote::summary_lines(o, found, gap.as_ref()))?;
                    if let Found::Manifest(m) = found {
                        remote::print_findings(out, m, findings)?;
                    }
                }
            }
            match &remote {
                Some((o, found, _, findings)) => {
                    remote::tell_failures(out, &shard.name, o, found, findings)
                }
                None => Ok(()),
            }
        })?;
        outcome = outcome.and(verdict.outcome());
        if let Some((_, found, gap, findings)) = &remote {
            outcome = outcome
                .and(found.outcome())
                .and(remote::outcome_for(findings));
            if gap.is_some() {
                outcome = outcome.and(Outcome::Damage);
            }
        }
        verdicts.push(verdict);
        bar.inc(1);
    }
    bar.finish();
    if !args.json && shards.len() > 1 {
        let count = |v: Verdict| verdicts.iter().filter(|&&x| x == v).count();
        out.line(format!(
            "{} shards: {} ok, {} need repair, {} damaged, {} refused by default, {} refused{}",
            shards.len(),
            count(Verdict::Ok),
            count(Verdict::NeedsRepair),
            count(Verdict::Rot),
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

/// Scrubs every live segment of `shard` but the newest (which the
/// inspection scanned in full) and returns the damage the inspection did
/// not report. A segment whose header does not decode is the inspection's
/// finding already, and is not walked.
fn scrub_rot(
    fs: &FileSystem,
    shard: &ShardDir,
    inspection: &Inspection,
    bar_on: bool,
) -> Result<Vec<ScrubDamage>, felix_recovery::RecoveryError> {
    let sealed: Vec<_> = inspection.live_segments().filter(|s| !s.newest).collect();
    let total = sealed.iter().map(|s| s.file_len).sum();
    let bar = Progress::bytes(total, format!("checksumming {}", shard.name), bar_on);
    let label: Arc<str> = Arc::from(shard.name.as_str());
    let mut rot = Vec::new();
    for summary in sealed {
        let opened = SegmentFile::open(
            fs,
            &shard.dir,
            summary.id,
            Arc::clone(&label),
            OpenMode::Read,
        );
        let Ok((segment, file_len)) = opened else {
            bar.inc(summary.file_len);
            continue;
        };
        let mut shown = 0;
        let scrub = scrub_segment(&segment, file_len, None, &mut |bytes| {
            bar.inc(bytes - shown);
            shown = bytes;
            ControlFlow::Continue(())
        })?;
        bar.inc(summary.file_len.saturating_sub(shown));
        let reported = |d: &ScrubDamage| {
            inspection
                .findings
                .iter()
                .any(|f| f.site.segment == d.site.segment && f.site.position == d.site.position)
        };
        rot.extend(scrub.damage.into_iter().filter(|d| !reported(d)));
    }
    bar.finish();
    Ok(rot)
}

/// One damaged record the scrub found, as a JSON object.
fn rot_json(damage: &ScrubDamage) -> Value {
    json!({
        "kind": damage.kind.name(),
        "segment": damage.site.segment,
        "position": damage.site.position,
        "offset": damage.offset,
        "detail": damage.kind.to_string(),
    })
}

/// The `--json` line for one shard.
fn json_line(shard: &ShardDir, checked: &Checked, verdict: Verdict) -> Value {
    let inspection = &checked.inspection;
    let mut map = report::shard_findings(&shard.name, inspection);
    map.insert(
        "rot".into(),
        checked
            .rot
            .as_ref()
            .map_or(Value::Null, |rot| rot.iter().map(rot_json).collect()),
    );
    map.insert("verdict".into(), verdict.as_str().into());
    map.insert("open_would".into(), Verdict::of(inspection).as_str().into());
    map.insert("dir".into(), shard.dir.display().to_string().into());
    Value::Object(map)
}

fn print_human(
    out: &mut Out,
    shard: &ShardDir,
    checked: &Checked,
    verdict: Verdict,
) -> Result<(), CliError> {
    let inspection = &checked.inspection;
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
    for damage in checked.rot.iter().flatten() {
        out.line(format!(
            "  ROT {}: {}: the record at offset {}, in a sealed segment an open does not read in full, at {}",
            damage.kind.name(),
            damage.kind,
            damage.offset,
            damage.site
        ))?;
    }
    for note in report::notes(inspection) {
        out.line(format!("  note: {note}"))?;
    }
    let open = Verdict::of(inspection);
    if open != verdict {
        out.line(format!("  an open would: {}", open.open_would()))?;
    }
    out.line(format!("  {}", verdict.human(&shard.dir)))
}
