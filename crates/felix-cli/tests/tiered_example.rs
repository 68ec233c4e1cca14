//! felix-tiered's example program, `examples/tiered.rs`, run as it is (its
//! source compiled here), leaves a store and a bucket that
//! `felix-store stat --remote` reads: the shard is a store's, so its
//! directory holds the key that names its remote objects.

mod common;

// Its `main` is the example's entry point, unused here.
#[allow(dead_code)]
#[path = "../../felix-tiered/examples/tiered.rs"]
mod example;

use common::{run, s};

#[test]
fn stat_remote_finds_the_objects_the_tiered_example_left() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let left = rt.block_on(example::run(tmp.path())).unwrap();
    assert!(left.local_start > 0, "{left:?}");
    let stat = run([
        "stat",
        "--json",
        s(&left.shard_dir),
        "--remote",
        &left.remote_url,
    ]);
    assert_eq!(stat.code, 0, "{}{}", stat.stdout, stat.stderr);
    let line = &stat.json_lines()[0];
    let remote = &line["remote"];
    assert_eq!(remote["start_offset"], 0, "{remote}");
    assert_eq!(remote["next_offset"], left.local_start, "{remote}");
    assert_eq!(line["base_offset"], left.local_start, "{line}");
    assert!(
        !remote["segments"].as_array().unwrap().is_empty(),
        "{remote}"
    );
    let verify = run(["verify", s(&left.shard_dir), "--remote", &left.remote_url]);
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
}
