//! Everything in a shard directory that is not a segment, an index or a
//! stray: our temporaries (removed on open, and only ours), and entries
//! under our names that are not regular files (never opened — a FIFO would
//! block — and left alone; one named like a segment stops the open, named
//! as what it is). `inspect` says in its notes exactly what an open does.

mod common;

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use common::{LABEL, build_shard, index_name, seg_name};
use felix_io::{FileType, NotRegularFile};
use felix_recovery::{
    Action, IndexProblem, InspectOptions, Inspection, Note, OpenOptions, RecoveredShard,
    RecoveryError, TemporaryKind, inspect, open_shard,
};
use rustix::fs::{CWD, FileType as NodeType, Mode, mknodat};

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

fn options() -> InspectOptions {
    InspectOptions {
        index_spacing_bytes: 64,
        full_verify: false,
        ..InspectOptions::default()
    }
}

fn inspect_in_time(dir: &Path) -> Result<Inspection, RecoveryError> {
    let dir = dir.to_path_buf();
    within(move || inspect(&felix_io::FileSystem::os(), &dir, LABEL, &options()))
}

fn open_in_time(dir: &Path) -> Result<RecoveredShard, RecoveryError> {
    let dir = dir.to_path_buf();
    within(move || {
        open_shard(
            &felix_io::FileSystem::os(),
            &dir,
            LABEL,
            &OpenOptions {
                inspect: options(),
                repair_policy: felix_recovery::RepairPolicy::Default,
                use_clean_shutdown: true,
                keep_clean_shutdown: false,
            },
            &common::lock(&dir),
        )
    })
}

fn entry_type(path: &Path) -> FileType {
    std::fs::symlink_metadata(path).unwrap().file_type().into()
}

fn assert_not_regular(
    result: Result<impl std::fmt::Debug, RecoveryError>,
    path: &Path,
    file_type: FileType,
    via_symlink: bool,
) {
    match result {
        Err(RecoveryError::NotRegularFile {
            path: found,
            not_regular,
        }) => {
            assert_eq!(found, path);
            assert_eq!(
                not_regular,
                NotRegularFile {
                    file_type,
                    via_symlink
                }
            );
        }
        other => panic!(
            "expected NotRegularFile for {}, got {other:?}",
            path.display()
        ),
    }
}

/// What to plant, what it is, whether behind a link, and how to make it.
type Case = (&'static str, FileType, bool, fn(&Path));

#[test]
fn inspect_entries_named_like_a_segment_that_are_not_files_are_refused_unopened() {
    let dir = tempfile::tempdir().unwrap();
    build_shard(dir.path(), 0, &[3, 2], 64);
    let cases: [Case; 4] = [
        ("fifo", FileType::Fifo, false, mkfifo),
        ("directory", FileType::Directory, false, |p| {
            std::fs::create_dir(p).unwrap()
        }),
        ("device behind a link", FileType::CharDevice, true, |p| {
            std::os::unix::fs::symlink("/dev/null", p).unwrap()
        }),
        ("fifo behind a link", FileType::Fifo, true, |p| {
            let target = p.with_file_name("elsewhere");
            mkfifo(&target);
            std::os::unix::fs::symlink(&target, p).unwrap()
        }),
    ];
    for (what, file_type, via_symlink, make) in cases {
        // As the newest segment (the one a writer continues) and as a
        // sealed one between two real segments.
        for id in [5u64, 1] {
            let shard = tempfile::tempdir().unwrap();
            build_shard(shard.path(), 0, &[3, 2, 1], 64);
            let path = shard.path().join(seg_name(id));
            if id == 1 {
                std::fs::remove_file(&path).unwrap();
            }
            make(&path);
            assert_not_regular(inspect_in_time(shard.path()), &path, file_type, via_symlink);
            assert_not_regular(open_in_time(shard.path()), &path, file_type, via_symlink);
            let expected = if via_symlink {
                FileType::Symlink
            } else {
                file_type
            };
            assert_eq!(entry_type(&path), expected, "{what} left alone");
        }
    }
}

#[test]
fn inspect_error_names_the_path_and_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    build_shard(dir.path(), 0, &[3], 64);
    let path = dir.path().join(seg_name(1));
    std::os::unix::fs::symlink("/dev/null", &path).unwrap();
    let err = inspect_in_time(dir.path()).unwrap_err();
    assert_eq!(
        err.to_string()
            .replace(&dir.path().display().to_string(), "[DIR]"),
        "[DIR]/00000000000000000001.log is named like a segment but is a character device \
         behind a symbolic link, not a regular file; it was not opened, and the shard cannot \
         be opened until it is moved away or the segment restored"
    );
}

