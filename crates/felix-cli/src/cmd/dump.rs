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

use std::io::{BufReader, Read, Seek, SeekFrom};

use felix_io::VfsFile;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use felix_format::{
    CorruptionKind, CorruptionSite, FileKind, IndexEntry, IndexHeader, RECORD_HEADER_LEN,
    RecordHeader, SEGMENT_HEADER_LEN, decode_record, decode_record_header, file_name, parse_index,
};
use felix_segment::{SegmentError, SegmentFile, SparseIndex};
use serde_json::{Value, json};

use crate::error::{CliError, Outcome};
use crate::output::{Out, Progress, progress_beside_stream};
use crate::target::{Resolved, ShardDir, resolve, segment_ids};

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
    /// headers (their payloads are not checksummed).
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
    /// Print the index instead: its entries and whether each begins the
    /// record it names. Implied when PATH is an index file.
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
        let mut outcome = Outcome::Success;
        for id in ids {
            outcome = outcome.and(dump_index(out, &shard, id, args.json)?);
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
    /// Damage was printed.
    Damage,
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
                && let Ok((next, _)) =
                    SegmentFile::open_read_only(&self.shard.dir, next_id, Arc::clone(&self.label))
                && next.base_offset() <= self.args.from
            {
                // Everything wanted is in a later segment.
                continue;
            }
            match self.segment(out, id, &bar)? {
                SegmentEnd::Complete => {}
                SegmentEnd::CountReached => break,
                SegmentEnd::Damage => return Ok(Outcome::Damage),
            }
        }
        Ok(Outcome::Success)
    }

    fn segment(&mut self, out: &mut Out, id: u64, bar: &Progress) -> Result<SegmentEnd, CliError> {
        let json = self.args.json;
        let (segment, file_len) =
            match SegmentFile::open_read_only(&self.shard.dir, id, Arc::clone(&self.label)) {
                Ok(opened) => opened,
                Err(SegmentError::Corrupt { site, kind }) => {
                    print_damage(out, json, &kind, &site)?;
                    return Ok(SegmentEnd::Damage);
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
        let start = start_at(&segment, file_len, self.args.from)?;
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
                    print_damage(out, json, &kind, &segment.site(position))?;
                    return Ok(SegmentEnd::Damage);
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

/// Where to start reading for `from`: the index entry at or below it when
/// the index loads and the entry begins the record it names, else the first
/// record. The index is never trusted beyond that check.
fn start_at(segment: &SegmentFile, file_len: u64, from: u64) -> Result<IndexEntry, CliError> {
    let first = IndexEntry {
        offset: segment.base_offset(),
        position: SEGMENT_HEADER_LEN as u64,
    };
    if from <= first.offset {
        return Ok(first);
    }
    let Ok(index) = SparseIndex::load(&segment.index_path(), segment.base_offset(), file_len)
    else {
        return Ok(first);
    };
    let entry = index.seek(from);
    Ok(if begins_record(segment, file_len, entry)? {
        entry
    } else {
        first
    })
}

/// Whether a verified record header with `entry.offset` begins at
/// `entry.position`.
fn begins_record(
    segment: &SegmentFile,
    file_len: u64,
    entry: IndexEntry,
) -> Result<bool, CliError> {
    if entry.position.saturating_add(RECORD_HEADER_LEN as u64) > file_len {
        return Ok(false);
    }
    let mut raw = [0u8; RECORD_HEADER_LEN];
    felix_segment::fs::read_exact_at(segment.file(), segment.path(), &mut raw, entry.position)?;
    Ok(decode_record_header(&raw).is_ok_and(|h| h.offset == entry.offset))
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

fn print_damage(
    out: &mut Out,
    json: bool,
    kind: &CorruptionKind,
    site: &CorruptionSite,
) -> Result<(), CliError> {
    if json {
        out.json(&json!({
            "type": "damage",
            "kind": kind.name(),
            "segment": site.segment,
            "position": site.position,
            "detail": kind.to_string(),
        }))
    } else {
        out.line(format!("  DAMAGE {}: {kind} at {site}", kind.name()))?;
        out.line("  (dump stops at the first damage; `felix-store verify` says whether it is repairable)")
    }
}

/// Prints the index of segment `id`; exit 1 when it is missing or invalid.
fn dump_index(out: &mut Out, shard: &ShardDir, id: u64, json: bool) -> Result<Outcome, CliError> {
    let name = file_name(id, FileKind::Index);
    let path = shard.dir.join(name.as_str());
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let problem = "missing; it is rebuilt from its segment on open";
            if json {
                out.json(&json!({
                    "type": "index", "segment": id, "len": Value::Null, "base_offset": Value::Null,
                    "entries": [], "torn_bytes": 0, "valid": false, "problem": problem,
                }))?;
            } else {
                out.line(format!("index {name}: {problem}"))?;
            }
            return Ok(Outcome::Damage);
        }
        Err(e) => return Err(CliError::io("read", &path, e)),
    };
    let label: Arc<str> = Arc::from(shard.name.as_str());
    let segment = SegmentFile::open_read_only(&shard.dir, id, label).ok();
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
    if problem.is_none()
        && let Some((seg, len)) = &segment
    {
        for (i, entry) in entries.iter().enumerate() {
            if !begins_record(seg, *len, *entry)? {
                problem = Some(format!(
                    "entry {i} (offset {}, position {}) does not begin the record it names",
                    entry.offset, entry.position
                ));
                break;
            }
        }
    }
    let valid = problem.is_none();
    if json {
        out.json(&json!({
            "type": "index",
            "segment": id,
            "len": bytes.len(),
            "base_offset": crate::output::opt(base_offset),
            "entries": entries.iter().map(|e| json!({"offset": e.offset, "position": e.position})).collect::<Vec<_>>(),
            "torn_bytes": torn_bytes,
            "valid": valid,
            "problem": problem,
        }))?;
    } else {
        out.line(format!(
            "index {name}: {} bytes, base offset {}, {} entries",
            bytes.len(),
            crate::output::opt_text(base_offset),
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
            (Some(problem), _) => {
                format!("INVALID: {problem}; it is rebuilt from its segment on open")
            }
            (None, Some(_)) => format!(
                "valid: every entry begins the record it names in {}",
                file_name(id, FileKind::Segment)
            ),
            (None, None) => {
                "valid as a file, but its segment could not be read to check the entries".to_owned()
            }
        };
        out.line(format!("  {verdict}"))?;
    }
    Ok(if valid {
        Outcome::Success
    } else {
        Outcome::Damage
    })
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
