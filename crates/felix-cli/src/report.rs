//! Rendering an inspection for people and for scripts, shared by `verify`,
//! `recover` and `stat` so the three say the same thing the same way.

use std::path::Path;

use felix_format::log_start::MovedBy;
use felix_recovery::{Finding, Inspection, RecoveryError, RepairClass};
use serde_json::{Value, json};

use crate::error::{CliError, Outcome};
use crate::output::{Out, opt, opt_text, shell_quote};
use crate::target::ShardDir;

/// What a default open of a shard would do, from its findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// No damage: opens as it is.
    Ok,
    /// Only damage repaired by default: opens after truncating an
    /// unfinished write (or removing an abandoned segment).
    NeedsRepair,
    /// A default open succeeds (cleanly or after its repairs), but records
    /// of sealed segments that it does not read in full failed their
    /// checksums (`verify`'s checks, or the damage `dump` stopped at):
    /// reads of them fail.
    Rot,
    /// Damage repaired only on request (`--repair-checksum-tail`), none
    /// that is never repaired: a default open refuses.
    RefusedByDefault,
    /// Damage that is never repaired: every open refuses.
    Refused,
}

impl Verdict {
    /// What a default open does with `inspection`'s findings, given
    /// whether other checks found rot an open does not look for: a shard
    /// an open accepts is [`Self::Rot`] then.
    pub(crate) fn with_rot(inspection: &Inspection, rot: bool) -> Self {
        match Self::of(inspection) {
            Self::Ok | Self::NeedsRepair if rot => Self::Rot,
            open => open,
        }
    }

    /// The verdict for `inspection`: what a default open does.
    pub(crate) fn of(inspection: &Inspection) -> Self {
        let worst = inspection.findings.iter().map(|f| f.repair).max();
        match worst {
            None => Self::Ok,
            Some(RepairClass::Default) => Self::NeedsRepair,
            Some(RepairClass::OptIn) => Self::RefusedByDefault,
            Some(RepairClass::Never) => Self::Refused,
        }
    }

    /// The name scripts match on in `--json` output.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::NeedsRepair => "needs_repair",
            Self::Rot => "rot",
            Self::RefusedByDefault => "refused_by_default",
            Self::Refused => "refused",
        }
    }

    /// Exit status: 0 when a default open succeeds.
    pub(crate) fn outcome(self) -> Outcome {
        match self {
            Self::Ok | Self::NeedsRepair => Outcome::Success,
            Self::Rot | Self::RefusedByDefault | Self::Refused => Outcome::Damage,
        }
    }

    /// What a default open does, as the words after "an open would: ".
    pub(crate) fn open_would(self) -> &'static str {
        match self {
            Self::Ok | Self::Rot => "open the shard as it is",
            Self::NeedsRepair => "repair the shard and open it",
            Self::RefusedByDefault => "refuse the shard unless asked to drop its damaged tail",
            Self::Refused => "refuse the shard",
        }
    }

    /// The closing line of a human report: what it means and what to do.
    pub(crate) fn human(self, dir: &Path) -> String {
        // The suggested commands are meant to be copied: quoted for a shell.
        let dir = shell_quote(dir);
        match self {
            Self::Ok => "OK: opens cleanly".to_owned(),
            Self::NeedsRepair => format!(
                "needs repair: run `felix-store recover {dir}` (opening the shard repairs it the same way)"
            ),
            Self::Rot => "DAMAGED: records of sealed segments failed their checksums; a default open does not read them and opens the shard, but reads of them fail: replace each damaged segment with a replica's copy of it, or restore the shard from a replica".to_owned(),
            Self::RefusedByDefault => format!(
                "REFUSED: a default open fails; the damaged records may have been acknowledged, so restore the shard from a replica, or drop them with `felix-store recover --repair-checksum-tail {dir}`"
            ),
            Self::Refused => {
                "REFUSED: the damage is not repairable; restore the shard from a replica or backup"
                    .to_owned()
            }
        }
    }
}

/// One finding as the JSON object `verify` and `recover` print.
pub(crate) fn finding_json(finding: &Finding) -> Value {
    json!({
        "kind": finding.kind.name(),
        "segment": finding.site.segment,
        "position": finding.site.position,
        "repair": finding.repair.as_str(),
        "detail": finding.detail(),
    })
}

/// One finding as a report line: the spec's name for the kind first, so
/// an operator can grep for it, then the full sentence with its site.
pub(crate) fn finding_line(finding: &Finding) -> String {
    format!("  {}: {finding}", finding.kind.name())
}

/// The notes (index problems, strays) as strings.
pub(crate) fn notes(inspection: &Inspection) -> Vec<String> {
    inspection.notes.iter().map(ToString::to_string).collect()
}

