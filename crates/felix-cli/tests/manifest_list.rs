//! `felix-store manifest list --seq N`: one version of a tiered shard's
//! remote manifest, shown as the full listing shows it, on a shard
//! offloaded twice to a local-directory object store.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::{run, s};
use felix_storage::{Preallocation, Record, ShardKey, Store, StoreConfig};
use felix_tiered::{TierConfig, TierRetention, TieredShard, stores};

fn key() -> ShardKey {
    ShardKey::new("acme", "default", "orders", 5)
}

/// A store root with one shard whose oldest segments were offloaded to
/// `<tmp>/bucket` twice (two manifest versions); returns the tempdir, the
/// shard directory, the bucket's URL and the manifest versions' numbers.
fn offloaded_twice() -> (tempfile::TempDir, PathBuf, String, Vec<u64>) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let bucket = tmp.path().join("bucket");
    let config = StoreConfig {
        segment_size_bytes: 1024,
        index_spacing_bytes: 128,
        preallocate: Preallocation::Off,
        ..StoreConfig::default()
    };
    let store = Store::options(&root).config(config).open().unwrap();
    let shard = store.create_shard(&key()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tier = TierConfig {
        local: TierRetention {
            max_bytes: Some(2500),
            max_age: None,
        },
        ..TierConfig::default()
    };
    let tiered = rt
        .block_on(TieredShard::open(
            Arc::clone(&shard),
            key(),
            stores::local_dir(&bucket).unwrap(),
            tier,
        ))
        .unwrap();
    for round in 0..2u64 {
        for offset in round * 120..(round + 1) * 120 {
            let payload = format!("record-{offset:033}");
            shard
                .append(&[Record::new(1_000 + offset, payload)])
                .wait()
                .unwrap();
        }
        let outcome = rt.block_on(tiered.offload()).unwrap();
        assert!(!outcome.uploaded.is_empty(), "{outcome:?}");
    }
    drop(tiered);
    drop(shard);
    store.close().unwrap();
    let remote =
        felix_tiered::RemoteShard::new(stores::local_dir(&bucket).unwrap(), "felix", &key());
    let seqs: Vec<u64> = rt
        .block_on(remote.manifests())
        .unwrap()
        .iter()
        .map(|v| v.seq)
        .collect();
    assert_eq!(seqs.len(), 2, "{seqs:?}");
    let url = format!("file://{}", bucket.display());
    (tmp, root.join(key().dir_name()), url, seqs)
}

#[test]
fn manifest_list_seq_shows_that_version_as_the_full_listing_does() {
    let (_tmp, dir, url, seqs) = offloaded_twice();
    let all = run(["manifest", "list", "--json", s(&dir), "--remote", &url]);
    assert_eq!(all.code, 0, "{}", all.stderr);
    let all = all.json_lines();
    assert_eq!(all.len(), 2);
    for (seq, in_force) in [(seqs[0], false), (seqs[1], true)] {
        let one = run([
            "manifest",
            "list",
            "--json",
            "--seq",
            &seq.to_string(),
            s(&dir),
            "--remote",
            &url,
        ]);
        assert_eq!(one.code, 0, "{}", one.stderr);
        let lines = one.json_lines();
        let full = all.iter().find(|l| l["seq"] == seq).unwrap();
        assert_eq!(lines, std::slice::from_ref(full));
        assert_eq!(lines[0]["in_force"], in_force);
    }
    let human = run([
        "manifest",
        "list",
        "--seq",
        &seqs[0].to_string(),
        s(&dir),
        "--remote",
        &url,
    ]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    let lines: Vec<&str> = human.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", human.stdout);
    assert!(
        lines[0].ends_with(&format!(", version {} shown", seqs[0])),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with(&format!("  {:020}  ", seqs[0])) && !lines[1].contains("in force"),
        "{}",
        lines[1]
    );
}

#[test]
fn manifest_list_seq_of_a_missing_version_is_a_usage_error() {
    let (_tmp, dir, url, seqs) = offloaded_twice();
    let missing = seqs[1] + 10;
    let result = run([
        "manifest",
        "list",
        "--seq",
        &missing.to_string(),
        s(&dir),
        "--remote",
        &url,
    ]);
    assert_eq!((result.code, result.stdout.as_str()), (2, ""));
    let base = format!("felix/{}", key().dir_name());
    assert_eq!(
        result.stderr,
        format!(
            "felix-store: shard acme/default/orders/5: no manifest version {missing} under {base}/ in {url} (2 versions from {} to {})\n",
            seqs[0], seqs[1]
        )
    );
}
