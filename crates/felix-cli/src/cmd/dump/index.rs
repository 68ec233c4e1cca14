//! `felix-store dump --index`: an index file's entries, and whether the
//! records of its segment place each entry's offset where it says.
//!
//! The file is read through the `Vfs`, which opens regular files only: an
//! index name taken by a FIFO (or anything else) is reported as what it is,
//! never opened, so `dump` cannot block on it.

use std::sync::Arc;

use felix_format::{FileKind, IndexHeader, file_name, parse_index};
use felix_io::{FileSystem, IoError, OpenMode};
use felix_segment::{SegmentFile, first_stale_entry};
use serde_json::{Value, json};

use crate::error::{CliError, Outcome};
use crate::output::{Out, opt, opt_text, shell_quote};
use crate::target::ShardDir;

/// Prints the index of segment `id` and whether it can be used. A missing
/// or wrong index is never damage (indexes are rebuilt from their
/// segments), so this always succeeds once the file is read. `newest` says
/// whether `id` is the shard's newest segment, whose index an open checks
/// entry by entry.
pub(super) fn dump_index(
    fs: &FileSystem,
    out: &mut Out,
    shard: &ShardDir,
    id: u64,
    newest: bool,
    json: bool,
) -> Result<Outcome, CliError> {
    let name = file_name(id, FileKind::Index);
    let path = shard.dir.join(name.as_str());
    let bytes = match read_index(fs, &path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let problem = "missing; it is rebuilt from its segment on open";
            print_unread(out, id, &name, problem, json)?;
            return Ok(Outcome::Success);
        }
        Err(e) if let Some(what) = e.not_regular_file() => {
            let problem = format!(
                "{what}: never opened; an open rebuilds the index in memory from its segment and does not write it there"
            );
            print_unread(out, id, &name, &problem, json)?;
            return Ok(Outcome::Success);
        }
        Err(e) => return Err(e.into()),
    };
    let label: Arc<str> = Arc::from(shard.name.as_str());
    let segment = SegmentFile::open(fs, &shard.dir, id, label, OpenMode::Read).ok();
    // Without a readable segment the entries can only be checked against
    // the index's own header.
    let parsed = match &segment {
        Some((seg, len)) => parse_index(&bytes, seg.base_offset(), *len),
        None => {
            IndexHeader::decode(&bytes).and_then(|h| parse_index(&bytes, h.base_offset, u64::MAX))
        }
    };
    let (base_offset, entries, torn_bytes, mut problem) = match parsed {
        Ok(view) => (
            Some(view.header.base_offset),
            view.iter().collect::<Vec<_>>(),
            view.torn_bytes,
            None,
        ),
        Err(kind) => (
            IndexHeader::decode(&bytes).ok().map(|h| h.base_offset),
            Vec::new(),
            0,
            Some(format!("{}: {kind}", kind.name())),
        ),
    };
    // Whether an open rebuilds the index: always when the file does not
    // parse; for a wrong entry, only in the newest segment, the one an open
    // scans in full. A sealed segment's wrong entry waits for the read
    // that meets it (which rebuilds the index in memory) or for `recover`.
    let mut rebuilt_on_open = true;
    if problem.is_none()
        && let Some((seg, len)) = &segment
        && let Some((number, entry)) = first_stale_entry(seg, *len, &entries)?
    {
        problem = Some(format!(
            "entry {number} (offset {}, position {}) is not where the segment's records place offset {}",
            entry.offset, entry.position, entry.offset
        ));
        rebuilt_on_open = newest;
    }
    let valid = problem.is_none();
    let rebuilt = if rebuilt_on_open {
        "it is rebuilt from its segment on open".to_owned()
    } else {
        format!(
            "`felix-store recover {}` rebuilds it; until then an open keeps it, and a read that meets the entry rebuilds it in memory",
            shell_quote(&shard.dir)
        )
    };
    if json {
        out.json(&json!({
            "type": "index",
            "segment": id,
            "len": bytes.len(),
            "base_offset": opt(base_offset),
            "entries": entries.iter().map(|e| json!({"offset": e.offset, "position": e.position})).collect::<Vec<_>>(),
            "torn_bytes": torn_bytes,
            "valid": valid,
            "problem": problem,
            "rebuilt_on_open": if valid { Value::Null } else { rebuilt_on_open.into() },
        }))?;
    } else {
        out.line(format!(
            "index {name}: {} bytes, base offset {}, {} entries",
            bytes.len(),
            opt_text(base_offset),
            entries.len()
        ))?;
        if !entries.is_empty() {
            out.line(format!(
                "  {:>8}  {:>10}  {:>10}",
                "entry", "offset", "position"
            ))?;
        }
        for (i, entry) in entries.iter().enumerate() {
            out.line(format!(
                "  {i:>8}  {:>10}  {:>10}",
                entry.offset, entry.position
            ))?;
        }
        if torn_bytes > 0 {
            out.line(format!(
                "  torn final entry: {torn_bytes} bytes dropped (a crash mid-append; tolerated)"
            ))?;
        }
        let verdict = match (&problem, &segment) {
            (Some(problem), _) => format!("INVALID: {problem}; {rebuilt}"),
            (None, Some(_)) => format!(
                "valid: the records of {} place every entry's offset where it says",
                file_name(id, FileKind::Segment)
            ),
            (None, None) => {
                "valid as a file, but its segment could not be read to check the entries".to_owned()
            }
        };
        out.line(format!("  {verdict}"))?;
    }
    Ok(Outcome::Success)
}

/// The whole index file at `path`, read through the `Vfs` (which refuses
/// anything but a regular file without opening it).
fn read_index(fs: &FileSystem, path: &std::path::Path) -> Result<Vec<u8>, IoError> {
    let file = felix_segment::fs::open(fs, path, OpenMode::Read)?;
    let len = felix_segment::fs::file_len(&*file, path)?;
    let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
    felix_segment::fs::read_exact_at(&*file, path, &mut bytes, 0)?;
    Ok(bytes)
}

/// Prints an index that could not be read as a file: missing, or not a
/// regular file. Either way an open rebuilds it.
fn print_unread(
    out: &mut Out,
    id: u64,
    name: &felix_format::FileName,
    problem: &str,
    json: bool,
) -> Result<(), CliError> {
    if json {
        out.json(&json!({
            "type": "index", "segment": id, "len": Value::Null, "base_offset": Value::Null,
            "entries": [], "torn_bytes": 0, "valid": false, "problem": problem, "rebuilt_on_open": true,
        }))
    } else {
        out.line(format!("index {name}: {problem}"))
    }
}
