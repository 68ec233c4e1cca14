//! The simulated file system keeps durable and written state apart, and a
//! crash yields exactly the states a power loss could leave.

use std::path::Path;

use felix_io::sim::{BLOCK_BYTES, CrashPlan, Fault, FaultEffect, FaultOp, SimFs, Tear};
use felix_io::{FileType, OpenMode, Vfs, not_regular_file};

fn setup() -> SimFs {
    let fs = SimFs::new();
    fs.create_dir_all(Path::new("/d")).unwrap();
    fs.sync_dir(Path::new("/")).unwrap();
    fs
}

fn read(fs: &SimFs, path: &str) -> Option<Vec<u8>> {
    fs.read_file(Path::new(path)).ok()
}

#[test]
fn crash_loses_unsynced_writes_and_unsynced_directory_entries() {
    let fs = setup();
    let f = fs.open(Path::new("/d/a"), OpenMode::CreateNew).unwrap();
    f.write_all_at(b"hello", 0).unwrap();
    assert_eq!(fs.pending().len(), 2, "a link and a write");
    assert_eq!(read(&fs.crash(&CrashPlan::durable_only()), "/d/a"), None);

    f.sync_data().unwrap();
    // The data is durable but the name is not: the file is unreachable.
    assert_eq!(read(&fs.crash(&CrashPlan::durable_only()), "/d/a"), None);
    fs.sync_dir(Path::new("/d")).unwrap();
    assert_eq!(
        read(&fs.crash(&CrashPlan::durable_only()), "/d/a"),
        Some(b"hello".to_vec())
    );
    assert!(fs.pending().is_empty());
}

#[test]
fn crash_keeps_any_chosen_subset_of_pending_operations() {
    let fs = setup();
    let f = fs.open(Path::new("/d/a"), OpenMode::CreateNew).unwrap();
    f.sync_data().unwrap();
    fs.sync_dir(Path::new("/d")).unwrap();
    f.write_all_at(b"aaaa", 0).unwrap();
    f.write_all_at(b"bbbb", 4).unwrap();
    let cases = [
        (vec![false, false], b"".to_vec()),
        (vec![true, false], b"aaaa".to_vec()),
        (vec![false, true], b"\0\0\0\0bbbb".to_vec()),
        (vec![true, true], b"aaaabbbb".to_vec()),
    ];
    for (keep, expected) in cases {
        let crashed = fs.crash(&CrashPlan {
            keep: keep.clone(),
            tear: None,
        });
        assert_eq!(read(&crashed, "/d/a"), Some(expected), "{keep:?}");
    }
}

#[test]
fn crash_tears_a_write_at_any_byte_or_leaves_zeros() {
    let fs = setup();
    let f = fs.open(Path::new("/d/a"), OpenMode::CreateNew).unwrap();
    f.write_all_at(b"head", 0).unwrap();
    f.sync_data().unwrap();
    fs.sync_dir(Path::new("/d")).unwrap();
    f.write_all_at(b"tail", 4).unwrap();
    for n in 0..=4 {
        let crashed = fs.crash(&CrashPlan {
            keep: vec![true],
            tear: Some((0, Tear::Prefix(n))),
        });
        assert_eq!(
            read(&crashed, "/d/a").unwrap(),
            [&b"head"[..], &b"tail"[..n]].concat()
        );
    }
    let crashed = fs.crash(&CrashPlan {
        keep: vec![true],
        tear: Some((0, Tear::Zeros)),
    });
    assert_eq!(read(&crashed, "/d/a").unwrap(), b"head\0\0\0\0");
}

/// A write of three blocks' worth after 100 durable bytes: every subset of
/// its blocks can persist, the size always covers the whole write, and a
/// block that did not persist keeps what the disk held before it (the
/// durable head in the shared first block, zeros in the added space).
#[test]
fn crash_persists_any_subset_of_a_writes_blocks_with_the_size_ahead() {
    let fs = setup();
    let f = fs.open(Path::new("/d/a"), OpenMode::CreateNew).unwrap();
    f.write_all_at(&[b'h'; 100], 0).unwrap();
    f.sync_data().unwrap();
    fs.sync_dir(Path::new("/d")).unwrap();
    let block = BLOCK_BYTES as usize;
    let data: Vec<u8> = (0..2 * block + 50).map(|i| (i % 251) as u8 + 1).collect();
    f.write_all_at(&data, 100).unwrap();
    let pending = fs.pending();
    assert_eq!(pending.len(), 1);
    assert_eq!((pending[0].position, pending[0].len), (100, data.len()));
    assert_eq!(
        pending[0].blocks(),
        3,
        "100..8342 touches blocks 0, 1 and 2"
    );
    assert_eq!(
        pending[0].block_boundaries(),
        [block - 100, 2 * block - 100]
    );
    let written = [&[b'h'; 100][..], &data].concat();
    for mask in 0..8u64 {
        let crashed = fs.crash(&CrashPlan {
            keep: vec![true],
            tear: Some((0, Tear::Blocks(mask))),
        });
        let got = read(&crashed, "/d/a").unwrap();
        assert_eq!(
            got.len(),
            written.len(),
            "mask {mask:03b}: the size is ahead"
        );
        for (i, (&g, &w)) in got.iter().zip(&written).enumerate() {
            let persisted = i < 100 || mask >> (i / block) & 1 == 1;
            let expected = if persisted { w } else { 0 };
            assert_eq!(g, expected, "mask {mask:03b}, byte {i}");
        }
    }
}

