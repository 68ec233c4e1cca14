//! `time-lookup felix`: `Shard::offset_for_timestamp` at random timestamps
//! on the prepared shard, each lookup timed beside a random read by offset
//! in the same run (one of each in turn), so the two p50s compare like for
//! like on the same page cache.

use std::time::Instant;

use felix_format::RECORD_HEADER_LEN;
use felix_storage::ReadBound;
use serde_json::json;

use crate::args::Args;
use crate::felix::{Result, open_for_reads, random_offsets, shard_dir};
use crate::report::{Latencies, Measurement};

fn err(what: impl std::fmt::Display) -> String {
    what.to_string()
}

/// `--lookups` lookups at timestamps drawn between the oldest record's and
/// the newest's, interleaved with as many single-record reads at random
/// offsets. The line's latencies are the lookups'; `read_p50_us` and
/// `lookup_over_read_p50` carry the reads' p50 and the ratio.
pub fn time_lookup(args: &Args) -> Result<Measurement> {
    let dir = shard_dir(&args.dir()?);
    let lookups: usize = args.get("lookups", 100_000usize)?;
    let shard = open_for_reads(&dir)?;
    crate::warm_page_cache(&dir).map_err(err)?;
    let (base, end) = (shard.offsets().base, shard.offsets().written);
    let oldest = shard
        .read(base, 1, ReadBound::Committed)
        .map_err(err)?
        .first()
        .map(|r| r.timestamp_micros)
        .ok_or("the shard is empty")?;
    let newest = shard
        .segments()
        .iter()
        .filter_map(|s| s.max_timestamp_micros)
        .max()
        .ok_or("no timestamps")?;
    // Load every sealed segment's file, index and time index before
    // measuring: a first touch is the open's cost, not a lookup's.
    for s in shard.segments() {
        shard
            .read(s.extent.base_offset, 1, ReadBound::Committed)
            .map_err(err)?;
        if let Some(max) = s.max_timestamp_micros {
            shard
                .offset_for_timestamp(max, ReadBound::Committed)
                .map_err(err)?;
        }
    }
    let span = newest.saturating_sub(oldest).max(1);
    let stamps: Vec<u64> = random_offsets(lookups, 0, span, 11)
        .into_iter()
        .map(|d| oldest + d)
        .collect();
    let offsets = random_offsets(lookups, base, end, 7);
    let mut lookup_latencies = Latencies::with_capacity(lookups);
    let mut read_latencies = Latencies::with_capacity(lookups);
    let mut found = 0u64;
    let mut bytes = 0u64;
    let started = Instant::now();
    for (&t, &offset) in stamps.iter().zip(&offsets) {
        let at = Instant::now();
        let hit = shard
            .offset_for_timestamp(t, ReadBound::Committed)
            .map_err(err)?;
        lookup_latencies.push(at.elapsed());
        let hit = hit.ok_or_else(|| format!("no record at or after timestamp {t}"))?;
        if hit.timestamp_micros < t {
            return Err(format!("lookup of {t} answered {hit:?}"));
        }
        found += 1;
        let at = Instant::now();
        let got = shard.read(offset, 1, ReadBound::Committed).map_err(err)?;
        read_latencies.push(at.elapsed());
        let record = got.first().ok_or("read returned nothing")?;
        bytes += RECORD_HEADER_LEN as u64 + record.payload.len() as u64;
    }
    let elapsed = started.elapsed();
    let p50 = |l: &Latencies| {
        l.summary()
            .get("p50")
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(f64::NAN)
    };
    let (lookup_p50, read_p50) = (p50(&lookup_latencies), p50(&read_latencies));
    let mut m = Measurement::new("time-lookup", "felix", json!({"shard_records": end - base}));
    m.records = found;
    m.bytes = bytes;
    m.elapsed = elapsed;
    m.latencies = Some(lookup_latencies);
    m.notes.insert("read_p50_us".into(), json!(read_p50));
    m.notes
        .insert("lookup_over_read_p50".into(), json!(lookup_p50 / read_p50));
    Ok(m)
}
