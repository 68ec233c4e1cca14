//! `felix-store demo`: the README's first command. In a few seconds it shows
//! the whole life of a store: shards created, group commit from several
//! threads, every record read back and checked, a crash that tears the
//! newest segment mid-record, and what recovery finds and does on reopen.
//!
//! Payloads describe themselves (writer thread, sequence number, then bytes
//! derived from both), so reading back checks content and per-thread order,
//! not only checksums.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use felix_format::{FileKind, ShardKey, file_name};
use felix_recovery::{InspectOptions, inspect};
use felix_storage::{Durability, Preallocation, ReadBound, Record, Shard, Store, StoreConfig};

use crate::error::{CliError, Outcome};
use crate::output::Out;
use crate::report;
use crate::target::segment_ids;

const SHARDS: u32 = 3;
const THREADS_PER_SHARD: u32 = 4;
const APPENDS_PER_THREAD: u64 = 100;
const BATCH: u64 = 5;
const PAYLOAD_BYTES: usize = 200;
const SEGMENT_BYTES: u64 = 128 * 1024;
const INDEX_SPACING_BYTES: u64 = 4096;
/// Records appended without a sync just before the crash: never
/// acknowledged, so the crash may tear one of them.
const UNACKED_RECORDS: u64 = 3;
/// How far into the last record the crash cuts.
const CUT_INTO_RECORD_BYTES: u64 = 100;
/// The writer id the unacknowledged records carry.
const CRASH_WRITER: u32 = 99;

