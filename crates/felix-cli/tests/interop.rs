//! `felix-store verify --json` on every case of the interop corpus (shards
//! written by the reference implementation) reports what its README says a
//! correct reader must, and modifies nothing.

mod common;

use common::{files, interop, interop_copy, run, s, unhex};
use serde_json::{Value, json};

/// Runs `verify --json` on a copy of `case`, checks no byte changed, and
/// returns the exit status and the lines.
fn verify(case: &str) -> (i32, Vec<Value>) {
    let (root, dir) = interop_copy(case);
    let before = files(root.path());
    let result = run(["verify", "--json", s(&dir)]);
    assert_eq!(files(root.path()), before, "{case}: verify modified a file");
    assert_eq!(result.stderr, "", "{case}");
    (result.code, result.json_lines())
}

fn figures(line: &Value) -> (u64, u64, u64, u64) {
    let n = |k: &str| line[k].as_u64().unwrap_or_else(|| panic!("{k} in {line}"));
    (
        n("base_offset"),
        n("next_offset"),
        n("records"),
        n("segments"),
    )
}

#[test]
fn verify_interop_clean_4seg_reports_no_damage() {
    let (code, lines) = verify("clean-4seg");
    assert_eq!(code, 0);
    assert_eq!(figures(&lines[0]), (0, 2000, 2000, 4));
    assert_eq!(
        (&lines[0]["findings"], &lines[0]["notes"]),
        (&json!([]), &json!([]))
    );
    assert_eq!(lines[0]["shard"], "clean-4seg");
}

#[test]
fn verify_interop_torn_tail_is_a_default_truncation_of_offset_1999() {
    let (code, lines) = verify("torn-tail");
    assert_eq!(code, 0, "repairable by default, so a default open succeeds");
    let newest_len = std::fs::metadata(interop().join("torn-tail/00000000000000000003.log"))
        .unwrap()
        .len();
    // The record for offset 1999 is 128 bytes; the last 10 were cut.
    let record_start = newest_len + 10 - 128;
    assert_eq!(
        lines[0]["findings"],
        json!([{
            "kind": "Truncated",
            "segment": 3,
            "position": record_start,
            "repair": "default",
            "detail": "truncated: 128 bytes needed, 118 available: in the newest segment's tail (118 bytes to end of file, no intact record after it); an unfinished write; 118 bytes truncated on open",
        }])
    );
    assert_eq!(figures(&lines[0]), (0, 1999, 1999, 4));
}

#[test]
fn verify_interop_trimmed_head_starts_at_511() {
    let (code, lines) = verify("trimmed-head");
    assert_eq!(code, 0);
    assert_eq!(figures(&lines[0]), (511, 2000, 1489, 3));
    assert_eq!(lines[0]["findings"], json!([]));
}

#[test]
fn verify_interop_foreign_ids_reads_offsets_from_headers() {
    let (code, lines) = verify("foreign-ids");
    assert_eq!(code, 0);
    assert_eq!(figures(&lines[0]), (511, 2000, 1489, 3));
    assert_eq!(lines[0]["findings"], json!([]));
}

#[test]
fn verify_interop_garbage_index_is_notes_only() {
    let (code, lines) = verify("garbage-index");
    assert_eq!(code, 0);
    assert_eq!(figures(&lines[0]), (0, 2000, 2000, 4));
    assert_eq!(lines[0]["findings"], json!([]));
    let notes: Vec<&str> = lines[0]["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes[0].starts_with("index 00000000000000000001.index is missing"),
        "{notes:?}"
    );
    assert!(
        notes[1].starts_with("index 00000000000000000002.index is invalid"),
        "{notes:?}"
    );
}

#[test]
fn verify_interop_killed_on_commit_keeps_every_acknowledged_offset() {
    let (code, lines) = verify("killed-on-commit");
    assert_eq!(code, 0);
    let acks = std::fs::read_to_string(interop().join("killed-on-commit.acks.jsonl")).unwrap();
    let last_acked = acks
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|v| v["last_offset"].as_u64())
        .max()
        .unwrap();
    assert_eq!(last_acked, 2729);
    let (base, next, records, _) = figures(&lines[0]);
    assert_eq!(base, 0);
    assert!(next > last_acked && next <= 2733, "next offset {next}");
    assert_eq!(records, next);

    // Every acknowledged record's payload is the corpus pattern, read
    // through `dump` across all ten segments.
    let (_root, dir) = interop_copy("killed-on-commit");
    let dump = run(["dump", "--json", "--payload", "hex", s(&dir)]);
    assert_eq!(
        dump.code,
        0,
        "{}",
        dump.stdout.lines().last().unwrap_or_default()
    );
    let mut expected = 0;
    for line in dump
        .json_lines()
        .into_iter()
        .filter(|l| l["type"] == "record")
    {
        let offset = line["offset"].as_u64().unwrap();
        assert_eq!(offset, expected);
        assert_eq!(
            unhex(line["payload_hex"].as_str().unwrap()),
            common::reference_payload(offset, 200),
            "offset {offset}"
        );
        expected += 1;
    }
    assert!(expected > last_acked);
}

#[test]
fn verify_interop_root_layout_prints_both_shards_by_name() {
    let (code, lines) = verify("root-layout");
    assert_eq!(code, 0);
    let names: Vec<&str> = lines.iter().map(|l| l["shard"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "acme_default_orders_0-0d3aed4b998d2798",
            "acme_default_orders_3-0d3af04b998d2cb1"
        ]
    );
    assert_eq!(figures(&lines[0]), (0, 2000, 2000, 4));
    assert!(lines.iter().all(|l| l["findings"] == json!([])));
}

#[test]
fn verify_interop_corpus_in_place_is_read_only_safe() {
    // The corpus itself, not a copy: verify opens every file read-only, so
    // it works on a read-only tree and changes nothing in it.
    let before = files(&interop());
    let result = run(["verify", "--json", s(&interop().join("clean-4seg"))]);
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert_eq!(files(&interop()), before);
}
