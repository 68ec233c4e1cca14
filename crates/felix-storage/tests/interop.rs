//! Every interop case opened through Store/Shard gives its README's answers.

use std::path::Path;

use felix_storage::{
    Durability, Preallocation, ReadBound, Shard, ShardId, ShardKey, StorageError, Store,
    StoreConfig,
};

fn corpus() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/interop")
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), to).unwrap();
        }
    }
}

fn config(index_spacing_bytes: u64) -> StoreConfig {
    StoreConfig {
        segment_size_bytes: 64 * 1024,
        index_spacing_bytes,
        preallocate: Preallocation::Off,
        durability: Durability::OnCommit,
        ..StoreConfig::default()
    }
}

fn interop_payload(offset: u64, len: usize) -> Vec<u8> {
    let mut payload = format!("felix-record-{offset:020}-").into_bytes();
    for i in payload.len()..len {
        payload.push(((offset % 251) as usize + i) as u8);
    }
    payload
}

fn open_case(case: &str, spacing: u64) -> (tempfile::TempDir, Shard) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&corpus().join(case), dir.path());
    let shard = Shard::options(dir.path())
        .config(config(spacing))
        .label(case)
        .open()
        .unwrap();
    (dir, shard)
}

fn check_payloads(shard: &Shard, len: usize) -> u64 {
    let mut offset = shard.offsets().base;
    let mut count = 0;
    while offset < shard.offsets().written {
        for r in shard.read(offset, 1 << 20, ReadBound::Committed).unwrap() {
            assert_eq!(r.offset, offset);
            assert_eq!(r.payload, interop_payload(offset, len), "offset {offset}");
            offset += 1;
            count += 1;
        }
    }
    count
}

#[test]
fn shard_open_interop_clean_4seg() {
    let (_dir, shard) = open_case("clean-4seg", 4096);
    assert_eq!(
        (
            shard.offsets().base,
            shard.offsets().written,
            shard.segments().len()
        ),
        (0, 2000, 4)
    );
    assert_eq!(check_payloads(&shard, 100), 2000);
    assert!(shard.stats().recovery_actions.is_empty());
}

#[test]
fn shard_open_interop_torn_tail_repairs_to_1999() {
    let (_dir, shard) = open_case("torn-tail", 4096);
    assert_eq!(shard.offsets().written, 1999);
    assert_eq!(check_payloads(&shard, 100), 1999);
    assert!(matches!(
        shard.stats().recovery_actions.as_slice(),
        [felix_recovery::Action::Truncate { segment: 3, .. }, ..]
    ));
}

#[test]
fn shard_open_interop_trimmed_head_and_foreign_ids_begin_at_511() {
    for case in ["trimmed-head", "foreign-ids"] {
        let (_dir, shard) = open_case(case, 4096);
        assert_eq!(
            (shard.offsets().base, shard.offsets().written),
            (511, 2000),
            "{case}"
        );
        assert_eq!(check_payloads(&shard, 100), 1489);
        for offset in [0, 255, 510] {
            let err = shard.read(offset, 10, ReadBound::Committed).unwrap_err();
            assert!(
                matches!(err, StorageError::Trimmed { requested, oldest: 511, .. } if requested == offset),
                "{err:?}"
            );
        }
    }
}

#[test]
fn shard_open_interop_garbage_index_reads_every_record() {
    let (dir, shard) = open_case("garbage-index", 4096);
    assert_eq!(check_payloads(&shard, 100), 2000);
    assert!(
        dir.path().join("00000000000000000001.index").exists(),
        "the missing index was rebuilt"
    );
}

#[test]
fn shard_open_interop_killed_on_commit_keeps_acknowledged_offsets_and_appends() {
    let (_dir, shard) = open_case("killed-on-commit", 1024);
    assert!(
        shard.offsets().written >= 2730,
        "{}",
        shard.offsets().written
    );
    assert_eq!(check_payloads(&shard, 200), shard.offsets().written);
    let next = shard.offsets().written;
    let receipt = shard
        .append(&[felix_storage::Record::new(1, interop_payload(next, 200))])
        .wait()
        .unwrap();
    assert_eq!(receipt.first_offset, next);
}

#[test]
fn store_finds_root_layout_shards_by_their_keys() {
    let root = tempfile::tempdir().unwrap();
    copy_dir(&corpus().join("root-layout"), root.path());
    let store = Store::options(root.path())
        .config(config(4096))
        .open()
        .unwrap();
    // The reference implementation writes no key file: listed by name.
    let names = [
        "acme_default_orders_0-0d3aed4b998d2798",
        "acme_default_orders_3-0d3af04b998d2cb1",
    ];
    assert_eq!(
        store.keys().unwrap(),
        names.map(|n| ShardId::Dir(n.to_owned()))
    );
    let keys = [
        ShardKey::new("acme", "default", "orders", 0),
        ShardKey::new("acme", "default", "orders", 3),
    ];
    let zero = store.open_shard(&keys[0]).unwrap();
    assert_eq!((zero.offsets().base, zero.offsets().written), (0, 2000));
    let three = store.open_shard(&keys[1]).unwrap();
    assert!(three.offsets().written >= 2730);
    // Opened by a key whose directory name they have, they get key files.
    assert_eq!(store.keys().unwrap(), keys.clone().map(ShardId::Key));
    store.close().unwrap();
    for (name, key) in names.iter().zip(&keys) {
        assert_eq!(
            felix_recovery::read_key_file(&felix_io::FileSystem::os(), &root.path().join(name)),
            felix_recovery::StoredKey::Key(key.clone())
        );
    }
}
