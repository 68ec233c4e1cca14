//! `felix-store dump`: the records of a segment (or a shard) as they are on
//! disk — offset, timestamp, length, byte position, both checksums and,
//! when asked, the payload — or, with `--index`, an index file's entries and
//! whether they hold.
//!
//! Records are walked with the walk every reader shares
//! (`felix_segment::RecordWalk`, felix-format's `RecordCursor` through a
//! chunked reader), which checks them in the order a scan does (header CRC
//! and length bound, offset sequence, length against the file, record CRC),
//! so `dump` stops at the same damage `verify` names, at the same byte. It
//! reads sequentially in large chunks, so a gigabyte segment costs a system
//! call per mebibyte, and holds about a chunk and one record. Every file is
//! read through the `Vfs`, which opens regular files only: nothing named
//! like a segment or an index can make it block.
//!
//! Every segment is walked from its first record, even with `--from`: an
//! index entry may point at a record header embedded in a payload, and only
//! the walk from the start can tell (see `felix_segment::first_stale_entry`),
//! so `dump` never prints a record the segment does not hold.
//!
//! A shard that keeps a Raft log in felix-raft's log encoding 2 (its
//! raft-state file says so) is shown as entries as well: each record's
//! entry kind (its first byte) and term (the generation the epochs file
//! gives its offset), and with `--payload` the entry's body, the
//! producer's bytes of a normal entry.
//!
//! Exit status follows what a default open does (README, "Exit status"):
//! damage `dump` stops at is looked up with `felix_recovery::inspect`, and
//! only damage a default open refuses exits 1. An index that is missing or
//! wrong is never damage: indexes are rebuilt.

use std::path::PathBuf;
use std::sync::Arc;

use felix_format::epochs::{EpochEntry, MAX_EPOCHS_FILE_LEN, decode_epochs};
use felix_format::raft_state::{RAFT_LOG_ENCODING, raft_entry_kind_name};
use felix_format::{
    CorruptionKind, CorruptionSite, EPOCHS_FILE_NAME, FileKind, RecordHeader, SEGMENT_HEADER_LEN,
    ScanDepth, file_name,
};
use felix_io::{FileSystem, OpenMode};
use felix_recovery::{InspectOptions, inspect};
use felix_recovery::{StoredRaftState, read_raft_state};
use felix_segment::{RecordWalk, SegmentError, SegmentFile, WalkStep};
use serde_json::{Value, json};

use crate::error::{CliError, Outcome};
use crate::output::{Out, Progress, progress_beside_stream};
use crate::report::Verdict;
use crate::target::{Resolved, ShardDir, resolve, segment_ids};

mod index;

/// Payload bytes shown per record as hex in the human report.
const HEX_SHOWN_BYTES: usize = 64;
/// Payload bytes shown per record as text in the human report.
const TEXT_SHOWN_BYTES: usize = 256;

/// How payloads are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PayloadFormat {
    /// Not at all.
    None,
    /// As hex (the first 64 bytes in the human report, all with `--json`).
    Hex,
    /// As text, lossily decoded and escaped (the first 256 bytes in the human
    /// report, all with `--json`).
    Text,
}

/// Arguments of `dump`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A segment file, an index file, or a shard directory (every segment in
    /// order).
    path: PathBuf,
    /// First offset to print; records before it are stepped over by their
    /// headers from the segment's first record (their payloads are not
    /// checksummed, and indexes are not used: an index entry may be wrong).
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Print at most this many records.
    #[arg(long)]
    count: Option<u64>,
    /// How to print payloads.
    #[arg(long, value_enum, default_value_t = PayloadFormat::None)]
    payload: PayloadFormat,
    /// Print one JSON object per line (`"type"`: `segment`, `record`,
    /// `segment_end`, `damage`, or `index`).
    #[arg(long)]
    json: bool,
    /// Print the index instead: its entries and whether the segment's
    /// records place each entry's offset where it says. Implied when PATH is
    /// an index file.
    #[arg(long)]
    index: bool,
}

