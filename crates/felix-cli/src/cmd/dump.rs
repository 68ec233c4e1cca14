//! `felix-store dump`: the records of a segment (or a shard) as they are on
//! disk — offset, timestamp, length, byte position, both checksums and,
//! when asked, the payload — or, with `--index`, an index file's entries and
//! whether they hold.
//!
//! Records are decoded with `felix-format`'s decoders in the order a scan
//! checks them (header CRC and length bound, offset sequence, length against
//! the file, record CRC), so `dump` stops at the same damage `verify` names,
//! at the same byte. It reads sequentially through a large buffer, so a
//! gigabyte segment costs a system call per mebibyte, and only ever holds
//! one record's payload.
//!
//! Every segment is walked from its first record, even with `--from`: an
//! index entry may point at a record header embedded in a payload, and only
//! the walk from the start can tell (see `felix_recovery::first_stale_entry`),
//! so `dump` never prints a record the segment does not hold.
//!
//! Exit status follows what a default open does (README, "Exit status"):
//! damage `dump` stops at is looked up with `felix_recovery::inspect`, and
//! only damage a default open refuses exits 1. An index that is missing or
//! wrong is never damage: indexes are rebuilt.

use std::io::{BufReader, Read, Seek, SeekFrom};

use felix_io::VfsFile;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use felix_format::{
    CorruptionKind, CorruptionSite, FileKind, IndexEntry, RECORD_HEADER_LEN, RecordHeader,
    SEGMENT_HEADER_LEN, decode_record, decode_record_header, file_name,
};
use felix_recovery::{InspectOptions, inspect};
use felix_segment::{SegmentError, SegmentFile};
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
/// Read-ahead of the sequential reader.
const READ_BUFFER_BYTES: usize = 1024 * 1024;

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
    if index {
        let newest = segment_ids(&shard.dir)?.last().copied();
        let mut outcome = Outcome::Success;
        for id in ids {
            outcome = outcome.and(index::dump_index(
                out,
                &shard,
                id,
                Some(id) == newest,
                args.json,
            )?);
        }
        return Ok(outcome);
    }
    Records::new(&args, &shard).dump(out, &ids)
}

/// State of a records dump across segments.
struct Records<'a> {
    args: &'a Args,
    shard: &'a ShardDir,
    label: Arc<str>,
    /// Records printed so far.
    printed: u64,
    /// The most to print.
    limit: u64,
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
    fn new(args: &'a Args, shard: &'a ShardDir) -> Self {
        Self {
            args,
            shard,
            label: Arc::from(shard.name.as_str()),
            printed: 0,
            limit: args.count.unwrap_or(u64::MAX),
        }
    }

    fn dump(&mut self, out: &mut Out, ids: &[u64]) -> Result<Outcome, CliError> {
        let bar_on = !self.args.json && progress_beside_stream();
        // Bytes, not segments: one segment may be most of the work.
        let total_bytes: u64 = ids
            .iter()
            .filter_map(|&id| {
                let path = self
                    .shard
                    .dir
                    .join(file_name(id, FileKind::Segment).as_str());
                std::fs::metadata(path).ok().map(|m| m.len())
            })
            .sum();
        let bar = Progress::bytes(total_bytes, "dumping", bar_on);
        for (i, &id) in ids.iter().enumerate() {
            if self.printed >= self.limit {
                break;
            }
            if self.args.from > 0
                && let Some(&next_id) = ids.get(i + 1)
                && let Ok((next, _)) = SegmentFile::open(
                    &felix_io::FileSystem::os(),
                    &self.shard.dir,
                    next_id,
                    Arc::clone(&self.label),
                    felix_io::OpenMode::Read,
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

    /// What a default open makes of the damage `dump` stopped at: the
    /// verdict on the whole shard, as `verify` gives it.
    fn verdict(&self) -> Result<Verdict, CliError> {
        let inspection = inspect(
            &felix_io::FileSystem::os(),
            &self.shard.dir,
            &self.shard.name,
            &InspectOptions::default(),
        )?;
        Ok(Verdict::of(&inspection))
    }

    /// Prints the damage `dump` stopped at and what a default open does
    /// about it.
    fn damage(
        &self,
        out: &mut Out,
        kind: &CorruptionKind,
        site: &CorruptionSite,
    ) -> Result<SegmentEnd, CliError> {
        let verdict = self.verdict()?;
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
            &felix_io::FileSystem::os(),
            &self.shard.dir,
            id,
            Arc::clone(&self.label),
            felix_io::OpenMode::Read,
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
        let start = IndexEntry {
            offset: segment.base_offset(),
            position: SEGMENT_HEADER_LEN as u64,
        };
        let mut cursor = Cursor::new(&segment, file_len, start)?;
        bar.inc(start.position);
        loop {
            let full = cursor.offset >= self.args.from;
            let at = cursor.position;
            let step = cursor.step(full)?;
            bar.inc(cursor.position - at);
            match step {
                Step::End => break,
                Step::Skipped => {}
                Step::Damage { kind, position } => {
                    return self.damage(out, &kind, &segment.site(position));
                }
                Step::Record { header, position } => {
                    self.print_record(out, id, &header, position, cursor.payload())?;
                    self.printed += 1;
                    if self.printed >= self.limit {
                        return Ok(SegmentEnd::CountReached);
                    }
                }
            }
        }
        if json {
            out.json(&json!({
                "type": "segment_end",
                "segment": id,
                "next_offset": cursor.offset,
                "end_position": cursor.position,
            }))?;
        } else {
            out.line(format!(
                "  end of segment: next offset {}, records end at byte {} (the end of the file)",
                cursor.offset, cursor.position
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

/// What one step of a cursor met.
enum Step {
    /// The end of the file, exactly at a record boundary.
    End,
    /// A record before `--from`, stepped over by its header.
    Skipped,
    /// A verified record; its payload is [`Cursor::payload`].
    Record { header: RecordHeader, position: u64 },
    /// Damage to the record beginning at `position`.
    Damage { kind: CorruptionKind, position: u64 },
}

/// `Read` and `Seek` over a file that only offers positioned reads, so a
/// `BufReader` can read ahead in large chunks.
struct PositionedReader<'a> {
    file: &'a dyn VfsFile,
    position: u64,
}

impl Read for PositionedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let len = self.file.file_len()?;
        let available = usize::try_from(len.saturating_sub(self.position)).unwrap_or(usize::MAX);
        let n = buf.len().min(available);
        let Some(target) = buf.get_mut(..n) else {
            return Ok(0);
        };
        if n > 0 {
            self.file.read_exact_at(target, self.position)?;
            self.position += n as u64;
        }
        Ok(n)
    }
}

impl Seek for PositionedReader<'_> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let invalid = || {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "seek before the start of the file",
            )
        };
        self.position = match to {
            SeekFrom::Start(position) => position,
            SeekFrom::Current(delta) => self
                .position
                .checked_add_signed(delta)
                .ok_or_else(invalid)?,
            SeekFrom::End(delta) => self
                .file
                .file_len()?
                .checked_add_signed(delta)
                .ok_or_else(invalid)?,
        };
        Ok(self.position)
    }
}

