//! `felix-store write` at the ends of the id and offset spaces: refused
//! with a message saying which end, exit 2, and the shard still verifies
//! and opens.

mod common;

use std::path::Path;

use common::{run, s};
use felix_segment::{Record, SegmentConfig, SegmentWriter};

fn segment(dir: &Path, id: u64, base: u64, records: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let mut writer = SegmentWriter::create(
        &felix_io::FileSystem::os(),
        dir,
        id,
        base,
        SegmentConfig::default(),
        "s".into(),
    )
    .unwrap();
    for i in 0..records {
        writer.append(&[Record::new(i, "r")]).unwrap();
    }
    writer.sync().unwrap();
}

#[test]
fn write_past_segment_id_u64_max_is_refused_and_the_shard_still_opens() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("last-id");
    segment(&dir, u64::MAX, 7, 1);
    let write = run([
        "write",
        "--dir",
        s(&dir),
        "--records",
        "300",
        "--segment-bytes",
        "4096",
        "--no-preallocate",
    ]);
    assert_eq!(write.code, 2, "{}", write.stdout);
    assert!(
        write
            .stderr
            .contains("segment 18446744073709551615 is full and is the last segment id there is"),
        "{}",
        write.stderr
    );
    let verify = run(["verify", "--json", s(&dir)]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    let line = &verify.json_lines()[0];
    assert_eq!(
        (&line["segments"], &line["base_offset"]),
        (&1.into(), &7.into())
    );
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    assert_eq!(names, ["18446744073709551615.log"], "no id wrapped to 0");
}

#[test]
fn write_past_the_last_offset_is_refused_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("last-offset");
    segment(&dir, 0, u64::MAX - 3, 0);
    let write = run(["write", "--dir", s(&dir), "--records", "5", "--batch", "5"]);
    assert_eq!(write.code, 2, "{}", write.stdout);
    assert_eq!(
        write.stderr,
        format!(
            "felix-store: shard last-offset: a batch of 5 record(s) from offset {} would pass the last offset a record can have ({}); nothing was written\n",
            u64::MAX - 3,
            u64::MAX - 1
        )
    );
    let fits = run(["write", "--dir", s(&dir), "--records", "3", "--batch", "3"]);
    assert_eq!(fits.code, 0, "{}", fits.stderr);
    let verify = run(["verify", "--json", s(&dir)]);
    assert_eq!(verify.json_lines()[0]["next_offset"], u64::MAX);
}
