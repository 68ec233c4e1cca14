//! The exact keys of a store's shards: each shard directory keeps its key
//! in a key file, `Store::keys` lists them, key-less directories (as the
//! reference implementation writes them) are listed by name and get the
//! file once opened by their key, and a key file naming another key is
//! refused, never adopted.

use felix_format::key_file::encode_key_file;
use felix_format::{KEY_FILE_NAME, ShardKey};
use felix_io::FileSystem;
use felix_recovery::{StoredKey, read_key_file};
use felix_storage::{Preallocation, ReadBound, Record, ShardId, StorageError, Store, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig {
        preallocate: Preallocation::Off,
        ..StoreConfig::default()
    }
}

fn key_file(key: &ShardKey) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_key_file(key, &mut bytes).unwrap();
    bytes
}

/// Row 3 of the issue: names are lossy, so the exact keys were lost.
#[test]
fn store_keys_lists_the_exact_keys_of_lossy_directory_names() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    let keys = [
        ShardKey::new("ünï", "ns", "s", 3),
        ShardKey::new("_n_", "ns", "s", 3),
        ShardKey::new("", "", "", 0),
        ShardKey::new("a/b", "..", "c d", 1),
    ];
    for key in &keys {
        store.create_shard(key).unwrap();
    }
    // The first two render alike but for their hashes.
    assert_eq!(
        keys[0].dir_name().split('-').next(),
        keys[1].dir_name().split('-').next()
    );
    let mut expected: Vec<ShardId> = keys.iter().cloned().map(ShardId::Key).collect();
    expected.sort();
    assert_eq!(store.keys().unwrap(), expected);
    // The listing reads the files, not the open shards: the same after a
    // close, from a new store.
    store.close().unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    assert_eq!(store.keys().unwrap(), expected);
    for id in &expected {
        let shard = store.open_shard(id.key().unwrap()).unwrap();
        assert_eq!(shard.label(), id.key().unwrap().to_string());
    }
}

#[test]
fn store_keys_ignores_what_is_not_a_shard_directory() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    let key = ShardKey::new("acme", "default", "orders", 0);
    store.create_shard(&key).unwrap();
    std::fs::create_dir(root.path().join("lost+found")).unwrap();
    std::fs::write(
        root.path().join("acme_default_orders_9-0d3aed4b998d2798"),
        b"a file, not a directory",
    )
    .unwrap();
    assert_eq!(store.keys().unwrap(), [ShardId::Key(key)]);
}

#[test]
fn store_open_shard_of_a_key_less_directory_writes_its_key_file() {
    let root = tempfile::tempdir().unwrap();
    let key = ShardKey::new("acme", "default", "orders", 0);
    let dir = root.path().join(key.dir_name());
    {
        let store = Store::options(root.path()).config(config()).open().unwrap();
        store
            .create_shard(&key)
            .unwrap()
            .append(&[Record::new(1, "a")])
            .wait()
            .unwrap();
        store.close().unwrap();
    }
    // As the reference implementation leaves it: no key file.
    std::fs::remove_file(dir.join(KEY_FILE_NAME)).unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    assert_eq!(store.keys().unwrap(), [ShardId::Dir(key.dir_name())]);
    assert_eq!(store.open_shard(&key).unwrap().offsets().written, 1);
    assert_eq!(
        read_key_file(&FileSystem::os(), &dir),
        StoredKey::Key(key.clone())
    );
    assert_eq!(store.keys().unwrap(), [ShardId::Key(key)]);
}

#[test]
fn store_open_shard_with_a_damaged_key_file_opens_by_directory_name_and_rewrites_it() {
    let root = tempfile::tempdir().unwrap();
    let key = ShardKey::new("acme", "default", "orders", 0);
    let dir = root.path().join(key.dir_name());
    {
        let store = Store::options(root.path()).config(config()).open().unwrap();
        store
            .create_shard(&key)
            .unwrap()
            .append(&[Record::new(1, "a")])
            .wait()
            .unwrap();
        store.close().unwrap();
    }
    let mut bytes = std::fs::read(dir.join(KEY_FILE_NAME)).unwrap();
    bytes[20] ^= 0xFF;
    std::fs::write(dir.join(KEY_FILE_NAME), &bytes).unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    assert_eq!(store.keys().unwrap(), [ShardId::Dir(key.dir_name())]);
    let shard = store.open_shard(&key).unwrap();
    assert_eq!(
        shard.read(0, 1024, ReadBound::Committed).unwrap()[0].payload,
        "a"
    );
    assert_eq!(read_key_file(&FileSystem::os(), &dir), StoredKey::Key(key));
}

