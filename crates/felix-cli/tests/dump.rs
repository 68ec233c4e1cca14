//! `felix-store dump` on the golden fixtures: records with their positions
//! and checksums, payloads, `--from`/`--count`, damage, and index files.

mod common;

use common::{files, fixture_copy, run, s, transcript};

#[test]
fn dump_small_shard_all_formats() {
    let (root, dir) = fixture_copy("small-shard");
    let before = files(root.path());
    let segment = dir.join("00000000000000000000.log");
    let text = [
        transcript(&["dump", s(&dir)], root.path()),
        transcript(
            &["dump", "--payload", "hex", "--from", "3", s(&segment)],
            root.path(),
        ),
        transcript(
            &["dump", "--payload", "text", "--count", "2", s(&segment)],
            root.path(),
        ),
        transcript(
            &[
                "dump",
                "--json",
                "--payload",
                "hex",
                "--from",
                "1",
                "--count",
                "2",
                s(&dir),
            ],
            root.path(),
        ),
        transcript(
            &[
                "dump",
                "--json",
                "--payload",
                "text",
                "--count",
                "1",
                s(&dir),
            ],
            root.path(),
        ),
    ]
    .join("\n");
    assert_eq!(files(root.path()), before, "dump modifies nothing");
    insta::assert_snapshot!(text);
}

/// `dump` stops at the first damage and exits as `verify` does: 1 only for
/// damage a default open refuses, 0 for a torn tail a default open repairs
/// (README, "Exit status").
#[test]
fn dump_damaged_fixtures_stop_at_the_damage_and_exit_as_verify_does() {
    for (case, code, verdict) in [
        ("RecordChecksum", 1, "refused_by_default"),
        ("RecordHeaderChecksum", 1, "refused_by_default"),
        ("Truncated", 0, "needs_repair"),
        ("OffsetOutOfOrder", 1, "refused_by_default"),
        ("OffsetOverflow", 1, "refused_by_default"),
        ("RecordTooLarge", 1, "refused_by_default"),
        ("SegmentVersion", 1, "refused"),
    ] {
        let (root, dir) = fixture_copy(&format!("damaged/{case}"));
        let text = [
            transcript(&["dump", s(&dir)], root.path()),
            transcript(&["dump", "--json", s(&dir)], root.path()),
        ]
        .join("\n");
        insta::assert_snapshot!(format!("dump_damaged_{case}"), text);
        let json = run(["dump", "--json", s(&dir)]);
        assert_eq!(json.code, code, "{case}");
        assert_eq!(run(["verify", s(&dir)]).code, code, "{case}: verify agrees");
        let last = json.json_lines().pop().unwrap();
        assert_eq!(
            (&last["type"], &last["kind"], &last["verdict"]),
            (
                &serde_json::json!("damage"),
                &serde_json::json!(case),
                &serde_json::json!(verdict)
            ),
            "{case}"
        );
    }
}

#[test]
fn dump_index_valid_invalid_torn_and_missing() {
    let mut text = Vec::new();
    for case in [
        "small-shard",
        "damaged/IndexEntryOutOfOrder",
        "damaged/IndexBaseOffset",
        "tolerated/IndexTornEntry",
        "tolerated/IndexMissing",
    ] {
        let (root, dir) = fixture_copy(case);
        text.push(transcript(&["dump", "--index", s(&dir)], root.path()));
        text.push(transcript(
            &[
                "dump",
                "--index",
                "--json",
                s(&dir.join("00000000000000000000.log")),
            ],
            root.path(),
        ));
    }
    insta::assert_snapshot!(text.join("\n"));
}

#[test]
fn dump_index_file_path_implies_index() {
    let (root, dir) = fixture_copy("damaged/IndexMagic");
    let result = run(["dump", s(&dir.join("00000000000000000000.index"))]);
    // An unusable index is never damage: it is rebuilt.
    assert_eq!(result.code, 0);
    assert!(
        result.stdout.contains("INVALID: IndexMagic"),
        "{}",
        result.stdout
    );
    drop(root);
}
