//! How much a read by offset takes from the disk: a random read of one
//! record should cost one `pread` of little more than the records between
//! its index entry and itself, not the whole span to the next entry.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{label, payload_for};
use felix_format::record_encoded_len;
use felix_io::sim::SimFs;
use felix_io::{FileSystem, OpenMode};
use felix_segment::{ReadLimit, ReadStart, Record, SegmentConfig, SegmentFile, SegmentWriter};

const DIR: &str = "/shard";
const SPACING: u64 = 4096;

/// Writes `sizes.len()` records with those payload sizes to segment 0 on a
/// simulated disk and returns the disk, the open segment, its index entries
/// and read limit.
fn segment(sizes: &[usize]) -> (SimFs, SegmentFile, SegmentWriter, ReadLimit) {
    let sim = SimFs::new();
    let fs = FileSystem::new(sim.clone());
    fs.create_dir_all(Path::new(DIR)).unwrap();
    let config = SegmentConfig {
        index_spacing_bytes: SPACING,
        preallocate_bytes: None,
    };
    let mut writer = SegmentWriter::create(&fs, Path::new(DIR), 0, 0, config, label()).unwrap();
    let records: Vec<Record> = sizes
        .iter()
        .enumerate()
        .map(|(o, &len)| Record::new(o as u64, payload_for(o as u64, len)))
        .collect();
    for batch in records.chunks(100) {
        writer.append(batch).unwrap();
    }
    let limit = writer.read_limit();
    let (file, _) =
        SegmentFile::open(&fs, Path::new(DIR), 0, Arc::clone(&label()), OpenMode::Read).unwrap();
    (sim, file, writer, limit)
}

#[test]
fn read_of_one_uniform_record_is_one_pread_ending_near_the_record() {
    let sizes = vec![128; 5_000];
    let (sim, file, writer, limit) = segment(&sizes);
    let index = writer.active_index();
    let record_len = record_encoded_len(128);
    for offset in 0..sizes.len() as u64 {
        let (start, next) = index.seek_span(0, offset);
        let before = sim.reads();
        let got = file.read_within(start, next, offset, limit, 1).unwrap();
        let after = sim.reads();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].offset, offset);
        assert_eq!(got[0].payload, payload_for(offset, 128));
        assert_eq!(after.calls - before.calls, 1, "offset {offset}: one pread");
        // The records from the entry up to and including the wanted one,
        // plus the guess's slack (a sixteenth of the skip and a quarter
        // record, or 512 bytes at least) — never the whole span.
        let needed = (offset - start.offset + 1) * record_len;
        let read = after.bytes - before.bytes;
        assert!(read >= needed, "offset {offset}: read {read} < {needed}");
        assert!(
            read <= (needed + needed / 16 + record_len / 4).max(512),
            "offset {offset}: read {read} bytes for {needed} needed"
        );
    }
}

#[test]
fn read_of_one_record_among_varied_sizes_is_right_and_takes_at_most_two_preads() {
    // Sizes from 0 to 1,000 bytes: the average misleads the guess both ways.
    let sizes: Vec<usize> = (0..3_000u64)
        .map(|o| (o.wrapping_mul(2_654_435_761) % 1_001) as usize)
        .collect();
    let (sim, file, writer, limit) = segment(&sizes);
    let index = writer.active_index();
    for offset in 0..sizes.len() as u64 {
        let (start, next) = index.seek_span(0, offset);
        let before = sim.reads();
        let got = file.read_within(start, next, offset, limit, 1).unwrap();
        let calls = sim.reads().calls - before.calls;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].offset, offset);
        assert_eq!(got[0].payload, payload_for(offset, sizes[offset as usize]));
        assert!((1..=2).contains(&calls), "offset {offset}: {calls} preads");
    }
}

#[test]
fn run_read_of_a_budget_is_one_pread_of_about_the_budget() {
    let sizes = vec![128; 20_000];
    let (sim, file, writer, limit) = segment(&sizes);
    let index = writer.active_index();
    let record_len = record_encoded_len(128);
    let budget = 64 * 1024;
    for from in [0, 1, 999, 7_777, 19_000] {
        let (start, next) = index.seek_span(0, from);
        let before = sim.reads();
        let run = file
            .read_run(ReadStart::vouched(start, next), from, limit, budget, None)
            .unwrap();
        let after = sim.reads();
        assert_eq!(run.first_offset(), from);
        let len = run.bytes().len() as u64;
        assert!(
            len <= budget && (len + record_len > budget || run.next_offset() == 20_000),
            "from {from}: {len} bytes"
        );
        // One `pread`, of the records from the entry to the budget's end
        // and the header after them: not a chunk more.
        assert_eq!(after.calls - before.calls, 1, "from {from}");
        let skip = (from - start.offset) * record_len;
        let read = after.bytes - before.bytes;
        assert!(read >= skip + len, "from {from}: read {read}");
        assert!(
            read <= skip + budget + 28,
            "from {from}: read {read} bytes for {} wanted",
            skip + len
        );
    }
}
