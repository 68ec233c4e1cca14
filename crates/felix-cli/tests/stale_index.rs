//! A sealed index with a wrong middle entry that points into a payload
//! embedding a valid record header (built with the project's encoders):
//! `stat`, `verify`, `dump --index` and `recover` agree that the index is to
//! be rebuilt, `recover` rebuilds it, and `dump --from` prints only records
//! the segment holds.

mod common;

use std::path::Path;

use common::{run, s, transcript};
use felix_format::{IndexEntry, RECORD_HEADER_LEN, encode_record_header};
use felix_segment::{Record, SegmentConfig, SegmentWriter, SparseIndex};
use serde_json::json;

const SPACING: u64 = 128;

/// Record 2's payload embeds a whole record claiming offset 3.
fn payload(offset: u64) -> Vec<u8> {
    if offset == 2 {
        let fake = b"a record that does not exist";
        let mut payload = b"pad--".to_vec();
        payload.extend_from_slice(&encode_record_header(3, 3_000, fake).unwrap());
        payload.extend_from_slice(fake);
        payload.extend_from_slice(b"--tail");
        payload
    } else {
        format!("record-{offset:04}-").into_bytes().repeat(3)
    }
}

/// The position of each record of segment 0 (offsets 0..8), and one past.
fn positions() -> Vec<u64> {
    let mut positions = vec![32u64];
    for o in 0..8u64 {
        positions.push(positions[o as usize] + RECORD_HEADER_LEN as u64 + payload(o).len() as u64);
    }
    positions
}

/// `<root>/shard`: segment 0 sealed (offsets 0..8) with index
/// `[(0, 32), (3, inside record 2), (6, record 6)]`, segment 1 newest
/// (offsets 8..10).
fn build() -> (tempfile::TempDir, std::path::PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("shard");
    std::fs::create_dir(&dir).unwrap();
    let config = SegmentConfig {
        index_spacing_bytes: SPACING,
        preallocate_bytes: None,
    };
    let mut writer = SegmentWriter::create(
        &felix_io::FileSystem::os(),
        &dir,
        0,
        0,
        config,
        "shard".into(),
    )
    .unwrap();
    let records: Vec<Record> = (0..8).map(|o| Record::new(o * 1_000, payload(o))).collect();
    writer.append(&records).unwrap();
    writer.finish().unwrap();
    let index_path = writer.segment().index_path();
    drop(writer);
    let positions = positions();
    let entries = vec![
        IndexEntry {
            offset: 0,
            position: 32,
        },
        wrong_entry(),
        IndexEntry {
            offset: 6,
            position: positions[6],
        },
    ];
    SparseIndex::from_entries(0, entries)
        .write_file(&felix_io::FileSystem::os(), &index_path)
        .unwrap();
    let mut newest = SegmentWriter::create(
        &felix_io::FileSystem::os(),
        &dir,
        1,
        8,
        config,
        "shard".into(),
    )
    .unwrap();
    newest
        .append(&[
            Record::new(8_000, payload(8)),
            Record::new(9_000, payload(9)),
        ])
        .unwrap();
    newest.sync().unwrap();
    (root, dir)
}

fn wrong_entry() -> IndexEntry {
    IndexEntry {
        offset: 3,
        position: positions()[2] + RECORD_HEADER_LEN as u64 + 5,
    }
}

/// `text` with the segments' creation times (the clock when the test ran)
/// replaced by `[TIME]`.
fn without_times(text: &str) -> String {
    let key = "created_at_micros ";
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(key) {
        out.push_str(&rest[..at + key.len()]);
        rest = rest[at + key.len()..].trim_start_matches(|c: char| c.is_ascii_digit());
        out.push_str("[TIME]");
    }
    out.push_str(rest);
    out
}

fn index_of_segment_0(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("00000000000000000000.index")).unwrap()
}