/// Runs `dump`.
pub(crate) fn run(args: Args, out: &mut Out) -> Result<Outcome, CliError> {
    let (shard, ids, index) = match resolve(&args.path)? {
        Resolved::Root(shards) => {
            return Err(CliError::Usage(format!(
                "{} is a root of {} shard directories; dump takes one shard directory or file",
                args.path.display(),
                shards.len()
            )));
        }
        Resolved::Shard(shard) => {
            let ids = segment_ids(&shard.dir)?;
            (shard, ids, args.index)
        }
        Resolved::File { shard, id, kind } => {
            (shard, vec![id], args.index || kind == FileKind::Index)
        }
    };
    let fs = FileSystem::os();
    if index {
        let newest = segment_ids(&shard.dir)?.last().copied();
        let mut outcome = Outcome::Success;
        for id in ids {
            outcome = outcome.and(index::dump_index(
                &fs,
                out,
                &shard,
                id,
                Some(id) == newest,
                args.json,
            )?);
        }
        return Ok(outcome);
    }
    Records::new(&fs, &args, &shard).dump(out, &ids)
}

/// State of a records dump across segments.
struct Records<'a> {
    fs: &'a FileSystem,
    args: &'a Args,
    shard: &'a ShardDir,
    label: Arc<str>,
    /// Records printed so far.
    printed: u64,
    /// The most to print.
    limit: u64,
    /// Set when the shard keeps a Raft log in log encoding 2: the
    /// generation history its terms come from.
    raft: Option<Vec<EpochEntry>>,
}

/// How one segment's dump ended.
enum SegmentEnd {
    /// Its records ended cleanly at the end of the file.
    Complete,
    /// `--count` was reached.
    CountReached,
    /// Damage was printed; the shard's verdict decides the exit status.
    Damage(Verdict),
}

impl<'a> Records<'a> {
    fn new(fs: &'a FileSystem, args: &'a Args, shard: &'a ShardDir) -> Self {
        Self {
            fs,
            args,
            shard,
            label: Arc::from(shard.name.as_str()),
            printed: 0,
            limit: args.count.unwrap_or(u64::MAX),
            raft: raft_log(fs, shard),
        }
    }

    fn dump(&mut self, out: &mut Out, ids: &[u64]) -> Result<Outcome, CliError> {
        let bar_on = !self.args.json && progress_beside_stream();
        // Bytes, not segments: one segment may be most of the work.
        // Through the Vfs, which opens regular files only; a file that
        // cannot be opened counts nothing (its open below says why).
        let total_bytes: u64 = ids
            .iter()
            .filter_map(|&id| {
                let path = self
                    .shard
                    .dir
                    .join(file_name(id, FileKind::Segment).as_str());
                let file = self.fs.open(&path, OpenMode::Read).ok()?;
                file.file_len().ok()
            })
            .sum();
        let bar = Progress::bytes(total_bytes, "dumping", bar_on);
        self.log_start(out)?;
        if self.raft.is_some() && !self.args.json {
            out.line(format!(
                "Raft log (log encoding {RAFT_LOG_ENCODING}, the raft-state file): each record is an entry, its term the generation that wrote it"
            ))?;
        }
        for (i, &id) in ids.iter().enumerate() {
            if self.printed >= self.limit {
                break;
            }
            if self.args.from > 0
                && let Some(&next_id) = ids.get(i + 1)
                && let Ok((next, _)) = SegmentFile::open(
                    self.fs,
                    &self.shard.dir,
                    next_id,
                    Arc::clone(&self.label),
                    OpenMode::Read,
                )
                && next.base_offset() <= self.args.from
            {
                // Everything wanted is in a later segment.
                continue;
            }
            match self.segment(out, id, &bar)? {
                SegmentEnd::Complete => {}
                SegmentEnd::CountReached => break,
                SegmentEnd::Damage(verdict) => return Ok(verdict.outcome()),
            }
        }
        Ok(Outcome::Success)
    }

    /// Says where the log begins when a log-start file records it: the
    /// records below are still printed (their files remain until retention
    /// or the next open removes them), but a read there is refused.
    fn log_start(&self, out: &mut Out) -> Result<(), CliError> {
        let Some(start) = felix_recovery::read_log_start(self.fs, &self.shard.dir).start() else {
            return Ok(());
        };
        if self.args.json {
            out.json(&json!({
                "type": "log_start",
                "start_offset": start.start_offset,
                "first_segment_id": start.first_segment_id,
                "moved_by": crate::report::moved_by_json(start.moved_by),
            }))
        } else {
            out.line(format!(
                "log start: {} (the log-start file; {}, reads there are refused)",
                start.start_offset,
                crate::report::start_reason(start.moved_by)
            ))
        }
    }