#[test]
fn store_open_shard_whose_key_file_names_another_key_is_refused_naming_both() {
    let root = tempfile::tempdir().unwrap();
    let key = ShardKey::new("acme", "default", "orders", 0);
    let other = ShardKey::new("acme", "default", "orders", 1);
    let dir = root.path().join(key.dir_name());
    {
        let store = Store::options(root.path()).config(config()).open().unwrap();
        store.create_shard(&key).unwrap();
        store.close().unwrap();
    }
    std::fs::write(dir.join(KEY_FILE_NAME), key_file(&other)).unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    let err = store.open_shard(&key).unwrap_err();
    let StorageError::KeyFileDisagrees {
        dir: d,
        requested,
        found,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!((d, &**requested, &**found), (&dir, &key, &other));
    assert_eq!(
        err.to_string(),
        format!(
            "shard directory {} holds the key file of shard acme/default/orders/1, not of acme/default/orders/0; it was left alone",
            dir.display()
        )
    );
    // Not adopted, not rewritten, not deleted; listed by its name only.
    assert_eq!(
        read_key_file(&FileSystem::os(), &dir),
        StoredKey::Key(other)
    );
    assert!(matches!(
        store.delete_shard(&key),
        Err(StorageError::KeyFileDisagrees { .. })
    ));
    assert!(dir.is_dir());
    assert_eq!(store.keys().unwrap(), [ShardId::Dir(key.dir_name())]);
}

#[test]
fn shard_id_dir_name_and_key_agree_with_the_directory() {
    let key = ShardKey::new("acme", "default", "orders", 0);
    let id = ShardId::Key(key.clone());
    assert_eq!((id.dir_name(), id.key()), (key.dir_name(), Some(&key)));
    let dir = ShardId::Dir("x_y_z_1-0000000000000000".into());
    assert_eq!(
        (dir.dir_name().as_str(), dir.key()),
        ("x_y_z_1-0000000000000000", None)
    );
}

#[test]
fn store_open_shard_leaves_a_key_name_that_is_not_a_regular_file_alone() {
    let root = tempfile::tempdir().unwrap();
    let key = ShardKey::new("acme", "default", "orders", 0);
    let dir = root.path().join(key.dir_name());
    {
        let store = Store::options(root.path()).config(config()).open().unwrap();
        store
            .create_shard(&key)
            .unwrap()
            .append(&[Record::new(1, "a")])
            .wait()
            .unwrap();
        store.close().unwrap();
    }
    std::fs::remove_file(dir.join(KEY_FILE_NAME)).unwrap();
    std::fs::create_dir(dir.join(KEY_FILE_NAME)).unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    assert_eq!(store.open_shard(&key).unwrap().offsets().written, 1);
    assert!(dir.join(KEY_FILE_NAME).is_dir(), "never replaced");
    assert_eq!(store.keys().unwrap(), [ShardId::Dir(key.dir_name())]);
}

/// A store's shard is labelled by its key as the broker names it, not by
/// its lossy directory name: in its label and in every error's text.
#[test]
fn a_store_opened_shards_errors_name_its_key() {
    let root = tempfile::tempdir().unwrap();
    let store = Store::options(root.path()).config(config()).open().unwrap();
    let key = ShardKey::new("acme", "default", "orders", 0);
    let shard = store.create_shard(&key).unwrap();
    assert_eq!(shard.label(), "acme/default/orders/0");
    let err = shard.append(&[]).wait().unwrap_err();
    assert!(
        matches!(&err, StorageError::EmptyBatch { shard } if &**shard == "acme/default/orders/0"),
        "{err:?}"
    );
    store.close_shard(&key).unwrap();
    let err = shard.read(0, 1 << 20, ReadBound::Committed).unwrap_err();
    assert_eq!(err.to_string(), "shard acme/default/orders/0 is closed");
    // Opened again through the store: the same label.
    let reopened = store.open_shard(&key).unwrap();
    assert_eq!(reopened.label(), key.to_string());
    // A key with no directory is named the same way.
    let missing = ShardKey::new("acme", "default", "ordres", 0);
    let err = store.open_shard(&missing).unwrap_err();
    assert!(
        matches!(&err, StorageError::ShardNotFound { shard, key: Some(key), .. } if **shard == *"acme/default/ordres/0" && **key == missing),
        "{err:?}"
    );
}