/// A sequential reader of one segment's records.
struct Cursor<'a> {
    reader: BufReader<PositionedReader<'a>>,
    path: &'a Path,
    file_len: u64,
    /// Where the next record begins.
    position: u64,
    /// The offset the next record must carry.
    offset: u64,
    /// The last record read in full, header and payload.
    buf: Vec<u8>,
}

impl<'a> Cursor<'a> {
    fn new(segment: &'a SegmentFile, file_len: u64, start: IndexEntry) -> Result<Self, CliError> {
        let file = PositionedReader {
            file: segment.file(),
            position: start.position,
        };
        let reader = BufReader::with_capacity(READ_BUFFER_BYTES, file);
        Ok(Self {
            reader,
            path: segment.path(),
            file_len,
            position: start.position,
            offset: start.offset,
            buf: Vec::new(),
        })
    }

    fn payload(&self) -> &[u8] {
        self.buf.get(RECORD_HEADER_LEN..).unwrap_or_default()
    }

    /// Reads the next record: in full (both checksums) when `full`, else by
    /// its header only.
    fn step(&mut self, full: bool) -> Result<Step, CliError> {
        let position = self.position;
        let available = self.file_len - position;
        if available == 0 {
            return Ok(Step::End);
        }
        let damage = |kind| Ok(Step::Damage { kind, position });
        if available < RECORD_HEADER_LEN as u64 {
            return damage(CorruptionKind::Truncated {
                needed: RECORD_HEADER_LEN as u64,
                available,
            });
        }
        self.buf.resize(RECORD_HEADER_LEN, 0);
        self.read_into(0)?;
        let header = match decode_record_header(&self.buf)
            .and_then(|h| h.check_offset(self.offset).map(|()| h))
        {
            Ok(header) => header,
            Err(kind) => return damage(kind),
        };
        let total = header.encoded_len();
        if total > available {
            return damage(CorruptionKind::Truncated {
                needed: total,
                available,
            });
        }
        let payload_len = u64::from(header.payload_len);
        if full {
            // The header verified and the length is within MAX_PAYLOAD_BYTES,
            // so this allocation is bounded.
            self.buf
                .resize(RECORD_HEADER_LEN + header.payload_len as usize, 0);
            self.read_into(RECORD_HEADER_LEN)?;
            if let Err(kind) = decode_record(&self.buf, Some(self.offset)) {
                return damage(kind);
            }
        } else {
            self.reader
                .seek_relative(payload_len as i64)
                .map_err(|e| CliError::io("seek", self.path, e))?;
        }
        self.position += total;
        self.offset += 1;
        Ok(if full {
            Step::Record { header, position }
        } else {
            Step::Skipped
        })
    }

    fn read_into(&mut self, from: usize) -> Result<(), CliError> {
        let target = self.buf.get_mut(from..).unwrap_or_default();
        self.reader
            .read_exact(target)
            .map_err(|e| CliError::io("read", self.path, e))
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