#[test]
fn inspect_fifo_named_like_an_index_is_rebuilt_in_memory_and_never_opened() {
    let dir = tempfile::tempdir().unwrap();
    let next = build_shard(dir.path(), 0, &[4, 3], 64);
    for id in [0, 1] {
        let index = dir.path().join(index_name(id));
        std::fs::remove_file(&index).unwrap();
        mkfifo(&index);
    }
    let inspection = inspect_in_time(dir.path()).unwrap();
    let fifo = NotRegularFile {
        file_type: FileType::Fifo,
        via_symlink: false,
    };
    assert_eq!(
        inspection.notes,
        [0, 1].map(|segment| Note::IndexUnusable {
            segment,
            reason: IndexProblem::NotAFile(fifo),
        })
    );
    assert_eq!(inspection.plan, [], "no index is written over a FIFO");
    assert_eq!(inspection.next_offset(), Some(next));

    let opened = open_in_time(dir.path()).unwrap();
    assert_eq!(opened.actions, []);
    let newest = opened.newest.unwrap();
    assert_eq!(newest.next_offset, next);
    // The scan rebuilt it, entry for entry as the writer made it.
    let layout = common::shard_layout(0, &[4, 3]);
    assert_eq!(
        newest.index.entries(),
        common::index_entries(&layout[1], options().index_spacing_bytes)
    );
    for id in [0, 1] {
        assert_eq!(entry_type(&dir.path().join(index_name(id))), FileType::Fifo);
    }
}

#[test]
fn inspect_notes_non_files_under_our_names_and_an_open_leaves_them_alone() {
    let dir = tempfile::tempdir().unwrap();
    build_shard(dir.path(), 0, &[3, 2], 64);
    let d = dir.path();
    mkfifo(&d.join("epochs"));
    std::os::unix::fs::symlink("/nonexistent/lock-target", d.join("lock")).unwrap();
    std::fs::create_dir(d.join("clean-shutdown")).unwrap();
    std::fs::create_dir(d.join("clean-shutdown.tmp")).unwrap();
    std::fs::create_dir(d.join("00000000000000000009.log.tmp")).unwrap();

    let inspection = inspect_in_time(d).unwrap();
    let not_a_file = |name: &str, file_type| Note::NotAFile {
        name: name.to_owned(),
        file_type,
    };
    assert_eq!(
        inspection.notes,
        [
            not_a_file("00000000000000000009.log.tmp", FileType::Directory),
            not_a_file("clean-shutdown", FileType::Directory),
            not_a_file("clean-shutdown.tmp", FileType::Directory),
            not_a_file("epochs", FileType::Fifo),
            not_a_file("lock", FileType::Symlink),
        ]
    );
    assert!(inspection.findings.is_empty());

    let opened = open_in_time(d).unwrap();
    assert_eq!(
        opened.inspection.notes, inspection.notes,
        "the open saw the same"
    );
    assert_eq!(opened.actions, []);
    for (name, file_type) in [
        ("epochs", FileType::Fifo),
        ("lock", FileType::Symlink),
        ("clean-shutdown", FileType::Directory),
        ("clean-shutdown.tmp", FileType::Directory),
        ("00000000000000000009.log.tmp", FileType::Directory),
    ] {
        assert_eq!(entry_type(&d.join(name)), file_type, "{name} left alone");
    }
}