/// Arguments of `demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Create the store here (missing or empty) and keep it; by default a
    /// temporary directory, removed at the end.
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// Runs `demo`.
pub(crate) fn run(args: Args, out: &mut Out) -> Result<Outcome, CliError> {
    let (root, _temp) = match &args.dir {
        Some(dir) => {
            prepare_dir(dir)?;
            (dir.clone(), None)
        }
        None => {
            let temp = tempfile::Builder::new()
                .prefix("felix-demo-")
                .tempdir()
                .map_err(|e| {
                    CliError::io("create temporary directory in", std::env::temp_dir(), e)
                })?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    out.line(format!(
        "felix-store demo: a store in {} ({})",
        root.display(),
        if args.dir.is_some() {
            "kept afterwards"
        } else {
            "a temporary directory, removed at the end; --dir DIR keeps it"
        }
    ))?;
    let config = StoreConfig {
        segment_size_bytes: SEGMENT_BYTES,
        index_spacing_bytes: INDEX_SPACING_BYTES,
        preallocate: Preallocation::Stepped,
        durability: Durability::OnCommit,
        ..StoreConfig::default()
    };
    let keys: Vec<ShardKey> = (0..SHARDS)
        .map(|i| ShardKey::new("demo", "default", "orders", i))
        .collect();

    out.line("")?;
    out.line(format!(
        "1. create a store with {SHARDS} shards: {} KiB segments, an index entry every {} KiB, fsync on commit",
        SEGMENT_BYTES / 1024,
        INDEX_SPACING_BYTES / 1024
    ))?;
    let store = Store::options(&root).config(config).open()?;
    let shards: Vec<Arc<Shard>> = keys
        .iter()
        .map(|k| store.create_shard(k))
        .collect::<Result<_, _>>()?;
    for (key, shard) in keys.iter().zip(&shards) {
        out.line(format!("   {}/ (shard {key})", dir_name(shard)))?;
    }

    out.line("")?;
    let threads = SHARDS * THREADS_PER_SHARD;
    out.line(format!(
        "2. append from {threads} threads ({THREADS_PER_SHARD} per shard), {APPENDS_PER_THREAD} batches each of {BATCH} records of {PAYLOAD_BYTES} bytes; each append returns once an fdatasync covers it"
    ))?;
    let appended = Instant::now();
    std::thread::scope(|scope| -> Result<(), CliError> {
        let handles: Vec<_> = shards
            .iter()
            .flat_map(|shard| (0..THREADS_PER_SHARD).map(move |t| (shard, t)))
            .map(|(shard, t)| scope.spawn(move || append_thread(shard, t)))
            .collect();
        for handle in handles {
            handle
                .join()
                .unwrap_or_else(|_| Err(CliError::Usage("an appending thread panicked".into())))?;
        }
        Ok(())
    })?;
    let append_time = appended.elapsed();
    let records = u64::from(threads) * APPENDS_PER_THREAD * BATCH;
    let appends = u64::from(threads) * APPENDS_PER_THREAD;
    let syncs: u64 = shards.iter().map(|s| s.stats().syncs).sum();
    out.line(format!(
        "   {records} records in {appends} appends: {}, {:.0} records/s",
        duration(append_time),
        records as f64 / append_time.as_secs_f64().max(1e-9)
    ))?;
    out.line(format!(
        "   group commit: {appends} appends made durable by {syncs} fsyncs ({:.1} appends per sync)",
        appends as f64 / syncs.max(1) as f64
    ))?;
    for shard in &shards {
        out.line(format!(
            "   {}: offsets {}..{}, {} segments, durable up to {}",
            dir_name(shard),
            shard.offsets().base,
            shard.offsets().written,
            shard.segments().len(),
            shard.offsets().durable
        ))?;
    }

    out.line("")?;
    out.line("3. read every record back and check its payload and its writer's order")?;
    let read = Instant::now();
    let mut checked = 0;
    for shard in &shards {
        checked += check_shard(shard, 0..shard.offsets().written)?;
    }
    out.line(format!(
        "   {checked} records, all intact and in order: {}",
        duration(read.elapsed())
    ))?;

    // The crash: close the store, then append to one shard without a sync —
    // records never acknowledged, as a writer mid-batch would have — and
    // cut its newest segment inside the last of them.
    let victim = shards.first().map(|s| dir_name(s)).unwrap_or_default();
    let acked = shards.first().map_or(0, |s| s.offsets().durable);
    drop(shards);
    store.close()?;
    drop(store);
    let victim_dir = root.join(&victim);
    let (segment, from_len, to_len) = crash(&victim_dir, &victim, config)?;
    out.line("")?;
    out.line(format!(
        "4. crash: shard {victim} gets {UNACKED_RECORDS} more records without an fsync (never acknowledged), then its newest segment {} is cut from {from_len} to {to_len} bytes, {CUT_INTO_RECORD_BYTES} bytes into the record at offset {}",
        file_name(segment, FileKind::Segment),
        acked + UNACKED_RECORDS - 1
    ))?;

    out.line("")?;
    out.line(format!(
        "5. what recovery finds, read-only (`felix-store verify {}` reports the same):",
        crate::output::shell_quote(&victim_dir)
    ))?;
    let inspection = inspect(
        &felix_io::FileSystem::os(),
        &victim_dir,
        &victim,
        &InspectOptions::default(),
    )?;
    for finding in &inspection.findings {
        out.line(format!(" {}", report::finding_line(finding)))?;
    }
    for note in report::notes(&inspection) {
        out.line(format!("   note: {note}"))?;
    }

    out.line("")?;
    out.line("6. reopen the store; recovery runs as each shard opens")?;
    let store = Store::options(&root).config(config).open()?;
    let shards: Vec<Arc<Shard>> = keys
        .iter()
        .map(|k| store.open_shard(k))
        .collect::<Result<_, _>>()?;
    for shard in &shards {
        let stats = shard.stats();
        for action in &stats.recovery_actions {
            out.line(format!("   {}: done: {action}", dir_name(shard)))?;
        }
        out.line(format!(
            "   {}: opened in {}, offsets {}..{}, {} recovery action{}",
            dir_name(shard),
            duration(stats.recovery_time),
            shard.offsets().base,
            shard.offsets().written,
            stats.recovery_actions.len(),
            if stats.recovery_actions.len() == 1 {
                ""
            } else {
                "s"
            }
        ))?;
    }
    let Some(victim_shard) = shards.iter().find(|s| dir_name(s) == victim) else {
        return Err(CliError::Usage(format!(
            "shard {victim} vanished on reopen"
        )));
    };
    let survived = check_shard(victim_shard, 0..victim_shard.offsets().written)?;
    out.line(format!(
        "   {victim}: every acknowledged record (offsets 0..{acked}) is there and checks; {} of the {UNACKED_RECORDS} unacknowledged records survived, the torn one was dropped",
        survived - acked
    ))?;
    store.close()?;
    drop(shards);
    Ok(Outcome::Success)
}

/// A missing directory is created; an existing one must be empty, so the
/// demo never mixes its shards with real data.
fn prepare_dir(dir: &Path) -> Result<(), CliError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(CliError::Usage(format!(
                    "{} is not empty; demo needs a missing or empty directory",
                    dir.display()
                )));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| CliError::io("create directory", dir, e))
        }
        Err(e) => Err(CliError::io("read directory", dir, e)),
    }
}

/// A payload naming its writer and sequence number, then bytes derived
/// from both.
fn payload(writer: u32, seq: u64) -> Vec<u8> {
    let mut payload = format!("demo-writer-{writer:02}-seq-{seq:08}-").into_bytes();
    let start = payload.len();
    payload.extend((start..PAYLOAD_BYTES).map(|i| (u64::from(writer) * 31 + seq + i as u64) as u8));
    payload.truncate(PAYLOAD_BYTES);
    payload
}

