//! The run read (`Shard::read_runs`) against an in-memory model and the
//! per-record read, under random appends (durable and not), syncs, rolls
//! and read bounds; and every bit flip of a small shard refused by the run
//! read exactly where the per-record read refuses it.

mod common;

use std::path::Path;

use felix_format::decode_record;
use felix_io::FileSystem;
use felix_io::sim::{CrashPlan, SimFs};
use felix_storage::{
    Durability, Preallocation, ReadBound, Record, RecordRun, Shard, StorageError, StoreConfig,
};
use proptest::prelude::*;

fn config() -> StoreConfig {
    StoreConfig {
        segment_size_bytes: 900,
        index_spacing_bytes: 96,
        preallocate: Preallocation::Off,
        durability: Durability::OnCommit,
        writeback_bytes: None,
        ..StoreConfig::default()
    }
}

fn payload(offset: u64, len: u16) -> Vec<u8> {
    (0..len)
        .map(|i| (offset as u8).wrapping_mul(31).wrapping_add(i as u8))
        .collect()
}

#[derive(Debug, Clone)]
enum Op {
    /// An `OnCommit` append: durable when it returns.
    Append {
        count: u8,
        len: u16,
    },
    /// Written, not yet durable (unless a roll syncs it): readable under
    /// `Written` and `Below`.
    AppendNowait {
        count: u8,
        len: u16,
    },
    Sync,
    Read {
        at: prop::sample::Index,
        budget: u16,
        bound: u8,
        below: prop::sample::Index,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u8..6, 0u16..260).prop_map(|(count, len)| Op::Append { count, len }),
        3 => (1u8..6, 0u16..260).prop_map(|(count, len)| Op::AppendNowait { count, len }),
        1 => Just(Op::Sync),
        6 => (any::<prop::sample::Index>(), 0u16..3000, 0u8..3, any::<prop::sample::Index>())
            .prop_map(|(at, budget, bound, below)| Op::Read { at, budget, bound, below }),
    ]
}

/// The runs' records, decoded again from the runs' bytes with every check
/// felix-format makes (header CRC, record CRC, offset): what a consumer
/// receiving the bytes on a socket would find.
fn decode_runs(runs: &[RecordRun]) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    for run in runs {
        let mut rest = &run.bytes()[..];
        let mut expected = run.first_offset();
        while !rest.is_empty() {
            let record = decode_record(rest, Some(expected)).unwrap();
            out.push((expected, record.payload.to_vec()));
            rest = &rest[record.encoded_len() as usize..];
            expected += 1;
        }
        assert_eq!(expected, run.next_offset());
    }
    out
}