    /// What a default open makes of the damage `dump` stopped at at
    /// `site`: the verdict on the whole shard, as `verify` gives it (rot
    /// an open does not look for, when the open's findings do not include
    /// it).
    fn verdict(&self, site: &CorruptionSite) -> Result<Verdict, CliError> {
        let inspection = inspect(
            self.fs,
            &self.shard.dir,
            &self.shard.name,
            &InspectOptions::default(),
        )?;
        let seen = inspection
            .findings
            .iter()
            .any(|f| f.site.segment == site.segment && f.site.position == site.position);
        Ok(Verdict::with_rot(&inspection, !seen))
    }

    /// Prints the damage `dump` stopped at and what a default open does
    /// about it.
    fn damage(
        &self,
        out: &mut Out,
        kind: &CorruptionKind,
        site: &CorruptionSite,
    ) -> Result<SegmentEnd, CliError> {
        let verdict = self.verdict(site)?;
        if self.args.json {
            out.json(&json!({
                "type": "damage",
                "kind": kind.name(),
                "segment": site.segment,
                "position": site.position,
                "detail": kind.to_string(),
                "verdict": verdict.as_str(),
            }))?;
        } else {
            out.line(format!("  DAMAGE {}: {kind} at {site}", kind.name()))?;
            out.line(format!(
                "  (dump stops at the first damage) {}",
                verdict.human(&self.shard.dir)
            ))?;
        }
        Ok(SegmentEnd::Damage(verdict))
    }

    fn segment(&mut self, out: &mut Out, id: u64, bar: &Progress) -> Result<SegmentEnd, CliError> {
        let json = self.args.json;
        let (segment, file_len) = match SegmentFile::open(
            self.fs,
            &self.shard.dir,
            id,
            Arc::clone(&self.label),
            OpenMode::Read,
        ) {
            Ok(opened) => opened,
            Err(SegmentError::Corrupt { site, kind }) => {
                return self.damage(out, &kind, &site);
            }
            Err(other) => return Err(other.into()),
        };
        let header = segment.header();
        if json {
            out.json(&json!({
                "type": "segment",
                "segment": id,
                "base_offset": header.base_offset,
                "created_at_micros": header.created_at_micros,
                "file_len": file_len,
            }))?;
        } else {
            out.line(format!(
                "segment {}: base offset {}, created_at_micros {}, {file_len} bytes",
                file_name(id, FileKind::Segment),
                header.base_offset,
                header.created_at_micros
            ))?;
            out.line(format!(
                "  {:>10}  {:>16}  {:>11}  {:>10}  {:>10}  {:>10}",
                "offset", "timestamp_micros", "payload_len", "position", "header_crc", "checksum"
            ))?;
        }
        // The first record, never an index entry: see the module's doc.
        let mut walk = RecordWalk::from_first_record(&segment, file_len, ScanDepth::Headers);
        bar.inc(SEGMENT_HEADER_LEN as u64);
        loop {
            // Records before `--from` are stepped over by their headers.
            let wanted = walk.cursor().next_offset() >= self.args.from;
            walk.set_depth(if wanted {
                ScanDepth::Full
            } else {
                ScanDepth::Headers
            });
            match walk.step()? {
                WalkStep::End => break,
                WalkStep::Damage(damage) => {
                    return self.damage(out, &damage.kind, &segment.site(damage.position));
                }
                WalkStep::Record(record) => {
                    bar.inc(record.encoded_len());
                    if let Some(payload) = record.payload() {
                        self.print_record(out, id, &record.header, record.position, payload)?;
                        self.printed += 1;
                        if self.printed >= self.limit {
                            return Ok(SegmentEnd::CountReached);
                        }
                    }
                }
            }
        }
        let (next_offset, end_position) = (walk.cursor().next_offset(), walk.cursor().position());
        if json {
            out.json(&json!({
                "type": "segment_end",
                "segment": id,
                "next_offset": next_offset,
                "end_position": end_position,
            }))?;
        } else {
            out.line(format!(
                "  end of segment: next offset {next_offset}, records end at byte {end_position} (the end of the file)"
            ))?;
        }
        Ok(SegmentEnd::Complete)
    }