/// The shard's exact key as JSON (`null` when its directory has no usable
/// key file: the name alone cannot be turned back into a key).
pub(crate) fn key_json(inspection: &Inspection) -> Value {
    inspection.key.as_ref().map_or(Value::Null, |key| {
        json!({
            "tenant": key.tenant,
            "namespace": key.namespace,
            "stream": key.stream,
            "shard": key.shard,
        })
    })
}

/// The report line naming the shard's exact key, when known.
pub(crate) fn key_line(inspection: &Inspection) -> Option<String> {
    inspection.key.as_ref().map(|key| format!("  key: {key}"))
}

/// The report line saying where the log begins, when a log-start file
/// records it (records were deleted before an offset, or the log reset),
/// and what moved it there.
pub(crate) fn start_line(inspection: &Inspection) -> Option<String> {
    inspection.log_start.map(|start| {
        format!(
            "  log start: {} (the log-start file; {})",
            inspection.start_offset().unwrap_or(start.start_offset),
            start_reason(start.moved_by)
        )
    })
}

/// What the log-start file says of the records below the start.
pub(crate) fn start_reason(moved_by: MovedBy) -> &'static str {
    match moved_by {
        MovedBy::Deletion => "records below it are deleted",
        MovedBy::Offload => "an offload deleted the records below it",
    }
}

/// What moved the log start, as `--json` names it.
pub(crate) fn moved_by_json(moved_by: MovedBy) -> &'static str {
    match moved_by {
        MovedBy::Deletion => "deletion",
        MovedBy::Offload => "offload",
    }
}

/// The fields every per-shard JSON line starts with.
pub(crate) fn shard_fields(name: &str, inspection: &Inspection) -> serde_json::Map<String, Value> {
    let mut map = serde_json::Map::new();
    map.insert("shard".into(), name.into());
    map.insert("key".into(), key_json(inspection));
    map.insert("base_offset".into(), opt(inspection.base_offset()));
    map.insert("next_offset".into(), opt(inspection.next_offset()));
    map.insert("records".into(), opt(inspection.records()));
    map.insert("segments".into(), inspection.live_segments().count().into());
    map
}

/// [`shard_fields`] followed by the shard's findings and notes: the start of
/// the `verify` and `recover` JSON lines.
pub(crate) fn shard_findings(
    name: &str,
    inspection: &Inspection,
) -> serde_json::Map<String, Value> {
    let mut map = shard_fields(name, inspection);
    map.insert(
        "findings".into(),
        inspection.findings.iter().map(finding_json).collect(),
    );
    map.insert("notes".into(), notes(inspection).into());
    map
}

/// The first line of a shard's human report.
pub(crate) fn summary_line(name: &str, inspection: &Inspection) -> String {
    let segments = inspection.live_segments().count();
    if segments == 0 {
        return format!("shard {name}: no segments");
    }
    format!(
        "shard {name}: {segments} segment{}, offsets {}..{}, {} records",
        if segments == 1 { "" } else { "s" },
        opt_text(inspection.start_offset()),
        opt_text(inspection.next_offset()),
        opt_text(live_records(inspection)),
    )
}

/// The records a reader may read: from where the log begins (the log
/// start, when a log-start file moved it into a segment) to its end.
pub(crate) fn live_records(inspection: &Inspection) -> Option<u64> {
    match (
        inspection.log_start,
        inspection.start_offset(),
        inspection.next_offset(),
    ) {
        (Some(_), Some(start), Some(next)) => Some(next.saturating_sub(start)),
        _ => inspection.records(),
    }
}

/// Reports a shard that could not be inspected: a report line (or a JSON
/// line with `"verdict":"error"`) in its place among the others, and the
/// error on stderr, where every exit-2 failure is told.
pub(crate) fn unreadable(
    out: &mut Out,
    shard: &ShardDir,
    err: &RecoveryError,
    json: bool,
) -> Result<(), CliError> {
    if json {
        let mut map = serde_json::Map::new();
        map.insert("shard".into(), shard.name.clone().into());
        map.insert("verdict".into(), "error".into());
        map.insert("error".into(), err.to_string().into());
        map.insert("dir".into(), shard.dir.display().to_string().into());
        out.json(&Value::Object(map))?;
    } else {
        out.line(format!("shard {}: ERROR: {err}", shard.name))?;
        out.line("  not checked: the shard could not be read")?;
    }
    // Stdout first, so the two streams read in order on a terminal.
    out.flush()?;
    eprintln!("felix-store: shard {}: {err}", shard.name);
    Ok(())
}