/// The segment (by index in `shard.segments()`) holding `offset`.
fn segment_of(shard: &Shard, offset: u64) -> usize {
    shard
        .segments()
        .iter()
        .position(|s| offset >= s.extent.base_offset && offset < s.extent.next_offset)
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn read_runs_matches_the_model_and_the_per_record_read(ops in proptest::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let shard = Shard::options(dir.path()).config(config()).label("runs").open().unwrap();
        // Every record written, and how many of them are durable.
        let mut model: Vec<Vec<u8>> = Vec::new();
        let mut durable = 0u64;
        for op in ops {
            match op {
                Op::Append { count, len } | Op::AppendNowait { count, len } => {
                    let next = model.len() as u64;
                    let batch: Vec<Vec<u8>> = (0..u64::from(count)).map(|i| payload(next + i, len)).collect();
                    let records: Vec<Record> = batch.iter().map(|p| Record::new(next, p.clone())).collect();
                    if matches!(op, Op::Append { .. }) {
                        shard.append(&records).wait().unwrap();
                        model.extend(batch);
                        // One sync covers everything written before it.
                        durable = model.len() as u64;
                    } else {
                        shard.append(&records).written().unwrap();
                        model.extend(batch);
                    }
                }
                Op::Sync => {
                    shard.sync().unwrap();
                    durable = model.len() as u64;
                }
                Op::Read { at, budget, bound, below } => {
                    let written = model.len() as u64;
                    // A roll syncs the segment it seals, so more may be
                    // durable than the appends that waited made so.
                    let offsets = shard.offsets();
                    prop_assert!(offsets.durable >= durable && offsets.written == written, "{:?}", offsets);
                    prop_assert_eq!(offsets.readable, offsets.durable);
                    let (bound, end) = match bound {
                        0 => (ReadBound::Committed, offsets.readable),
                        1 => (ReadBound::Written, written),
                        _ => {
                            let hw = below.index(model.len() + 2) as u64;
                            (ReadBound::Below(hw), hw.min(written))
                        }
                    };
                    let from = at.index(model.len() + 1) as u64;
                    let budget = u64::from(budget);
                    let runs = shard.read_runs(from, budget, bound).unwrap();
                    let records = shard.read(from, budget, bound).unwrap();
                    // The per-record read is the run read, record by record.
                    let flat: Vec<(u64, Vec<u8>)> = runs
                        .iter()
                        .flat_map(|run| run.iter().map(|r| (r.offset, r.payload.to_vec())).collect::<Vec<_>>())
                        .collect();
                    let per_record: Vec<(u64, Vec<u8>)> = records.iter().map(|r| (r.offset, r.payload.to_vec())).collect();
                    prop_assert_eq!(&flat, &per_record);
                    // The bytes are the records, checksums and all.
                    prop_assert_eq!(&decode_runs(&runs), &flat);
                    // Records from `from`, as the model holds them, never past the bound.
                    for (k, (offset, bytes)) in flat.iter().enumerate() {
                        prop_assert_eq!(*offset, from + k as u64);
                        prop_assert!(*offset < end, "offset {} past the bound's end {}", offset, end);
                        prop_assert_eq!(bytes, &model[*offset as usize]);
                    }
                    if from >= end {
                        prop_assert!(runs.is_empty());
                        continue;
                    }
                    prop_assert!(!flat.is_empty(), "nothing read at {} below {}", from, end);
                    // One run per segment crossed, back to back.
                    let total: u64 = runs.iter().map(|r| r.bytes().len() as u64).sum();
                    for pair in runs.windows(2) {
                        prop_assert_eq!(pair[0].next_offset(), pair[1].first_offset());
                        prop_assert_ne!(segment_of(&shard, pair[0].first_offset()), segment_of(&shard, pair[1].first_offset()));
                    }
                    for run in &runs {
                        prop_assert!(!run.is_empty());
                        prop_assert_eq!(segment_of(&shard, run.first_offset()), segment_of(&shard, run.next_offset() - 1));
                    }
                    // Within the budget past the first record, and as much as it allows.
                    prop_assert!(flat.len() == 1 || total <= budget, "{} bytes for a budget of {}", total, budget);
                    let next = from + flat.len() as u64;
                    if next < end {
                        let next_len = 28 + model[next as usize].len() as u64;
                        prop_assert!(total + next_len > budget, "stopped at {} with {} of {} bytes", next, total, budget);
                    }
                }
            }
        }
    }
}

const DIR: &str = "/shard";

/// Three segments or more of records of varied sizes, on a simulated disk,
/// everything durable.
fn build() -> SimFs {
    let sim = SimFs::new();
    let config = StoreConfig {
        segment_size_bytes: 220,
        index_spacing_bytes: 48,
        ..config()
    };
    let shard = Shard::options(Path::new(DIR))
        .file_system(FileSystem::new(sim.clone()))
        .config(config)
        .label("flips")
        .open()
        .unwrap();
    for o in 0..10u64 {
        shard
            .append(&[Record::new(o, payload(o, (o % 5 * 9) as u16))])
            .wait()
            .unwrap();
    }
    assert!(shard.segments().len() >= 3, "{}", shard.segments().len());
    drop(shard);
    sim.crash(&CrashPlan::everything(sim.pending().len()))
}