    fn print_record(
        &self,
        out: &mut Out,
        segment: u64,
        header: &RecordHeader,
        position: u64,
        payload: &[u8],
    ) -> Result<(), CliError> {
        // A Raft entry's payload is its body, past the kind byte.
        let entry = self.raft.as_ref().map(|epochs| {
            let kind = payload.first().copied();
            let name = kind.and_then(raft_entry_kind_name);
            let term = epochs
                .iter()
                .rev()
                .find(|e| e.start_offset <= header.offset)
                .map(|e| e.generation);
            (kind, name, term)
        });
        let payload = match entry {
            Some((_, Some(_), _)) => payload.get(1..).unwrap_or_default(),
            _ => payload,
        };
        if self.args.json {
            let mut value = json!({
                "type": "record",
                "segment": segment,
                "offset": header.offset,
                "timestamp_micros": header.timestamp_micros,
                "payload_len": header.payload_len,
                "position": position,
                "header_crc": header.header_crc,
                "checksum": header.checksum,
            });
            if let Value::Object(map) = &mut value {
                if let Some((kind, name, term)) = entry {
                    map.insert(
                        "entry".into(),
                        json!({ "kind": name, "kind_byte": kind, "term": term }),
                    );
                }
                match self.args.payload {
                    PayloadFormat::None => {}
                    PayloadFormat::Hex => {
                        map.insert("payload_hex".into(), hex(payload).into());
                    }
                    PayloadFormat::Text => {
                        map.insert(
                            "payload_text".into(),
                            String::from_utf8_lossy(payload).into_owned().into(),
                        );
                    }
                }
            }
            return out.json(&value);
        }
        out.line(format!(
            "  {:>10}  {:>16}  {:>11}  {:>10}  {:#010x}  {:#010x}",
            header.offset,
            header.timestamp_micros,
            header.payload_len,
            position,
            header.header_crc,
            header.checksum
        ))?;
        if let Some((kind, name, term)) = entry {
            let term = term.map_or_else(|| "unknown".to_owned(), |t| t.to_string());
            out.line(match (kind, name) {
                (_, Some(name)) => format!("      entry: {name}, term {term}"),
                (Some(byte), None) => {
                    format!("      entry: none (first byte {byte:#04x} is no entry kind)")
                }
                (None, None) => "      entry: none (empty record)".to_owned(),
            })?;
        }
        let (shown, limit) = match self.args.payload {
            PayloadFormat::None => return Ok(()),
            PayloadFormat::Hex => (HEX_SHOWN_BYTES, HEX_SHOWN_BYTES),
            PayloadFormat::Text => (TEXT_SHOWN_BYTES, TEXT_SHOWN_BYTES),
        };
        let head = payload.get(..shown.min(payload.len())).unwrap_or_default();
        let rest = payload.len().saturating_sub(limit);
        let more = if rest > 0 {
            format!(" … (+{rest} bytes)")
        } else {
            String::new()
        };
        let body = match self.args.payload {
            PayloadFormat::Hex => spaced_hex(head),
            _ => format!("\"{}\"", escape_text(&String::from_utf8_lossy(head))),
        };
        out.line(format!("      payload: {body}{more}"))
    }
}

/// The generation history of `shard` when it keeps a Raft log in log
/// encoding 2 (its raft-state file decodes and says so); `None` otherwise,
/// and when the file or the epochs file cannot be read (the records are
/// then shown as records only; `verify` reports such files).
fn raft_log(fs: &FileSystem, shard: &ShardDir) -> Option<Vec<EpochEntry>> {
    let StoredRaftState::State(state) = read_raft_state(fs, &shard.dir) else {
        return None;
    };
    if state.log_encoding != RAFT_LOG_ENCODING {
        return None;
    }
    let path = shard.dir.join(EPOCHS_FILE_NAME);
    match felix_io::read_small_file(fs, &path, MAX_EPOCHS_FILE_LEN) {
        Ok(Some(bytes)) => decode_epochs(&bytes).ok().map(Iterator::collect),
        Ok(None) => Some(Vec::new()),
        Err(_) => None,
    }
}

/// Escapes control characters, double quotes and backslashes as Rust
/// would, leaving `'` alone: the text is shown between double quotes.
fn escape_text(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c == '\'' {
                c.to_string()
            } else {
                c.escape_debug().to_string()
            }
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn spaced_hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}
