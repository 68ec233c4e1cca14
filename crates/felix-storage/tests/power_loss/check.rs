//! Reopening one crash state with a default open and holding it to the
//! model: it opens, every acknowledged record is there and intact, nothing
//! never appended appears, offsets are contiguous, and the epochs file
//! holds the old history or the new one — or, for a block-torn state only,
//! it is refused in one of the documented residual shapes and loses
//! nothing acknowledged once cut at the refused record.

use std::path::Path;

use felix_format::CorruptionKind;
use felix_io::FileSystem;
use felix_io::sim::{CrashPlan, SimFs};
use felix_recovery::{Finding, RecoveryError};
use felix_storage::{Durability, ReadBound, Shard, StorageError};

use super::residual::{Residual, residual};
use super::{DIR, Model, Scale, config};

/// Why a reopened crash state failed the check.
enum Failure {
    /// A default open refused it, naming these findings.
    Refused(Vec<Finding>),
    /// Anything else: a broken promise.
    Broken(String),
}

/// What the reopen of one crash state showed.
pub(crate) enum Checked {
    /// A default open succeeded and kept every promise.
    Opened,
    /// A default open refused one of the shapes docs/storage-format.md
    /// leaves refused, and cutting the segment at the refused record (what
    /// an operator restoring from a replica ends up with) keeps every
    /// promise: nothing acknowledged lies there or after it.
    Residual(Residual),
}

/// Reopens a crashed disk and checks it against the model.
fn open_and_check(crashed: &SimFs, model: &Model, scale: Scale) -> Result<(), Failure> {
    let handle = FileSystem::new(crashed.clone());
    let shard = match Shard::options(Path::new(DIR))
        .file_system(handle.clone())
        .config(config(Durability::OnCommit, None, scale))
        .label("sim")
        .open()
    {
        Ok(shard) => shard,
        Err(StorageError::Recovery(RecoveryError::Unrepairable { blocking, .. })) => {
            return Err(Failure::Refused(blocking));
        }
        Err(e) => return Err(Failure::Broken(format!("open failed: {e}"))),
    };
    let broken = |e: String| Failure::Broken(e);
    let (base, next) = (shard.offsets().base, shard.offsets().written);
    if base < model.min_base {
        return Err(broken(format!(
            "the log start {} a call returned is lost: the log begins at {base}",
            model.min_base
        )));
    }
    // Every read below `next` returns at least one record (the offset
    // advances by one per record), so this walk ends after at most
    // `next - base` reads; an empty one is a failure, not a retry.
    let mut offset = base;
    while offset < next {
        let records = shard
            .read(offset, 1 << 20, ReadBound::Committed)
            .map_err(|e| broken(format!("read {offset}: {e}")))?;
        if records.is_empty() {
            return Err(broken(format!(
                "a read at {offset} returned nothing, below the next offset {next}"
            )));
        }
        for r in records {
            if r.offset != offset || offset >= next {
                return Err(broken(format!(
                    "offsets not contiguous: a read returned offset {} where {offset} was next (the log ends before {next})",
                    r.offset
                )));
            }
            let known = model
                .appended
                .get(&offset)
                .is_some_and(|v| v.contains(&r.payload[..]));
            if !known {
                return Err(broken(format!(
                    "offset {offset} holds bytes that were never appended there"
                )));
            }
            offset += 1;
        }
    }
    for (&o, p) in &model.acked {
        if o < base {
            return Err(broken(format!(
                "acknowledged offset {o} lost below base {base}"
            )));
        }
        if o >= next {
            return Err(broken(format!(
                "acknowledged offset {o} lost (next offset {next})"
            )));
        }
        let got = shard
            .read(o, 1, ReadBound::Committed)
            .map_err(|e| broken(format!("read {o}: {e}")))?;
        match got.first() {
            Some(r) if r.offset == o && r.payload[..] == p[..] => {}
            Some(r) => {
                return Err(broken(format!(
                    "acknowledged offset {o} altered: a read there returned offset {} with {} bytes, not {} bytes",
                    r.offset,
                    r.payload.len(),
                    p.len()
                )));
            }
            None => {
                return Err(broken(format!(
                    "acknowledged offset {o} lost: a read there returned nothing"
                )));
            }
        }
    }
    let history = shard.generations();
    let fits = model.histories.iter().any(|h| {
        let mut h = h.clone();
        h.truncate_from(next + 1);
        let mut got = history.clone();
        got.truncate_before(base);
        h.truncate_before(base);
        h == got
    });
    if !fits {
        return Err(broken(format!(
            "epochs history {history:?} is neither the old nor the new one {:?}",
            model.histories
        )));
    }
    Ok(())
}

/// Checks one crash state. A refusal passes only for a state a block tear
/// produced (`blocks_torn`), of a residual shape, which loses nothing
/// acknowledged once cut at the refused record.
pub(crate) fn check(
    crashed: &SimFs,
    model: &Model,
    scale: Scale,
    blocks_torn: bool,
) -> Result<Checked, String> {
    let blocking = match open_and_check(crashed, model, scale) {
        Ok(()) => return Ok(Checked::Opened),
        Err(Failure::Broken(e)) => return Err(e),
        Err(Failure::Refused(blocking)) => blocking,
    };
    let refused = || {
        let text: Vec<String> = blocking.iter().map(ToString::to_string).collect();
        format!("open refused: {}", text.join("; "))
    };
    let [finding] = &blocking[..] else {
        return Err(refused());
    };
    let header_verified = match finding.kind {
        CorruptionKind::RecordHeaderChecksum { .. } => false,
        CorruptionKind::RecordChecksum { .. } => true,
        _ => return Err(refused()),
    };
    let path = Path::new(DIR).join(format!("{:020}.log", finding.site.segment));
    let bytes = crashed.read_file(&path).map_err(|e| e.to_string())?;
    let position = finding.site.position;
    let Some(shape) = residual(&bytes, position, header_verified).filter(|_| blocks_torn) else {
        return Err(refused());
    };
    let cut = crashed.crash(&CrashPlan::durable_only());
    let kept = bytes.get(..position as usize).unwrap_or_default();
    cut.write_file(&path, kept).map_err(|e| e.to_string())?;
    match open_and_check(&cut, model, scale) {
        Ok(()) => Ok(Checked::Residual(shape)),
        Err(Failure::Broken(e)) => Err(format!("{}; cut there: {e}", refused())),
        Err(Failure::Refused(_)) => Err(format!("{}; cut there, still refused", refused())),
    }
}
