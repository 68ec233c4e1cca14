//! The two limits that keep felix storage's protocol out of the way: group
//! commit by OS threads (`append limit-group`) and a sync pool fed by one
//! thread (`shards-commit limit-pool`). Each must write every record it
//! counts, where it says, once, and time each append.

use felix_bench::{Args, Measurement, group_limit, pool_limit};
use felix_format::{FileKind, SEGMENT_HEADER_LEN, decode_record, file_name, record_encoded_len};

fn args(line: &str, dir: &std::path::Path) -> Args {
    let mut words: Vec<String> = line.split_whitespace().map(String::from).collect();
    words.push("--dir".into());
    words.push(dir.display().to_string());
    Args::parse(words).expect("valid arguments")
}

fn latencies(m: &Measurement) -> usize {
    m.latencies.as_ref().map_or(0, |l| l.len())
}

/// Every record of `bytes`, decoded and verified in turn.
fn records(bytes: &[u8]) -> usize {
    let mut at = 0;
    let mut n = 0;
    while at < bytes.len() {
        let record = decode_record(&bytes[at..], None).expect("a whole, verified record");
        at += record_encoded_len(record.payload.len() as u32) as usize;
        n += 1;
    }
    n
}

#[test]
fn limit_group_writes_each_batch_whole_at_a_place_of_its_own_and_times_each_append() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("group");
    // Batches of 100 records: more than the payload pool's 64. The 800
    // warmup records are written (untimed, uncounted) before the 8,000.
    let m = group_limit::append(&args(
        "append limit-group --threads 8 --batch 100 --records 8000 --warmup 800 --keep true",
        &run,
    ))
    .unwrap();
    assert_eq!(latencies(&m), 80);
    assert_eq!(m.records, 8000);
    let file = std::fs::read(run.join("limit.log")).unwrap();
    assert_eq!(file.len() as u64, 8800 * record_encoded_len(128));
    assert_eq!(records(&file), 8800);
    // The warmup's syncs are not counted with the measured appends'.
    let syncs = m.notes["syncs"].as_u64().unwrap();
    assert!(
        (10..=80).contains(&syncs),
        "{syncs} syncs for 80 appends from 8 threads"
    );
    assert!(m.notes.contains_key("cpu_us_per_record"));
}

#[test]
fn limit_group_removes_its_file_unless_kept() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("group");
    let m =
        group_limit::append(&args("append limit-group --threads 2 --records 10", &run)).unwrap();
    assert_eq!(latencies(&m), 10);
    assert!(!run.exists());
}

/// The segment lengths of the pool limit's kept store, by shard directory.
fn segment_lengths(dir: &std::path::Path) -> Vec<u64> {
    let store = dir.join("commit-pool-store");
    let segment = file_name(0, FileKind::Segment);
    let mut lens: Vec<u64> = std::fs::read_dir(&store)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|shard| shard.is_dir())
        .map(|shard| {
            std::fs::metadata(shard.join(segment.as_str()))
                .unwrap()
                .len()
        })
        .collect();
    lens.sort_unstable();
    lens
}

#[test]
fn limit_pool_appends_each_record_to_its_shards_segment_file() {
    let dir = tempfile::tempdir().unwrap();
    let m = pool_limit::commit(&args(
        "shards-commit limit-pool --shards 10 --records 200 --in-flight 8 --sync-threads 2 --keep true",
        dir.path(),
    ))
    .unwrap();
    assert_eq!(latencies(&m), 200);
    assert_eq!(m.notes["sync_threads"], 2);
    // Each of the 10 segments: its header, then 20 records.
    let each = SEGMENT_HEADER_LEN as u64 + 20 * record_encoded_len(128);
    assert_eq!(segment_lengths(dir.path()), vec![each; 10]);
    assert!(m.notes.contains_key("driver_cpu_us_per_record"));
}

#[test]
fn limit_pool_with_fewer_records_than_places_in_flight_writes_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let m = pool_limit::commit(&args(
        "shards-commit limit-pool --shards 4 --records 3 --in-flight 8 --sync-threads 2 --keep true",
        dir.path(),
    ))
    .unwrap();
    assert_eq!(latencies(&m), 3);
    let header = SEGMENT_HEADER_LEN as u64;
    let one = header + record_encoded_len(128);
    assert_eq!(segment_lengths(dir.path()), vec![header, one, one, one]);
}

/// Every way the write+fdatasync limit's file may grow writes and syncs
/// every record, and says which way ran; an unknown one is refused.
#[test]
fn limit_fdatasync_runs_under_every_growth_and_names_it() {
    for growth in ["grow", "keep-size", "extend", "zeroed"] {
        let dir = tempfile::tempdir().unwrap();
        let m = felix_bench::limits::append(&args(
            &format!(
                "append limit-fdatasync --durability on_commit --batch 1 --records 40 --warmup 10 --growth {growth}"
            ),
            &dir.path().join("run"),
        ))
        .unwrap();
        assert_eq!(m.records, 40, "{growth}");
        assert_eq!(latencies(&m), 40, "{growth}");
        assert_eq!(m.params["growth"], growth);
    }
    let dir = tempfile::tempdir().unwrap();
    let refused = felix_bench::limits::append(&args(
        "append limit-fdatasync --records 4 --growth sideways",
        &dir.path().join("run"),
    ));
    assert_eq!(
        refused.err().as_deref(),
        Some("unknown --growth \"sideways\" (grow, keep-size, extend, zeroed)")
    );
}