/// A tear at a block boundary keeps the blocks before it and a size that
/// ends there: the prefix shape at block granularity.
#[test]
fn crash_tears_a_write_at_a_block_boundary() {
    let fs = setup();
    let f = fs.open(Path::new("/d/a"), OpenMode::CreateNew).unwrap();
    fs.sync_dir(Path::new("/d")).unwrap();
    let data = vec![7u8; 3 * BLOCK_BYTES as usize];
    f.write_all_at(&data, 10).unwrap();
    let boundaries = fs.pending()[0].block_boundaries();
    assert_eq!(boundaries.len(), 3);
    for n in boundaries {
        let crashed = fs.crash(&CrashPlan {
            keep: vec![true],
            tear: Some((0, Tear::Prefix(n))),
        });
        let got = read(&crashed, "/d/a").unwrap();
        assert_eq!(got.len() as u64 % BLOCK_BYTES, 0);
        assert_eq!(&got[10..], &data[..n]);
    }
}

#[test]
fn crash_after_rename_gives_the_old_file_or_the_new_one() {
    let fs = setup();
    let old = fs
        .open(Path::new("/d/epochs"), OpenMode::CreateNew)
        .unwrap();
    old.write_all_at(b"old", 0).unwrap();
    old.sync_data().unwrap();
    let tmp = fs
        .open(Path::new("/d/epochs.tmp"), OpenMode::CreateNew)
        .unwrap();
    tmp.write_all_at(b"new", 0).unwrap();
    tmp.sync_data().unwrap();
    fs.sync_dir(Path::new("/d")).unwrap();
    fs.rename(Path::new("/d/epochs.tmp"), Path::new("/d/epochs"))
        .unwrap();
    assert_eq!(
        read(&fs.crash(&CrashPlan::durable_only()), "/d/epochs"),
        Some(b"old".to_vec())
    );
    assert_eq!(
        read(&fs.crash(&CrashPlan::everything(1)), "/d/epochs"),
        Some(b"new".to_vec())
    );
    assert_eq!(
        read(&fs.crash(&CrashPlan::everything(1)), "/d/epochs.tmp"),
        None
    );
}

#[test]
fn sync_failure_with_data_dropped_reverts_to_the_durable_bytes() {
    let fs = setup();
    let f = fs.open(Path::new("/d/a"), OpenMode::CreateNew).unwrap();
    f.write_all_at(b"kept", 0).unwrap();
    f.sync_data().unwrap();
    f.write_all_at(b"lost", 4).unwrap();
    fs.inject(Fault {
        op: FaultOp::SyncFile,
        path_contains: "/d/a".into(),
        skip: 0,
        effect: FaultEffect::SyncFailDrop(5),
    });
    let err = f.sync_data().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(5));
    assert_eq!(fs.read_file(Path::new("/d/a")).unwrap(), b"kept");
    // The fault is spent: the next sync succeeds, but the data is gone.
    f.sync_data().unwrap();
    assert_eq!(fs.read_file(Path::new("/d/a")).unwrap(), b"kept");
}

#[test]
fn sync_failure_with_data_kept_leaves_it_pending() {
    let fs = setup();
    let f = fs.open(Path::new("/d/a"), OpenMode::CreateNew).unwrap();
    f.write_all_at(b"maybe", 0).unwrap();
    fs.inject(Fault {
        op: FaultOp::SyncFile,
        path_contains: String::new(),
        skip: 0,
        effect: FaultEffect::SyncFailKeep(5),
    });
    assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(5));
    assert_eq!(fs.read_file(Path::new("/d/a")).unwrap(), b"maybe");
    assert_eq!(fs.pending().iter().filter(|p| p.kind == "write").count(), 1);
}