#[test]
fn read_runs_every_bit_flip_is_refused_where_the_per_record_read_refuses_it() {
    use felix_io::Vfs;
    let pristine = build();
    let segments: Vec<_> = pristine
        .list_dir(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|e| e.name.to_string_lossy().ends_with(".log"))
        .map(|e| Path::new(DIR).join(e.name))
        .collect();
    let (mut flips, mut refused_runs) = (0u64, 0u64);
    for path in &segments {
        let bytes = pristine.read_file(path).unwrap();
        for bit in 0..bytes.len() * 8 {
            flips += 1;
            let sim = pristine.crash(&CrashPlan::durable_only());
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            sim.write_file(path, &flipped).unwrap();
            let what = format!("{} bit {bit}", path.display());
            let Ok(shard) = Shard::options(Path::new(DIR))
                .file_system(FileSystem::new(sim))
                .config(config())
                .label("flips")
                .open()
            else {
                continue;
            };
            let end = shard.offsets().written;
            // Each record alone: what the per-record read serves or refuses.
            let single: Vec<Result<Vec<u8>, String>> = (shard.offsets().base..end)
                .map(|o| {
                    shard
                        .read(o, 1, ReadBound::Committed)
                        .map(|r| r[0].payload.to_vec())
                        .map_err(|e| e.to_string())
                })
                .collect();
            let at = |o: u64| &single[(o - shard.offsets().base) as usize];
            for from in shard.offsets().base..end {
                for budget in [1, 1 << 20] {
                    let runs = shard.read_runs(from, budget, ReadBound::Written);
                    let records = shard.read(from, budget, ReadBound::Written);
                    match (&runs, &records) {
                        (Ok(runs), Ok(records)) => {
                            let flat = decode_runs(runs);
                            assert_eq!(flat.len(), records.len(), "{what}");
                            for (offset, payload_read) in flat {
                                // Every record a run returns was served alone too, and is the one written.
                                assert_eq!(
                                    at(offset).as_ref().ok(),
                                    Some(&payload_read),
                                    "{what}, offset {offset}"
                                );
                                assert_eq!(
                                    payload_read,
                                    payload(offset, (offset % 5 * 9) as u16),
                                    "{what}, offset {offset}"
                                );
                            }
                        }
                        (Err(run_err), Err(record_err)) => {
                            refused_runs += 1;
                            assert_eq!(run_err.to_string(), record_err.to_string(), "{what}");
                            assert!(
                                matches!(run_err, StorageError::Segment { .. }),
                                "{what}: {run_err}"
                            );
                            // The damage is real: a record the run would hold is refused alone too.
                            assert!(
                                (from..end).any(|o| at(o).is_err()),
                                "{what}: the run read from {from} refused records each served alone"
                            );
                        }
                        _ => panic!(
                            "{what}, from {from}, budget {budget}: runs {runs:?}, records {records:?}"
                        ),
                    }
                }
            }
        }
    }
    println!("{flips} flips, {refused_runs} run reads refused as damage");
    assert!(flips > 2000 && refused_runs > 0, "{flips} {refused_runs}");
}

/// A shard of 100 records of 128 encoded bytes each, in segments of
/// `segment_size_bytes`, on a disk that counts segment reads.
fn counted(segment_size_bytes: u64) -> (common::gated::GatedFs<SimFs>, Shard) {
    let fs = common::gated::GatedFs::new(SimFs::new());
    let config = StoreConfig {
        segment_size_bytes,
        index_spacing_bytes: 4096,
        ..config()
    };
    let shard = Shard::options(Path::new(DIR))
        .file_system(fs.handle())
        .config(config)
        .label("counted")
        .open()
        .unwrap();
    for o in 0..100u64 {
        shard
            .append(&[Record::new(o, payload(o, 100))])
            .wait()
            .unwrap();
    }
    (fs, shard)
}

#[test]
fn read_runs_stopped_by_its_budget_inside_a_segment_reads_that_segment_once() {
    // Ten records fit 1,300 bytes; the eleventh would pass them. The read
    // that declined it has already said so: reading that segment again at
    // the declined record, only to drop it, would be a second `pread`.
    for (segment_size_bytes, segments) in [(1 << 20, 1), (4096, 4)] {
        let (fs, shard) = counted(segment_size_bytes);
        assert_eq!(
            shard.segments().len(),
            segments,
            "segments of {segment_size_bytes} bytes"
        );
        // The first read of a sealed segment opens it (a header read).
        shard.read_runs(0, 1, ReadBound::Committed).unwrap();
        let before = fs.segment_reads();
        let runs = shard.read_runs(0, 1_300, ReadBound::Committed).unwrap();
        assert_eq!(
            decode_runs(&runs),
            (0..10).map(|o| (o, payload(o, 100))).collect::<Vec<_>>(),
            "segments of {segment_size_bytes} bytes"
        );
        assert_eq!(
            fs.segment_reads() - before,
            1,
            "segments of {segment_size_bytes} bytes"
        );
    }
}
