//! File and shard directory naming, including the interop examples.

use std::collections::HashSet;

use felix_format::{
    FileKind, ShardFileName, ShardKey, file_name, is_shard_dir_name, parse_file_name,
    parse_tombstone_name, tombstone_name,
};
use proptest::prelude::*;

#[test]
fn shard_dir_name_matches_interop_examples() {
    let cases = [
        (
            ("acme", "default", "orders", 0),
            "acme_default_orders_0-0d3aed4b998d2798",
        ),
        (
            ("acme", "default", "orders", 3),
            "acme_default_orders_3-0d3af04b998d2cb1",
        ),
        (("a.b", "..", "x/y", 1), "a_b____x_y_1-1233ad2506d32437"),
        (("", "", "", 0), "______0-17d9c15239d081d5"),
    ];
    for ((t, n, s, shard), expected) in cases {
        assert_eq!(ShardKey::new(t, n, s, shard).dir_name(), expected);
    }
}

fn is_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 3 * 32 + 3 + 10 + 1 + 16
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[test]
fn shard_dir_name_hostile_keys_give_distinct_safe_names() {
    let long = "x".repeat(1000);
    let longer = format!("{long}y");
    let keys = [
        ShardKey::new("..", "..", "..", 0),
        ShardKey::new("/", "/", "/", 0),
        ShardKey::new("a\0b", "", "", 0),
        ShardKey::new("ünïcødé", "日本", "🦀", 0),
        ShardKey::new("", "", "", 0),
        ShardKey::new(long.as_str(), "", "", 0),
        ShardKey::new(longer.as_str(), "", "", 0),
        ShardKey::new("ab", "c", "", 0),
        ShardKey::new("a", "bc", "", 0),
        ShardKey::new("a_b", "", "", 0),
        ShardKey::new("a.b", "", "", 0),
    ];
    let mut seen = HashSet::new();
    for key in &keys {
        let name = key.dir_name();
        assert!(is_safe(&name), "{key:?} -> {name}");
        assert!(seen.insert(name.clone()), "{key:?} collides as {name}");
    }
}

#[test]
fn shard_dir_name_long_component_is_cut_to_32_characters() {
    let name = ShardKey::new("x".repeat(1000), "n", "s", 9).dir_name();
    assert!(
        name.starts_with(&format!("{}_n_s_9-", "x".repeat(32))),
        "{name}"
    );
}

#[test]
fn file_name_and_parse_round_trip_at_the_extremes() {
    for id in [0, 1, 7, 10, u64::MAX] {
        for kind in [FileKind::Segment, FileKind::Index, FileKind::TimeIndex] {
            let name = file_name(id, kind);
            assert_eq!(name.as_str().len(), 21 + kind.extension().len());
            assert_eq!(parse_file_name(name.as_str()), Some((id, kind)));
        }
    }
    assert_eq!(
        file_name(u64::MAX, FileKind::Segment).as_str(),
        "18446744073709551615.log"
    );
}

#[test]
fn parse_file_name_rejects_stray_shapes() {
    for stray in [
        "",
        "epochs",
        "epochs.tmp",
        "0.log",
        "0000000000000000000.log",
        "000000000000000000000.log",
        "0000000000000000000a.log",
        "00000000000000000000.LOG",
        "00000000000000000000.log.tmp",
        "00000000000000000000.idx",
        "+0000000000000000000.log",
        "99999999999999999999.log",
    ] {
        assert_eq!(parse_file_name(stray), None, "{stray:?}");
    }
}

