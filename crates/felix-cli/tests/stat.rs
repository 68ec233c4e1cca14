//! `felix-store stat`: per-segment figures and shard totals, for fixtures
//! and the interop corpus.

mod common;

use common::{files, fixture_copy, interop_copy, s, transcript};

#[test]
fn stat_fixtures_human_and_json() {
    let mut text = Vec::new();
    for case in [
        "small-shard",
        "damaged/Truncated",
        "damaged/SegmentMagic",
        "damaged/IndexMagic",
    ] {
        let (root, dir) = fixture_copy(case);
        let before = files(root.path());
        text.push(transcript(&["stat", s(&dir)], root.path()));
        text.push(transcript(&["stat", "--json", s(&dir)], root.path()));
        assert_eq!(files(root.path()), before, "{case}: stat modified a file");
    }
    insta::assert_snapshot!(text.join("\n"));
}

#[test]
fn stat_interop_root_layout_shows_every_segment() {
    let (root, dir) = interop_copy("root-layout");
    insta::assert_snapshot!(transcript(&["stat", s(&dir)], root.path()));
}
