//! Reused read buffers: a run read into a buffer an earlier read filled
//! holds exactly the records asked for (never the earlier read's bytes),
//! and a run the caller still holds never changes under a later read.

mod common;

use common::{payload_for, writer};
use felix_segment::{ReadBuffers, ReadStart, Record, RecordRun, SegmentWriter};

fn fill(writer: &mut SegmentWriter, base: u64, count: u64, len: usize) {
    let records: Vec<Record> = (base..base + count)
        .map(|o| Record::new(o, payload_for(o, len)))
        .collect();
    writer.append(&records).unwrap();
}

fn read(writer: &SegmentWriter, from: u64, budget: u64, buffers: &ReadBuffers) -> RecordRun {
    let index = writer.active_index();
    let (entry, next) = index.seek_span(writer.segment().base_offset(), from);
    writer
        .segment()
        .read_run(
            ReadStart::vouched(entry, next),
            from,
            writer.read_limit(),
            budget,
            Some(buffers),
        )
        .unwrap()
}

fn payloads(run: &RecordRun) -> Vec<(u64, Vec<u8>)> {
    run.iter().map(|r| (r.offset, r.payload.to_vec())).collect()
}

#[test]
fn read_run_into_a_reused_buffer_holds_only_the_records_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    // Two segments of different payloads: a long one, then a short one
    // whose read lands in the long one's buffer.
    let mut long = writer(&a, 0, 512);
    fill(&mut long, 0, 2_000, 200);
    let mut short = writer(&b, 5_000, 512);
    fill(&mut short, 5_000, 400, 90);
    let buffers = ReadBuffers::new();
    // From the first record: the run begins at the buffer's first byte.
    let first = read(&long, 0, 256 * 1024, &buffers);
    let (memory, capacity) = (first.bytes().as_ptr() as usize, first.bytes().len());
    assert!(first.len() > 1_000);
    drop(first);
    let second = read(&short, 5_100, 256 * 1024, &buffers);
    let at = second.bytes().as_ptr() as usize;
    assert!(
        at >= memory && at < memory + capacity,
        "the second read reuses the first one's buffer"
    );
    let expected: Vec<(u64, Vec<u8>)> = (5_100..5_400).map(|o| (o, payload_for(o, 90))).collect();
    assert_eq!(payloads(&second), expected);
    assert_eq!(second.bytes().len(), 300 * (28 + 90));
}

#[test]
fn read_run_never_changes_a_run_the_caller_holds() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(dir.path(), 0, 512);
    fill(&mut w, 0, 3_000, 150);
    let buffers = ReadBuffers::new();
    let held = read(&w, 0, 128 * 1024, &buffers);
    let copy = held.bytes().to_vec();
    for from in (0..3_000).step_by(97) {
        let other = read(&w, from, 128 * 1024, &buffers);
        assert_ne!(other.bytes().as_ptr(), held.bytes().as_ptr(), "from {from}");
        assert_eq!(other.first_offset(), from);
    }
    assert_eq!(held.bytes().to_vec(), copy);
}