#[test]
fn stat_verify_and_dump_index_agree_the_index_is_to_be_rebuilt() {
    let (root, dir) = build();
    let wrong = wrong_entry();
    let note = format!(
        "index 00000000000000000000.index entry 1 (offset 3, position {}) is not where the segment's records place offset 3; rebuilt from its segment",
        wrong.position
    );

    let stat = run(["stat", "--json", s(&dir)]);
    assert_eq!(stat.code, 0);
    let line = &stat.json_lines()[0];
    assert_eq!(line["per_segment"][0]["index"], json!("rebuild"));
    assert_eq!(line["per_segment"][1]["index"], json!("ok"));

    for full in [false, true] {
        let mut args = vec!["verify", "--json"];
        if full {
            args.push("--full");
        }
        args.push(s(&dir));
        let verify = run(&args);
        assert_eq!(verify.code, 0, "--full {full}");
        let line = &verify.json_lines()[0];
        assert_eq!(
            (&line["verdict"], &line["findings"], &line["notes"]),
            (&json!("ok"), &json!([]), &json!([note])),
            "--full {full}"
        );
    }

    let dump = run(["dump", "--index", "--json", s(&dir)]);
    assert_eq!(dump.code, 0);
    let index = &dump.json_lines()[0];
    assert_eq!(
        (&index["valid"], &index["rebuilt_on_open"]),
        (&json!(false), &json!(false))
    );

    let recover = run(["recover", "--dry-run", "--json", s(&dir)]);
    assert_eq!(recover.code, 0);
    let line = &recover.json_lines()[0];
    assert_eq!(line["outcome"], json!("would_repair"));
    assert_eq!(line["actions"][0]["action"], json!("rebuild_index"));
    assert_eq!(line["actions"][0]["segment"], json!(0));

    let text = [
        transcript(&["stat", s(&dir)], root.path()),
        transcript(&["verify", s(&dir)], root.path()),
        transcript(&["dump", "--index", s(&dir)], root.path()),
    ]
    .join("\n");
    insta::assert_snapshot!(text);
}

#[test]
fn recover_rebuilds_an_index_a_full_check_fails_and_then_all_agree_it_is_fine() {
    let (root, dir) = build();
    let before = index_of_segment_0(&dir);
    let recovered = transcript(&["recover", s(&dir)], root.path());
    assert_ne!(index_of_segment_0(&dir), before);
    let verify = run(["verify", "--json", "--full", s(&dir)]);
    assert_eq!(verify.json_lines()[0]["notes"], json!([]));
    let stat = run(["stat", "--json", s(&dir)]);
    assert_eq!(stat.json_lines()[0]["per_segment"][0]["index"], json!("ok"));
    let dump = run(["dump", "--index", "--json", s(&dir)]);
    assert_eq!(dump.json_lines()[0]["valid"], json!(true));
    let again = run(["recover", "--json", s(&dir)]);
    assert_eq!(again.json_lines()[0]["outcome"], json!("clean"));
    insta::assert_snapshot!(recovered);
}

/// `dump --from 3` once started at the wrong entry, printed the embedded
/// record as offset 3 and then "damage", exiting 1 on a shard `verify
/// --full` calls ok. It walks from the segment's first record now.
#[test]
fn dump_from_prints_only_records_the_segment_holds() {
    let (root, dir) = build();
    let positions = positions();
    let dump = run([
        "dump",
        "--json",
        "--payload",
        "hex",
        "--from",
        "3",
        "--count",
        "2",
        s(&dir),
    ]);
    assert_eq!(dump.code, 0, "{}", dump.stdout);
    let records: Vec<_> = dump
        .json_lines()
        .into_iter()
        .filter(|l| l["type"] == json!("record"))
        .collect();
    let hex = |p: Vec<u8>| p.iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(records.len(), 2);
    for (record, offset) in records.iter().zip(3u64..) {
        assert_eq!(record["offset"], json!(offset));
        assert_eq!(record["position"], json!(positions[offset as usize]));
        assert_eq!(record["payload_hex"], json!(hex(payload(offset))));
    }
    let text = transcript(
        &["dump", "--from", "3", "--count", "2", s(&dir)],
        root.path(),
    );
    insta::assert_snapshot!(without_times(&text));
}
