//! `felix-store recover` on the golden fixtures and the interop corpus: the
//! report (snapshots), the exit status, what changed on disk, and that a
//! refused or dry run changes nothing.

mod common;

use common::{files, fixture_copy, interop_copy, run, s, transcript};
use serde_json::json;

#[test]
fn recover_truncated_fixture_dry_run_then_repair() {
    let (root, dir) = fixture_copy("damaged/Truncated");
    let before = files(root.path());
    let dry = transcript(&["recover", "--dry-run", s(&dir)], root.path());
    assert_eq!(files(root.path()), before, "a dry run modifies nothing");
    let done = transcript(&["recover", s(&dir)], root.path());
    let after = transcript(&["verify", s(&dir)], root.path());
    insta::assert_snapshot!([dry, done, after].join("\n"));
    assert_eq!(
        std::fs::metadata(dir.join("00000000000000000000.log"))
            .unwrap()
            .len(),
        316
    );
}

#[test]
fn recover_truncated_fixture_json() {
    let (root, dir) = fixture_copy("damaged/Truncated");
    insta::assert_snapshot!(transcript(&["recover", "--json", s(&dir)], root.path()));
}

#[test]
fn recover_record_checksum_fixture_is_refused_by_default_and_modifies_nothing() {
    let (root, dir) = fixture_copy("damaged/RecordChecksum");
    let before = files(root.path());
    let human = transcript(&["recover", s(&dir)], root.path());
    let json = transcript(&["recover", "--json", s(&dir)], root.path());
    assert_eq!(
        files(root.path()),
        before,
        "a refused recover modifies nothing, not even a lock file"
    );
    insta::assert_snapshot!([human, json].join("\n"));
    let result = run(["recover", s(&dir)]);
    assert_eq!(result.code, 1);
    assert_eq!(
        result.stderr.lines().count(),
        1,
        "one line of reason: {}",
        result.stderr
    );
}

#[test]
fn recover_record_checksum_fixture_with_opt_in_truncates_to_offset_4() {
    let (root, dir) = fixture_copy("damaged/RecordChecksum");
    let done = transcript(&["recover", "--repair-checksum-tail", s(&dir)], root.path());
    let after = transcript(&["verify", "--json", s(&dir)], root.path());
    insta::assert_snapshot!([done, after].join("\n"));
}

#[test]
fn recover_segment_magic_fixture_is_refused_even_with_opt_in() {
    let (root, dir) = fixture_copy("damaged/SegmentMagic");
    let before = files(root.path());
    let text = transcript(&["recover", "--repair-checksum-tail", s(&dir)], root.path());
    assert_eq!(files(root.path()), before);
    insta::assert_snapshot!(text);
}

#[test]
fn recover_index_magic_fixture_rebuilds_the_index() {
    let (root, dir) = fixture_copy("damaged/IndexMagic");
    // small-shard's index was built with entries every 128 bytes.
    let text = transcript(
        &["recover", "--index-spacing-bytes", "128", s(&dir)],
        root.path(),
    );
    insta::assert_snapshot!(text);
    let index = std::fs::read(dir.join("00000000000000000000.index")).unwrap();
    assert_eq!(
        index,
        std::fs::read(common::fixtures().join("small-shard/00000000000000000000.index")).unwrap(),
        "the rebuilt index equals the clean shard's"
    );
}

#[test]
fn recover_clean_shard_does_nothing() {
    let (root, dir) = fixture_copy("small-shard");
    let before = files(root.path());
    let result = run(["recover", "--json", s(&dir)]);
    assert_eq!(result.code, 0);
    assert_eq!(files(root.path()), before);
    let line = &result.json_lines()[0];
    assert_eq!(
        (&line["outcome"], &line["actions"]),
        (&json!("clean"), &json!([]))
    );
}

#[test]
fn recover_interop_torn_tail_cuts_only_the_torn_record() {
    let (root, dir) = interop_copy("torn-tail");
    let before = files(root.path());
    let result = run(["recover", "--json", s(&dir)]);
    assert_eq!(result.code, 0, "{}", result.stdout);
    let line = &result.json_lines()[0];
    assert_eq!(line["outcome"], "repaired");
    let newest = dir.join("00000000000000000003.log");
    let old_len = before[&newest].len() as u64;
    assert_eq!(
        line["actions"][0],
        json!({"action": "truncate", "segment": 3, "path": s(&newest), "from_len": old_len, "to_len": old_len + 10 - 128})
    );
    let after = files(root.path());
    for (path, bytes) in &before {
        if path != &newest && !path.to_string_lossy().ends_with("03.index") {
            assert_eq!(&after[path], bytes, "{} changed", path.display());
        }
    }
    let verify = run(["verify", "--json", s(&dir)]);
    assert_eq!(verify.code, 0);
    let v = &verify.json_lines()[0];
    assert_eq!(
        (&v["next_offset"], &v["records"], &v["findings"]),
        (&json!(1999), &json!(1999), &json!([]))
    );
}

#[test]
fn recover_locked_shard_exits_2_and_modifies_nothing() {
    let (root, dir) = fixture_copy("damaged/Truncated");
    // Created before the snapshot: holding the lock creates its file.
    let lock = felix_storage::lock::ShardLock::acquire(&felix_io::FileSystem::os(), &dir).unwrap();
    let before = files(root.path());
    let result = run(["recover", s(&dir)]);
    assert_eq!(result.code, 2, "{}", result.stdout);
    assert!(
        result.stderr.contains("is locked by another writer"),
        "{}",
        result.stderr
    );
    assert_eq!(files(root.path()), before);
    drop(lock);
}