/// The writer and sequence number a payload names, if it is exactly what
/// [`payload`] writes for them.
fn parse_payload(bytes: &[u8]) -> Option<(u32, u64)> {
    // The ASCII prefix is 28 bytes; the derived bytes after it need not be
    // UTF-8.
    let text = std::str::from_utf8(bytes.get(..28)?).ok()?;
    let rest = text.strip_prefix("demo-writer-")?;
    let writer: u32 = rest.get(..2)?.parse().ok()?;
    let seq: u64 = rest.get(7..15)?.parse().ok()?;
    (payload(writer, seq) == bytes).then_some((writer, seq))
}

/// One appending thread: writer `t` of its shard.
fn append_thread(shard: &Shard, t: u32) -> Result<(), CliError> {
    for batch in 0..APPENDS_PER_THREAD {
        let records: Vec<Record> = (0..BATCH)
            .map(|i| {
                Record::new(
                    crate::cmd::log_args::now_micros(),
                    payload(t, batch * BATCH + i),
                )
            })
            .collect();
        shard.append(&records).wait()?;
    }
    Ok(())
}

/// The name of `shard`'s directory, as the demo shows it: a store labels a
/// shard by its key, which the demo prints beside it.
fn dir_name(shard: &Shard) -> String {
    shard
        .dir()
        .file_name()
        .map_or_else(String::new, |name| name.to_string_lossy().into_owned())
}

/// Reads `range` through the run read and checks every payload, and that
/// each writer's sequence numbers ascend by one (its appends kept their
/// order).
fn check_shard(shard: &Shard, range: std::ops::Range<u64>) -> Result<u64, CliError> {
    let mut next_seq = std::collections::HashMap::<u32, u64>::new();
    let mut offset = range.start;
    while offset < range.end {
        let runs = shard.read_runs(offset, 1 << 20, ReadBound::Committed)?;
        if runs.is_empty() {
            break;
        }
        for record in runs.iter().flatten() {
            let Some((writer, seq)) = parse_payload(record.payload) else {
                return Err(CliError::Usage(format!(
                    "shard {}: offset {} holds a payload the demo did not write",
                    dir_name(shard),
                    record.offset
                )));
            };
            let expected = next_seq.entry(writer).or_default();
            if seq != *expected {
                return Err(CliError::Usage(format!(
                    "shard {}: offset {} is writer {writer}'s record {seq}, expected {expected}",
                    dir_name(shard),
                    record.offset
                )));
            }
            *expected += 1;
            offset = record.offset + 1;
        }
    }
    Ok(offset - range.start)
}

/// Appends unacknowledged records to the shard in `dir` and cuts its newest
/// segment inside the last of them. Returns the segment id and its length
/// before and after the cut.
fn crash(dir: &Path, label: &str, config: StoreConfig) -> Result<(u64, u64, u64), CliError> {
    {
        let shard = Shard::options(dir)
            .config(StoreConfig {
                durability: Durability::None,
                writeback_bytes: None,
                ..config
            })
            .label(label)
            .open()?;
        let records: Vec<Record> = (0..UNACKED_RECORDS)
            .map(|i| Record::new(crate::cmd::log_args::now_micros(), payload(CRASH_WRITER, i)))
            .collect();
        shard.append(&records).wait()?;
        // Dropped without a sync: the bytes are in the page cache and the
        // file, as they would be when the process died.
    }
    let Some(&newest) = segment_ids(dir)?.last() else {
        return Err(CliError::Usage(format!(
            "{} holds no segment",
            dir.display()
        )));
    };
    let path = dir.join(file_name(newest, FileKind::Segment).as_str());
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| CliError::io("open", &path, e))?;
    let from_len = file
        .metadata()
        .map_err(|e| CliError::io("stat", &path, e))?
        .len();
    let record_len = felix_format::record_encoded_len(PAYLOAD_BYTES as u32);
    let to_len = from_len - record_len + CUT_INTO_RECORD_BYTES;
    file.set_len(to_len)
        .map_err(|e| CliError::io("truncate", &path, e))?;
    Ok((newest, from_len, to_len))
}

/// A duration for people: milliseconds under a second, else seconds.
fn duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_round_trips_and_rejects_changes() {
        let p = payload(3, 1234);
        assert_eq!(p.len(), PAYLOAD_BYTES);
        assert_eq!(parse_payload(&p), Some((3, 1234)));
        let mut bad = p.clone();
        bad[100] ^= 1;
        assert_eq!(parse_payload(&bad), None);
    }
}