#[test]
fn open_removes_only_our_own_temporaries_and_strays_stay_strays() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build_shard(d, 0, &[3], 64);
    for name in [
        "00000000000000000001.log.tmp",
        "clean-shutdown.tmp",
        "epochs.tmp",
        "raft-state.tmp",
        "operator-backup.log.tmp",
        "7.log.tmp",
        "00000000000000000001.index.tmp",
    ] {
        std::fs::write(d.join(name), b"left by someone").unwrap();
    }
    // felix-raft's file: neither a stray nor a temporary, and kept.
    // A valid one: a damaged one would be a note of its own.
    std::fs::write(
        d.join("raft-state"),
        felix_format::raft_state::encode_raft_state(&Default::default()),
    )
    .unwrap();
    let inspection = inspect_in_time(d).unwrap();
    let stray = |name: &str| Note::StrayFile {
        name: name.to_owned(),
    };
    let temporary = |name: &str, kind| Note::Temporary {
        name: name.to_owned(),
        kind,
    };
    assert_eq!(
        inspection.notes,
        [
            stray("00000000000000000001.index.tmp"),
            stray("7.log.tmp"),
            stray("operator-backup.log.tmp"),
            temporary(
                "00000000000000000001.log.tmp",
                TemporaryKind::SegmentCreation(1)
            ),
            temporary("clean-shutdown.tmp", TemporaryKind::CleanShutdown),
            temporary("epochs.tmp", TemporaryKind::EpochsUpdate),
            temporary("raft-state.tmp", TemporaryKind::RaftState),
        ]
    );
    assert!(inspection.plan.is_empty(), "temporaries are no repair");

    let opened = open_in_time(d).unwrap();
    assert_eq!(opened.actions, Vec::<Action>::new());
    let mut left: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp"))
        .collect();
    left.sort();
    // epochs.tmp is felix-epochs' to remove, when the history is loaded.
    assert_eq!(
        left,
        [
            "00000000000000000001.index.tmp",
            "7.log.tmp",
            "epochs.tmp",
            "operator-backup.log.tmp"
        ]
    );
    assert!(d.join("raft-state").exists());
}

/// Rewriting the clean-shutdown record, in place at a close that kept it
/// (unsynced) or through its temporary (synced), never touches what holds
/// its name unless that is a regular file: a FIFO, a socket, a directory
/// and a link are left exactly as they were, nothing is written through
/// the link (whose target is a file of exactly a record's length, the one
/// an in-place write would take), no temporary is left, and the call says
/// so with `Ok(false)` instead of blocking.
#[test]
fn clean_shutdown_rewrite_leaves_names_that_are_not_regular_files_alone() {
    use felix_format::{CLEAN_SHUTDOWN_FILE_NAME, SegmentExtent};
    use felix_io::FileSystem;
    use felix_recovery::{write_clean_shutdown, write_clean_shutdown_unsynced};

    let segments = [SegmentExtent {
        id: 0,
        base_offset: 0,
        next_offset: 3,
        len: 200,
    }];
    // The target of the link: another record for one segment, as long as
    // the one written.
    let target_bytes = {
        let dir = tempfile::tempdir().unwrap();
        let other = [SegmentExtent {
            len: 999,
            ..segments[0]
        }];
        assert!(write_clean_shutdown(&FileSystem::os(), dir.path(), &other).unwrap());
        std::fs::read(dir.path().join(CLEAN_SHUTDOWN_FILE_NAME)).unwrap()
    };
    type Plant = fn(&Path, &[u8]);
    let cases: [(&str, FileType, Plant); 4] = [
        ("fifo", FileType::Fifo, |p, _| mkfifo(p)),
        ("socket", FileType::Socket, |p, _| {
            // The socket stays in the directory after its listener closes.
            drop(std::os::unix::net::UnixListener::bind(p).unwrap());
        }),
        ("directory", FileType::Directory, |p, _| {
            std::fs::create_dir(p).unwrap()
        }),
        ("link to a record", FileType::Symlink, |p, bytes| {
            let target = p.with_file_name("elsewhere");
            std::fs::write(&target, bytes).unwrap();
            std::os::unix::fs::symlink(&target, p).unwrap();
        }),
    ];
    for sync in [false, true] {
        for (what, file_type, plant) in cases {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(CLEAN_SHUTDOWN_FILE_NAME);
            plant(&path, &target_bytes);
            let root = dir.path().to_path_buf();
            let written = within(move || {
                let fs = FileSystem::os();
                if sync {
                    write_clean_shutdown(&fs, &root, &segments)
                } else {
                    write_clean_shutdown_unsynced(&fs, &root, &segments)
                }
                .map_err(|e| e.to_string())
            });
            assert_eq!(
                written,
                Ok(false),
                "{what} (sync {sync}): no record written"
            );
            let meta = std::fs::symlink_metadata(&path).unwrap();
            assert_eq!(
                FileType::from(meta.file_type()),
                file_type,
                "{what} (sync {sync}): left as it was"
            );
            if file_type == FileType::Symlink {
                assert_eq!(
                    std::fs::read(dir.path().join("elsewhere")).unwrap(),
                    target_bytes,
                    "{what} (sync {sync}): nothing written through the link"
                );
            }
            assert!(
                !dir.path().join("clean-shutdown.tmp").exists(),
                "{what} (sync {sync}): no temporary left"
            );
        }
    }
}
