//! `stat` and `verify` print each shard's exact key, read from its key
//! file, on a root and on one shard directory, for people and for scripts;
//! a shard without one (the reference implementation writes none) is shown
//! by its directory name, and a damaged key file is a note with its kind.

mod common;

use common::{copy_shard, interop, run, s, transcript};
use felix_storage::{Preallocation, Record, ShardKey, Store, StoreConfig};

/// A root holding three shards: one with a non-ASCII key whose directory
/// name is lossy, one whose key file is damaged, and one copied from the
/// reference implementation (no key file). No tombstone is a shard.
fn root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        preallocate: Preallocation::Off,
        ..StoreConfig::default()
    };
    let store = Store::options(root.path()).config(config).open().unwrap();
    let exact = ShardKey::new("ünï", "default", "a/b \"c\"", 7);
    let shard = store.create_shard(&exact).unwrap();
    shard
        .append(&[Record::new(1, "one"), Record::new(2, "two")])
        .wait()
        .unwrap();
    let damaged = ShardKey::new("acme", "default", "orders", 1);
    store.create_shard(&damaged).unwrap();
    store.close().unwrap();
    let key_file = root.path().join(damaged.dir_name()).join("key");
    let mut bytes = std::fs::read(&key_file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&key_file, bytes).unwrap();
    copy_shard(
        &interop().join("root-layout/acme_default_orders_0-0d3aed4b998d2798"),
        &root.path().join("acme_default_orders_0-0d3aed4b998d2798"),
    );
    // A delete a crash cut short: not a shard.
    let tombstone = root
        .path()
        .join("acme_default_orders_9-0d3af44b998d32e1.deleting");
    copy_shard(
        &interop().join("root-layout/acme_default_orders_0-0d3aed4b998d2798"),
        &tombstone,
    );
    root
}

#[test]
fn stat_and_verify_print_exact_keys_on_a_root_and_a_shard_dir() {
    let root = root();
    let one = root
        .path()
        .join(ShardKey::new("ünï", "default", "a/b \"c\"", 7).dir_name());
    let mut text = Vec::new();
    for args in [
        vec!["stat", s(root.path())],
        vec!["stat", "--json", s(root.path())],
        vec!["verify", s(root.path())],
        vec!["verify", "--json", s(root.path())],
        vec!["stat", s(&one)],
        vec!["verify", "--json", s(&one)],
    ] {
        text.push(transcript(&args, root.path()));
    }
    insta::assert_snapshot!(text.join("\n"));
}

#[test]
fn verify_json_key_is_the_exact_key_or_null() {
    let root = root();
    let run = run(["verify", "--json", s(root.path())]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines = run.json_lines();
    let keys: Vec<(&str, &serde_json::Value)> = lines
        .iter()
        .map(|l| (l["shard"].as_str().unwrap(), &l["key"]))
        .collect();
    assert_eq!(keys.len(), 3, "the tombstone is not a shard: {keys:?}");
    let exact = ShardKey::new("ünï", "default", "a/b \"c\"", 7);
    let expected = serde_json::json!({
        "tenant": "ünï", "namespace": "default", "stream": "a/b \"c\"", "shard": 7
    });
    for (shard, key) in keys {
        if shard == exact.dir_name() {
            assert_eq!(key, &expected);
        } else {
            assert!(key.is_null(), "{shard}: {key}");
        }
    }
    let damaged_dir = ShardKey::new("acme", "default", "orders", 1).dir_name();
    let damaged = lines
        .iter()
        .find(|l| l["shard"] == damaged_dir.as_str())
        .unwrap();
    let notes = damaged["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().unwrap().contains("(KeyFileChecksum:")),
        "{notes:?}"
    );
}
