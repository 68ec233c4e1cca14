//! One writer per shard directory, however the directory's `lock` file is
//! treated: deleted between two writers, replaced by a symbolic link, or
//! held by an earlier release that locks only that file.

use std::path::Path;

use felix_io::sim::SimFs;
use felix_io::{FileSystem, Vfs};
use felix_storage::lock::{LOCK_FILE_NAME, ShardLock};
use felix_storage::{Durability, ReadBound, Record, Shard, StorageError, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig {
        durability: Durability::OnCommit,
        ..StoreConfig::default()
    }
}

fn assert_locked(result: Result<impl std::fmt::Debug, StorageError>, dir: &Path) {
    match result {
        Err(StorageError::ShardLocked { dir: locked }) => assert_eq!(locked, dir),
        other => panic!("expected Locked for {}, got {other:?}", dir.display()),
    }
}

#[test]
fn shard_open_second_writer_is_locked_after_the_lock_file_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let first = Shard::options(dir.path())
        .config(config())
        .label("first")
        .open()
        .unwrap();
    first.append(&[Record::new(1, "acked")]).wait().unwrap();
    std::fs::remove_file(dir.path().join(LOCK_FILE_NAME)).unwrap();

    assert_locked(
        Shard::options(dir.path())
            .config(config())
            .label("second")
            .open(),
        dir.path(),
    );
    // A repair tool takes the same lock.
    assert_locked(
        ShardLock::acquire(&FileSystem::os(), dir.path()).map_err(StorageError::from),
        dir.path(),
    );
    // The first writer's records are untouched and it keeps writing.
    let receipt = first.append(&[Record::new(2, "more")]).wait().unwrap();
    assert_eq!(receipt.first_offset, 1);
    drop(first);
    let reopened = Shard::options(dir.path())
        .config(config())
        .label("again")
        .open()
        .unwrap();
    let payloads: Vec<_> = reopened
        .read(0, 1 << 20, ReadBound::Committed)
        .unwrap()
        .into_iter()
        .map(|r| r.payload)
        .collect();
    assert_eq!(payloads, ["acked", "more"]);
}

#[test]
fn shard_open_with_a_symlinked_lock_never_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("created-through-the-link");
    let link = dir.path().join(LOCK_FILE_NAME);
    std::os::unix::fs::symlink(&target, &link).unwrap();

    let first = Shard::options(dir.path())
        .config(config())
        .label("first")
        .open()
        .unwrap();
    assert!(!target.exists(), "nothing created outside the shard");
    assert!(
        std::fs::symlink_metadata(&link).unwrap().is_symlink(),
        "left alone"
    );
    // The directory's own lock still keeps a second writer out.
    assert_locked(
        Shard::options(dir.path())
            .config(config())
            .label("second")
            .open(),
        dir.path(),
    );
    drop(first);
    let third = Shard::options(dir.path())
        .config(config())
        .label("third")
        .open()
        .unwrap();
    assert_eq!(third.label(), "third");
    assert!(
        std::fs::symlink_metadata(&link).unwrap().is_symlink(),
        "still left alone"
    );
}

#[test]
fn shard_open_is_locked_while_an_earlier_release_holds_the_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    // What an earlier release's writer or `recover` holds: the file only.
    let fs = FileSystem::os();
    let earlier = fs.try_lock(&dir.path().join(LOCK_FILE_NAME)).unwrap();
    assert!(earlier.is_some());
    assert_locked(
        Shard::options(dir.path())
            .config(config())
            .label("new")
            .open(),
        dir.path(),
    );
    drop(earlier);
    let shard = Shard::options(dir.path())
        .config(config())
        .label("new")
        .open()
        .unwrap();
    // And an earlier release's attempt fails while this one holds it.
    assert!(
        fs.try_lock(&dir.path().join(LOCK_FILE_NAME))
            .unwrap()
            .is_none()
    );
    drop(shard);
}

#[test]
fn shard_open_on_a_simulated_disk_is_locked_until_the_first_is_dropped() {
    let sim = SimFs::new();
    let fs = FileSystem::new(sim.clone());
    let dir = Path::new("/shard");
    let first = Shard::options(dir)
        .file_system(fs.clone())
        .config(config())
        .label("first")
        .open()
        .unwrap();
    assert!(sim.is_dir(dir));
    assert_locked(
        Shard::options(dir)
            .file_system(fs.clone())
            .config(config())
            .label("second")
            .open(),
        dir,
    );
    assert_locked(
        ShardLock::acquire(&fs, dir).map_err(StorageError::from),
        dir,
    );
    drop(first);
    let third = Shard::options(dir)
        .file_system(fs.clone())
        .config(config())
        .label("third")
        .open()
        .unwrap();
    assert_eq!(third.label(), "third");
}
