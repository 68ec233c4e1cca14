//! A shard directory holding things we did not put there under names we
//! use: a writer's open never opens them (a FIFO would block it), never
//! fails on one it can leave alone, and removes only its own temporaries.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use felix_io::sim::SimFs;
use felix_io::{FileSystem, FileType, Vfs};
use felix_recovery::RecoveryError;
use felix_storage::{
    Durability, Preallocation, ReadBound, Record, Shard, StorageError, StoreConfig,
};
use rustix::fs::{CWD, FileType as NodeType, Mode, mknodat};

fn config() -> StoreConfig {
    StoreConfig {
        durability: Durability::OnCommit,
        segment_size_bytes: 4096,
        index_spacing_bytes: 256,
        preallocate: Preallocation::Off,
        ..StoreConfig::default()
    }
}

/// Runs `f` on another thread, failing if it has not returned in five
/// seconds: a regression that opens a FIFO fails instead of hanging.
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(5))
        .expect("blocked: something was opened that should not have been")
}

fn mkfifo(path: &Path) {
    mknodat(CWD, path, NodeType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
}

fn open_in_time(dir: &Path) -> Result<Shard, StorageError> {
    let dir = dir.to_path_buf();
    within(move || {
        Shard::options(&dir)
            .config(config())
            .label("special")
            .open()
    })
}

fn entry_type(path: &Path) -> FileType {
    std::fs::symlink_metadata(path).unwrap().file_type().into()
}

/// A shard of a few hundred records over several segments, closed cleanly.
fn written_shard(dir: &Path) -> u64 {
    let shard = Shard::options(dir)
        .config(config())
        .label("special")
        .open()
        .unwrap();
    for o in 0..200u64 {
        shard
            .append(&[Record::new(o, format!("record-{o}-{}", "x".repeat(40)))])
            .wait()
            .unwrap();
    }
    assert!(shard.segments().len() > 2);
    shard.close().unwrap();
    shard.offsets().written
}

fn assert_reads_all(shard: &Shard, next: u64) {
    let mut offset = 0;
    while offset < next {
        let records = shard.read(offset, 1 << 20, ReadBound::Committed).unwrap();
        for r in records {
            assert_eq!(r.offset, offset);
            assert_eq!(r.payload, format!("record-{offset}-{}", "x".repeat(40)));
            offset += 1;
        }
    }
}

#[test]
fn shard_open_with_a_directory_named_clean_shutdown_opens_and_leaves_it() {
    let dir = tempfile::tempdir().unwrap();
    let next = written_shard(dir.path());
    let clean = dir.path().join("clean-shutdown");
    std::fs::remove_file(&clean).unwrap();
    std::fs::create_dir(&clean).unwrap();

    let shard = open_in_time(dir.path()).unwrap();
    assert_reads_all(&shard, next);
    shard.append(&[Record::new(0, "after")]).wait().unwrap();
    // A clean close cannot put its file there, and does not fail for it.
    shard.close().unwrap();
    assert!(shard.poisoned().is_none());
    drop(shard);
    assert_eq!(entry_type(&clean), FileType::Directory);
    let again = open_in_time(dir.path()).unwrap();
    assert_eq!(again.offsets().written, next + 1);
}

#[test]
fn shard_open_with_fifos_named_epochs_clean_shutdown_and_lock_does_not_block() {
    let dir = tempfile::tempdir().unwrap();
    let next = written_shard(dir.path());
    for name in ["clean-shutdown", "epochs", "lock"] {
        let path = dir.path().join(name);
        let _ = std::fs::remove_file(&path);
        mkfifo(&path);
    }
    let shard = open_in_time(dir.path()).unwrap();
    assert_reads_all(&shard, next);
    assert_eq!(shard.generations().entries(), [], "epochs unusable: empty");
    shard.close().unwrap();
    drop(shard);
    for name in ["clean-shutdown", "epochs", "lock"] {
        assert_eq!(entry_type(&dir.path().join(name)), FileType::Fifo, "{name}");
    }
}

#[test]
fn shard_open_with_a_fifo_named_like_a_segment_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    written_shard(dir.path());
    let fifo = dir.path().join("00000000000000000099.log");
    mkfifo(&fifo);
    match open_in_time(dir.path()) {
        Err(StorageError::Recovery(RecoveryError::NotRegularFile { path, not_regular })) => {
            assert_eq!(path, fifo);
            assert_eq!(not_regular.file_type, FileType::Fifo);
        }
        other => panic!("expected NotRegularFile, got {other:?}"),
    }
    assert_eq!(entry_type(&fifo), FileType::Fifo, "left alone");
}