/// The message `recover` gives for a shard it finds held, with the root
/// replaced by `[DIR]`.
const HELD_BY_A_STORE: &str = "felix-store: the store root [DIR] is held by a running store; recover works only on a shard nothing else holds (`felix-store verify` reads a held shard, taking no lock)\n";

/// A store closes the files of shards it is not using, and their locks:
/// its root's lock is what keeps a repair off them while it runs.
#[test]
fn recover_shard_of_a_running_store_exits_2_and_modifies_nothing() {
    let (root, dir) = fixture_copy("damaged/Truncated");
    assert_eq!(dir.parent(), Some(root.path()));
    let store = felix_storage::Store::options(root.path()).open().unwrap();
    let before = files(root.path());
    let result = run(["recover", s(&dir)]);
    assert_eq!(result.code, 2, "{}", result.stdout);
    assert_eq!(
        common::normalise(&result.stderr, root.path()),
        HELD_BY_A_STORE
    );
    assert_eq!(files(root.path()), before);
    drop(store);
    let result = run(["recover", "--json", s(&dir)]);
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert_eq!(result.json_lines()[0]["outcome"], "repaired");
}

/// A clean shard under a running store is refused too, and so is a dry
/// run: `recover` looks at a shard only while nothing else holds it, so
/// what it reports is not already stale. Nothing is printed on stdout.
#[test]
fn recover_clean_shard_of_a_running_store_is_refused_even_for_a_dry_run() {
    let (root, dir) = fixture_copy("small-shard");
    let store = felix_storage::Store::options(root.path()).open().unwrap();
    let before = files(root.path());
    for args in [
        vec!["recover", s(&dir)],
        vec!["recover", "--dry-run", s(&dir)],
        vec!["recover", "--json", s(&dir)],
    ] {
        let result = run(&args);
        assert_eq!(
            (result.code, result.stdout.as_str()),
            (2, ""),
            "{args:?}: {}",
            result.stderr
        );
        assert_eq!(
            common::normalise(&result.stderr, root.path()),
            HELD_BY_A_STORE
        );
    }
    assert_eq!(files(root.path()), before);
    drop(store);
    let result = run(["recover", "--json", s(&dir)]);
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert_eq!(result.json_lines()[0]["outcome"], "clean");
}

/// A shard open as a `Shard` (its writer holds the directory's lock, not
/// its parent's): refused before anything is read, dry run or not.
#[test]
fn recover_clean_shard_open_by_a_writer_is_refused_even_for_a_dry_run() {
    let (root, dir) = fixture_copy("small-shard");
    let shard = felix_storage::Shard::options(&dir).open().unwrap();
    let before = files(root.path());
    for args in [
        vec!["recover", s(&dir)],
        vec!["recover", "--dry-run", s(&dir)],
    ] {
        let result = run(&args);
        assert_eq!((result.code, result.stdout.as_str()), (2, ""), "{args:?}");
        assert_eq!(
            common::normalise(&result.stderr, root.path()),
            "felix-store: shard directory [DIR]/small-shard is locked by another writer; recover works only on a shard nothing else holds (`felix-store verify` reads a held shard, taking no lock)\n"
        );
    }
    assert_eq!(files(root.path()), before);
    drop(shard);
}

/// Rot inside a sealed segment is not what an open (or `recover`) checks:
/// `recover` finds nothing to repair and says what it did not look at,
/// naming `verify`, which finds the rot and exits 1.
#[test]
fn recover_sealed_rot_says_what_it_did_not_check_and_names_verify() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("shard");
    {
        let config = felix_storage::StoreConfig {
            segment_size_bytes: 2048,
            index_spacing_bytes: 256,
            preallocate: felix_storage::Preallocation::Off,
            ..felix_storage::StoreConfig::default()
        };
        let shard = felix_storage::Shard::options(&dir)
            .config(config)
            .label("shard")
            .open()
            .unwrap();
        // Two 128-byte records a batch: segments 0 and 1 hold 14 records
        // each (32 + 7 × 256 bytes), segment 2 the last 12.
        for first in (0..40u64).step_by(2) {
            let batch: Vec<_> = (first..first + 2)
                .map(|o| felix_storage::Record::new(1_000 + o, common::reference_payload(o, 100)))
                .collect();
            shard.append(&batch).wait().unwrap();
        }
        shard.close().unwrap();
    }
    // Offset 20 is segment 1's seventh record, at byte 32 + 6 × 128; one
    // bit of its payload flipped.
    let segment = dir.join("00000000000000000001.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[800 + 28 + 3] ^= 0x01;
    std::fs::write(&segment, bytes).unwrap();
    let text = [
        transcript(&["recover", s(&dir)], root.path()),
        transcript(&["recover", "--json", s(&dir)], root.path()),
        transcript(&["verify", "--quick", s(&dir)], root.path()),
    ];
    insta::assert_snapshot!(text.join("\n"));
    let verify = run(["verify", "--json", s(&dir)]);
    assert_eq!(verify.code, 1, "{}", verify.stdout);
    assert_eq!(verify.json_lines()[0]["rot"][0]["offset"], 20);
}

#[test]
fn recover_root_is_a_usage_error() {
    let (root, _dir) = fixture_copy("small-shard");
    let result = run(["recover", s(root.path())]);
    assert_eq!(result.code, 2);
    assert!(
        result.stderr.contains("recover takes one shard directory"),
        "{}",
        result.stderr
    );
}