#[test]
fn shard_key_display_issue_examples_are_unambiguous() {
    let shown = |t: &str, n: &str, s: &str, shard| ShardKey::new(t, n, s, shard).to_string();
    assert_eq!(shown("", "", "", 0), r#"""/""/""/0"#);
    assert_eq!(shown("a/b", "..", "c d", 1), r#""a/b"/../"c d"/1"#);
    // Keys that once showed alike no longer do.
    assert_ne!(shown("a/b", "c", "d", 1), shown("a", "b/c", "d", 1));
    assert_ne!(shown("", "/", "", 0), shown("/", "", "", 0));
    assert_eq!(
        shown("acme", "default", "orders", 0),
        "acme/default/orders/0"
    );
}

#[test]
fn is_shard_dir_name_accepts_interop_names_and_refuses_others() {
    for name in [
        "acme_default_orders_0-0d3aed4b998d2798",
        "acme_default_orders_3-0d3af04b998d2cb1",
        "a_b____x_y_1-1233ad2506d32437",
        "______0-17d9c15239d081d5",
    ] {
        assert!(is_shard_dir_name(name), "{name}");
        assert_eq!(parse_tombstone_name(&tombstone_name(name)), Some(name));
    }
    for name in [
        "",
        "lost+found",
        "acme",
        "acme_default_orders_0",
        "acme_default_orders_0-0d3aed4b998d279",
        "acme_default_orders_0-0d3aed4b998d27988",
        "acme_default_orders_0-0d3aed4b998d279g",
        "acme_default_orders_x-0d3aed4b998d2798",
        "acme_default_orders_-0d3aed4b998d2798",
        "acme_default_orders_4294967296-0d3aed4b998d2798",
        "acme_orders_0-0d3aed4b998d2798",
        "acme.default_orders_0-0d3aed4b998d2798",
        "acme_default_orders_0-0d3aed4b998d2798.deleting",
    ] {
        assert!(!is_shard_dir_name(name), "{name}");
    }
    assert_eq!(parse_tombstone_name("lost+found.deleting"), None);
    assert_eq!(
        parse_tombstone_name("acme_default_orders_0-0d3aed4b998d2798"),
        None
    );
}

/// Every name of ours, written out: each parses back to what built it.
#[test]
fn shard_file_name_every_kind_round_trips_through_its_name() {
    use ShardFileName as N;
    #[rustfmt::skip]
    let table = [
        (N::Segment(7),             "00000000000000000007.log",              false),
        (N::Segment(u64::MAX),      "18446744073709551615.log",              false),
        (N::Index(7),               "00000000000000000007.index",            false),
        (N::TimeIndex(7),           "00000000000000000007.timeindex",        false),
        (N::TimeIndex(u64::MAX),    "18446744073709551615.timeindex",        false),
        (N::SegmentTemp(7),         "00000000000000000007.log.tmp",          true),
        (N::SegmentTemp(u64::MAX),  "18446744073709551615.log.tmp",          true),
        (N::SegmentCopy(7),         "00000000000000000007.log.copy",         true),
        (N::SegmentCopy(u64::MAX),  "18446744073709551615.log.copy",         true),
        (N::Epochs,                 "epochs",                                false),
        (N::EpochsTemp,             "epochs.tmp",                            true),
        (N::Lock,                   "lock",                                  false),
        (N::CleanShutdown,          "clean-shutdown",                        false),
        (N::CleanShutdownTemp,      "clean-shutdown.tmp",                    true),
        (N::Key,                    "key",                                   false),
        (N::KeyTemp,                "key.tmp",                               true),
        (N::LogStart,               "log-start",                             false),
        (N::LogStartTemp,           "log-start.tmp",                         true),
        (N::RaftState,              "raft-state",                            false),
        (N::RaftStateTemp,          "raft-state.tmp",                        true),
        (N::RaftSnapshot,           "raft-snapshot",                         false),
        (N::RaftSnapshotTemp,       "raft-snapshot.tmp",                     true),
    ];
    for (kind, name, temporary) in table {
        assert_eq!(
            kind.file_name().map(|n| n.to_string()).as_deref(),
            Some(name)
        );
        assert_eq!(ShardFileName::parse(name), kind, "{name}");
        assert_eq!(kind.is_temporary(), temporary, "{name}");
    }
    assert_eq!(ShardFileName::Other.file_name(), None);
}

#[test]
fn shard_file_name_strays_are_other() {
    for stray in [
        "",
        "7.log",
        "7.log.tmp",
        "operator-backup.log.tmp",
        "00000000000000000007.index.tmp",
        "00000000000000000007.log.tmp.tmp",
        "00000000000000000007.index.copy",
        "7.log.copy",
        "00000000000000000007.log.copy.tmp",
        "00000000000000000007.LOG",
        "99999999999999999999.log.tmp",
        "Epochs",
        "epochs.tmp.tmp",
        "lock.tmp",
        "clean-shutdown.bak",
        "keys",
        "00000000000000000007.timeindex.tmp",
        "00000000000000000007.TIMEINDEX",
        "log-start.bak",
        "logstart",
        "notes.txt",
    ] {
        assert_eq!(
            ShardFileName::parse(stray),
            ShardFileName::Other,
            "{stray:?}"
        );
    }
}

proptest! {
    #[test]
    fn shard_dir_name_is_a_shard_dir_name_and_its_tombstone_is_not(t in ".{0,40}", n in ".{0,40}", s in ".{0,40}", shard in any::<u32>()) {
        let name = ShardKey::new(t, n, s, shard).dir_name();
        prop_assert!(is_shard_dir_name(&name), "{}", name);
        let tombstone = tombstone_name(&name);
        prop_assert!(!is_shard_dir_name(&tombstone), "{}", tombstone);
        prop_assert_eq!(parse_tombstone_name(&tombstone), Some(name.as_str()));
    }

    #[test]
    fn shard_key_display_differs_when_keys_differ(a in "[a-z/\" ._]{0,5}", b in "[a-z/\" ._]{0,5}", c in "[a-z/\" ._]{0,5}", d in "[a-z/\" ._]{0,5}") {
        let x = ShardKey::new(a.clone(), b.clone(), "s", 0);
        let y = ShardKey::new(c.clone(), d.clone(), "s", 0);
        prop_assert_eq!(x == y, x.to_string() == y.to_string(), "{} vs {}", x, y);
    }

    #[test]
    fn shard_dir_name_is_always_safe(t in ".{0,40}", n in ".{0,40}", s in ".{0,40}", shard in any::<u32>()) {
        let name = ShardKey::new(t, n, s, shard).dir_name();
        prop_assert!(is_safe(&name), "{}", name);
        prop_assert!(!name.contains('.'));
    }

    #[test]
    fn shard_dir_name_differs_when_keys_differ(a in "[a-z._]{0,6}", b in "[a-z._]{0,6}", shard in 0u32..3) {
        let x = ShardKey::new(a.clone(), "n", "s", shard);
        let y = ShardKey::new(b.clone(), "n", "s", shard);
        prop_assert_eq!(x == y, x.dir_name() == y.dir_name());
    }

    #[test]
    fn file_name_order_matches_numeric_order(a in any::<u64>(), b in any::<u64>()) {
        let (x, y) = (file_name(a, FileKind::Segment), file_name(b, FileKind::Segment));
        prop_assert_eq!(a.cmp(&b), x.as_str().cmp(y.as_str()));
    }
}