#[test]
fn shard_open_removes_only_our_own_temporaries() {
    let dir = tempfile::tempdir().unwrap();
    let next = written_shard(dir.path());
    let ours = [
        "00000000000000000042.log.tmp",
        "clean-shutdown.tmp",
        "epochs.tmp",
    ];
    let theirs = ["operator-backup.log.tmp", "7.log.tmp", "notes.txt"];
    for name in ours.iter().chain(&theirs) {
        std::fs::write(dir.path().join(name), b"someone's bytes").unwrap();
    }
    let shard = open_in_time(dir.path()).unwrap();
    assert_reads_all(&shard, next);
    for name in ours {
        assert!(!dir.path().join(name).exists(), "{name} removed");
    }
    for name in theirs {
        assert_eq!(
            std::fs::read(dir.path().join(name)).unwrap(),
            b"someone's bytes",
            "{name} left alone"
        );
    }
}

#[test]
fn shard_open_on_a_simulated_disk_leaves_special_nodes_alone() {
    let sim = SimFs::new();
    let fs = FileSystem::new(sim.clone());
    let dir = Path::new("/shard");
    let shard = Shard::options(dir)
        .file_system(fs.clone())
        .config(config())
        .label("sim")
        .open()
        .unwrap();
    shard.append(&[Record::new(1, "kept")]).wait().unwrap();
    shard.close().unwrap();
    drop(shard);
    sim.remove_file(&dir.join("clean-shutdown")).unwrap();
    for (name, file_type) in [
        ("clean-shutdown", FileType::Fifo),
        ("epochs", FileType::Socket),
        ("00000000000000000000.log.tmp", FileType::Directory),
    ] {
        sim.make_node(&dir.join(name), file_type).unwrap();
    }
    let shard = Shard::options(dir)
        .file_system(fs.clone())
        .config(config())
        .label("sim")
        .open()
        .unwrap();
    assert_eq!(
        shard.read(0, 1 << 20, ReadBound::Committed).unwrap()[0].payload,
        "kept"
    );
    shard.close().unwrap();
    for (name, file_type) in [
        ("clean-shutdown", FileType::Fifo),
        ("epochs", FileType::Socket),
        ("00000000000000000000.log.tmp", FileType::Directory),
    ] {
        assert_eq!(
            sim.entry_type(&dir.join(name)).unwrap(),
            Some(file_type),
            "{name}"
        );
    }
}
#[test]
fn shard_open_with_a_fifo_named_like_an_index_serves_reads_rolls_and_closes() {
    let dir = tempfile::tempdir().unwrap();
    let next = written_shard(dir.path());
    let segments = Shard::options(dir.path())
        .config(config())
        .label("special")
        .open()
        .unwrap()
        .segments();
    let (first, active) = (
        segments[0].extent.id,
        segments[segments.len() - 1].extent.id,
    );
    for id in [first, active] {
        let index = dir
            .path()
            .join(felix_format::file_name(id, felix_format::FileKind::Index).as_str());
        std::fs::remove_file(&index).unwrap();
        mkfifo(&index);
    }
    let shard = open_in_time(dir.path()).unwrap();
    assert_reads_all(&shard, next);
    // Appends roll past the segment whose index name is a FIFO.
    let rolls_before = shard.stats().rolls;
    for o in next..next + 100 {
        shard
            .append(&[Record::new(o, format!("record-{o}-{}", "x".repeat(40)))])
            .wait()
            .unwrap();
    }
    assert!(shard.stats().rolls > rolls_before);
    assert_reads_all(&shard, next + 100);
    shard.close().unwrap();
    assert!(shard.poisoned().is_none());
    drop(shard);
    for id in [first, active] {
        let index = dir
            .path()
            .join(felix_format::file_name(id, felix_format::FileKind::Index).as_str());
        assert_eq!(entry_type(&index), FileType::Fifo);
    }
}
