//! An error's message and its `source()` chain say each fact once: a
//! reporter that prints the whole chain (`a: b: c`, or one "caused by" a
//! line) shows no text twice.

mod common;

use std::error::Error;
use std::time::Duration;

use common::{config, records};
use felix_storage::{Durability, ShardKey, StorageError, Store, StoreConfig};

/// Every message of `err`'s chain, outermost first.
fn chain(err: &StorageError) -> Vec<String> {
    let mut texts = Vec::new();
    let mut next: Option<&(dyn Error + 'static)> = Some(err);
    while let Some(e) = next {
        texts.push(e.to_string());
        next = e.source();
    }
    texts
}

/// The chain as a reporter prints it, after checking that no message
/// holds a later one (which is how a repeat shows).
fn report(err: &StorageError) -> String {
    let texts = chain(err);
    for (i, outer) in texts.iter().enumerate() {
        for inner in &texts[i + 1..] {
            assert!(
                !outer.contains(inner.as_str()),
                "{inner:?} repeats inside {outer:?}"
            );
        }
    }
    texts.join("\n  caused by: ")
}

#[test]
fn error_chain_of_invalid_config_says_the_setting_once() {
    let dir = tempfile::tempdir().unwrap();
    let err = felix_storage::Shard::options(dir.path().join("s"))
        .config(StoreConfig {
            durability: Durability::Periodic(Duration::ZERO),
            ..StoreConfig::default()
        })
        .open()
        .unwrap_err();
    assert!(matches!(err, StorageError::InvalidConfig(_)), "{err:?}");
    insta::assert_snapshot!(report(&err));
}

#[test]
fn error_chain_of_a_refused_generation_says_the_refusal_once() {
    let dir = tempfile::tempdir().unwrap();
    let shard = common::open(dir.path(), config(1 << 20, Durability::OnCommit));
    shard.begin_generation(3).unwrap();
    shard.append(&records(0, 1, 10)).wait().unwrap();
    let err = shard.begin_generation(2).unwrap_err();
    assert!(matches!(err, StorageError::Generation { .. }), "{err:?}");
    insta::assert_snapshot!(report(&err));
}

#[test]
fn error_chain_of_a_key_too_long_says_the_part_once() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path())
        .config(config(1 << 20, Durability::OnCommit))
        .open()
        .unwrap();
    let long = "n".repeat(4097);
    let key = ShardKey::new("t", long.as_str(), "s", 0);
    let err = store.create_shard(&key).unwrap_err();
    assert!(matches!(err, StorageError::KeyTooLong { .. }), "{err:?}");
    // The key is named in full; the snapshot shortens it.
    insta::assert_snapshot!(report(&err).replace(&long, "n…(4,097 bytes)"));
    store.close().unwrap();
}
