//! The two limits that keep felix storage's protocol out of the way: group
//! commit by OS threads (`append limit-group`) and a sync pool fed by one
//! thread (`shards-commit limit-pool`). Each must make every append it
//! counts durable and count exactly what it did.

use felix_bench::{Args, Measurement, group_limit, pool_limit};
use felix_format::{FileKind, file_name, record_encoded_len};

fn args(line: &str, dir: &std::path::Path) -> Args {
    let mut words: Vec<String> = line.split_whitespace().map(String::from).collect();
    words.push("--dir".into());
    words.push(dir.display().to_string());
    Args::parse(words).expect("valid arguments")
}

fn latencies(m: &Measurement) -> usize {
    m.latencies.as_ref().map_or(0, |l| l.len())
}

#[test]
fn limit_group_times_every_append_and_covers_one_to_eight_appends_per_sync_at_8_threads() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("group");
    let m =
        group_limit::append(&args("append limit-group --threads 8 --records 800", &run)).unwrap();
    assert_eq!(m.records, 800);
    assert_eq!(m.bytes, 800 * record_encoded_len(128));
    assert_eq!(latencies(&m), 800);
    let per_sync = m.appends_per_sync.unwrap();
    assert!(
        (1.0..=8.0).contains(&per_sync),
        "{per_sync} appends per sync"
    );
    assert!(m.notes.contains_key("cpu_us_per_record"));
    assert!(!run.exists(), "the run's file is removed");
}

#[test]
fn limit_pool_appends_each_record_to_its_shards_segment_file() {
    let dir = tempfile::tempdir().unwrap();
    let m = pool_limit::commit(&args(
        "shards-commit limit-pool --shards 10 --records 200 --in-flight 8 --sync-threads 2 --keep true",
        dir.path(),
    ))
    .unwrap();
    assert_eq!(m.records, 200);
    assert_eq!(latencies(&m), 200);
    assert_eq!(m.notes["sync_threads"], 2);
    let store = dir.path().join("commit-pool-store");
    let segment = file_name(0, FileKind::Segment);
    let mut grown = 0;
    for entry in std::fs::read_dir(&store).unwrap() {
        let shard = entry.unwrap().path();
        if !shard.is_dir() {
            continue;
        }
        let len = std::fs::metadata(shard.join(segment.as_str()))
            .unwrap()
            .len();
        // Each of the 10 shards' segments: its header, then 20 records.
        assert_eq!(
            len,
            felix_format::SEGMENT_HEADER_LEN as u64 + 20 * record_encoded_len(128),
            "{}",
            shard.display()
        );
        grown += 1;
    }
    assert_eq!(grown, 10);
}

#[test]
fn limit_pool_with_fewer_records_than_places_in_flight_times_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let m = pool_limit::commit(&args(
        "shards-commit limit-pool --shards 4 --records 3 --in-flight 8 --sync-threads 2",
        dir.path(),
    ))
    .unwrap();
    assert_eq!(latencies(&m), 3);
    assert!(!dir.path().join("commit-pool-store").exists());
}