#[test]
fn short_write_stores_a_prefix_and_fails() {
    let fs = setup();
    let f = fs.open(Path::new("/d/a"), OpenMode::CreateNew).unwrap();
    fs.inject(Fault {
        op: FaultOp::Write,
        path_contains: "a".into(),
        skip: 1,
        effect: FaultEffect::ShortWrite {
            written: 3,
            errno: 28,
        },
    });
    f.write_all_at(b"first", 0).unwrap();
    let err = f.write_all_at(b"second", 5).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(28));
    assert_eq!(fs.read_file(Path::new("/d/a")).unwrap(), b"firstsec");
    let log = fs.log();
    let writes: Vec<_> = log
        .iter()
        .filter(|e| e.op == "write")
        .map(|e| e.ok)
        .collect();
    assert_eq!(writes, [true, false]);
}

#[test]
fn lock_is_exclusive_until_dropped() {
    let fs = setup();
    let guard = fs.try_lock(Path::new("/d/lock")).unwrap();
    assert!(guard.is_some());
    assert!(fs.try_lock(Path::new("/d/lock")).unwrap().is_none());
    drop(guard);
    assert!(fs.try_lock(Path::new("/d/lock")).unwrap().is_some());
}

#[test]
fn dir_lock_is_exclusive_until_dropped_and_needs_the_directory() {
    let fs = setup();
    let guard = fs.try_lock_dir(Path::new("/d")).unwrap();
    assert!(guard.is_some());
    assert!(fs.try_lock_dir(Path::new("/d")).unwrap().is_none());
    // A file lock of the same path is another lock.
    assert!(fs.try_lock(Path::new("/d/lock")).unwrap().is_some());
    drop(guard);
    assert!(fs.try_lock_dir(Path::new("/d")).unwrap().is_some());
    let missing = fs.try_lock_dir(Path::new("/nowhere")).unwrap_err();
    assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn special_nodes_are_listed_with_their_type_and_never_opened() {
    let fs = setup();
    let nodes = [
        ("fifo", FileType::Fifo),
        ("socket", FileType::Socket),
        ("tty", FileType::CharDevice),
        ("disk", FileType::BlockDevice),
        ("link", FileType::Symlink),
        ("sub", FileType::Directory),
    ];
    for (name, file_type) in nodes {
        fs.make_node(&Path::new("/d").join(name), file_type)
            .unwrap();
    }
    fs.write_file(Path::new("/d/plain"), b"x").unwrap();
    let mut listed: Vec<_> = fs
        .list_dir(Path::new("/d"))
        .unwrap()
        .into_iter()
        .map(|e| (e.name.into_string().unwrap(), e.file_type))
        .collect();
    listed.sort();
    let mut expected: Vec<_> = nodes.iter().map(|&(n, t)| (n.to_owned(), t)).collect();
    expected.push(("plain".to_owned(), FileType::Regular));
    expected.sort();
    assert_eq!(listed, expected);

    for (name, file_type) in nodes {
        let path = Path::new("/d").join(name);
        for mode in [
            OpenMode::Read,
            OpenMode::ReadWrite,
            OpenMode::CreateTruncate,
        ] {
            let err = fs.open(&path, mode).unwrap_err();
            let refused = not_regular_file(&err).map(|n| n.file_type);
            if file_type == FileType::Symlink && mode != OpenMode::CreateTruncate {
                // A simulated link leads nowhere: a reader finds nothing.
                assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{name} {mode:?}");
            } else {
                assert_eq!(refused, Some(file_type), "{name} {mode:?}: {err}");
            }
        }
        let exists = fs.open(&path, OpenMode::CreateNew).unwrap_err();
        assert_eq!(exists.kind(), std::io::ErrorKind::AlreadyExists, "{name}");
        if file_type != FileType::Directory {
            let lock = fs.try_lock(&path).unwrap_err();
            assert_eq!(
                not_regular_file(&lock).map(|n| n.file_type),
                Some(file_type)
            );
        }
    }
    assert_eq!(fs.reads().calls, 0, "nothing was read");
    assert_eq!(
        fs.entry_type(Path::new("/d/fifo")).unwrap(),
        Some(FileType::Fifo)
    );
    assert_eq!(
        fs.entry_type(Path::new("/d/sub")).unwrap(),
        Some(FileType::Directory)
    );
    assert_eq!(
        fs.entry_type(Path::new("/d/plain")).unwrap(),
        Some(FileType::Regular)
    );
    assert_eq!(fs.entry_type(Path::new("/d/none")).unwrap(), None);
    // Unlinking a node removes the name without opening anything.
    fs.remove_file(Path::new("/d/fifo")).unwrap();
    let err = fs.remove_file(Path::new("/d/sub")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::IsADirectory);
}

#[test]
fn crash_loses_a_directory_whose_entry_was_never_synced_with_its_contents() {
    let fs = setup();
    fs.create_dir_all(Path::new("/d/a/b")).unwrap();
    let kinds: Vec<_> = fs.pending().into_iter().map(|p| (p.kind, p.path)).collect();
    assert_eq!(
        kinds,
        [
            ("mkdir", Path::new("/d/a").to_path_buf()),
            ("mkdir", Path::new("/d/a/b").to_path_buf())
        ]
    );
    let f = fs
        .open(Path::new("/d/a/b/data"), OpenMode::CreateNew)
        .unwrap();
    f.write_all_at(b"acked", 0).unwrap();
    f.sync_data().unwrap();
    fs.sync_dir(Path::new("/d/a/b")).unwrap();
    // The file and its entry are durable, but "a" and "b" are not.
    let crashed = fs.crash(&CrashPlan::durable_only());
    assert!(!crashed.is_dir(Path::new("/d/a")));
    assert_eq!(read(&crashed, "/d/a/b/data"), None);
    // Keeping only the inner directory's creation is not enough either.
    let crashed = fs.crash(&CrashPlan {
        keep: vec![false, true],
        tear: None,
    });
    assert!(!crashed.is_dir(Path::new("/d/a/b")));

    fs.sync_dir(Path::new("/d/a")).unwrap();
    assert_eq!(
        read(&fs.crash(&CrashPlan::durable_only()), "/d/a/b/data"),
        None
    );
    fs.sync_dir(Path::new("/d")).unwrap();
    let crashed = fs.crash(&CrashPlan::durable_only());
    assert_eq!(read(&crashed, "/d/a/b/data"), Some(b"acked".to_vec()));
    assert!(fs.pending().is_empty());
}

#[test]
fn read_only_handle_refuses_writes() {
    let fs = setup();
    fs.write_file(Path::new("/d/a"), b"x").unwrap();
    let f = fs.open(Path::new("/d/a"), OpenMode::Read).unwrap();
    assert_eq!(f.write_all_at(b"y", 0).unwrap_err().raw_os_error(), Some(9));
}

#[test]
fn cut_power_fails_every_later_mutation_and_freezes_the_disk() {
    let fs = setup();
    let f = fs.open(Path::new("/d/a"), OpenMode::CreateNew).unwrap();
    fs.cut_power_after(2);
    f.write_all_at(b"one", 0).unwrap();
    f.sync_data().unwrap();
    assert_eq!(
        f.write_all_at(b"two", 3).unwrap_err().raw_os_error(),
        Some(5)
    );
    assert_eq!(
        fs.sync_dir(Path::new("/d")).unwrap_err().raw_os_error(),
        Some(5)
    );
    assert_eq!(
        fs.open(Path::new("/d/b"), OpenMode::CreateNew)
            .unwrap_err()
            .raw_os_error(),
        Some(5)
    );
    // Reads still work, and the disk holds what happened before the cut.
    assert_eq!(fs.read_file(Path::new("/d/a")).unwrap(), b"one");
    assert_eq!(fs.pending().len(), 1, "the unsynced directory entry");
}

#[test]
fn skipped_sync_reports_success_but_makes_nothing_durable() {
    let fs = setup();
    let f = fs.open(Path::new("/d/a"), OpenMode::CreateNew).unwrap();
    fs.sync_dir(Path::new("/d")).unwrap();
    f.write_all_at(b"data", 0).unwrap();
    fs.inject(Fault {
        op: FaultOp::SyncFile,
        path_contains: "a".into(),
        skip: 0,
        effect: FaultEffect::SyncSkipped,
    });
    f.sync_data().unwrap();
    assert_eq!(
        read(&fs.crash(&CrashPlan::durable_only()), "/d/a"),
        Some(Vec::new())
    );
    f.sync_data().unwrap();
    assert_eq!(
        read(&fs.crash(&CrashPlan::durable_only()), "/d/a"),
        Some(b"data".to_vec())
    );
}

#[test]
fn io_error_clone_shares_the_system_error_and_source_reaches_it() {
    let err = felix_io::IoError::new(
        "fdatasync",
        Path::new("/d/00000000000000000003.log"),
        std::io::Error::from_raw_os_error(5),
    );
    let copy = err.clone();
    for e in [&err, &copy] {
        assert_eq!(e.op(), "fdatasync");
        assert_eq!(e.path(), Path::new("/d/00000000000000000003.log"));
        assert_eq!(e.raw_os_error(), Some(5));
        assert_eq!(e.kind(), std::io::Error::from_raw_os_error(5).kind());
        let source = std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .and_then(std::io::Error::raw_os_error);
        assert_eq!(source, Some(5));
    }
    assert!(
        std::ptr::eq(err.io_error(), copy.io_error()),
        "one io::Error, shared"
    );
    assert_eq!(
        copy.to_string(),
        format!(
            "fdatasync /d/00000000000000000003.log: {}",
            std::io::Error::from_raw_os_error(5)
        )
    );
}
