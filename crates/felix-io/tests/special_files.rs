//! The real file system opens nothing but regular files: a FIFO, socket,
//! device or directory (or a symbolic link to one) is refused without
//! blocking, creating modes never follow a link, and a directory's lock
//! survives the removal of any file in it.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use felix_io::{FileSystem, FileType, OpenMode, not_regular_file};
use rustix::fs::{CWD, FileType as NodeType, Mode, mknodat};

/// Runs `f` on another thread and fails the test if it has not returned
/// within five seconds: a regression that blocks on a FIFO fails instead
/// of hanging the suite.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(5))
        .unwrap_or_else(|_| panic!("{what} blocked"))
}

fn mkfifo(path: &Path) {
    mknodat(CWD, path, NodeType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
}

/// The real file system both ways a caller may hold it for `dir`: by path,
/// and with `dir` held open ([`FileSystem::through_dir`]), whose opens of
/// `dir`'s entries go through its descriptor. Every rule here holds for
/// both.
fn systems(dir: &Path) -> [(&'static str, FileSystem); 2] {
    let fs = FileSystem::os();
    [
        ("by path", fs.clone()),
        ("through the directory", fs.through_dir(dir)),
    ]
}

#[test]
fn open_refuses_fifos_sockets_devices_and_directories_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let _socket = std::os::unix::net::UnixListener::bind(dir.path().join("socket")).unwrap();
    std::os::unix::fs::symlink("/dev/null", dir.path().join("null")).unwrap();
    std::os::unix::fs::symlink(&fifo, dir.path().join("to-fifo")).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let cases = [
        ("fifo", FileType::Fifo, false),
        ("socket", FileType::Socket, false),
        ("null", FileType::CharDevice, true),
        ("to-fifo", FileType::Fifo, true),
        ("sub", FileType::Directory, false),
    ];
    for (how, fs) in systems(dir.path()) {
        for (name, file_type, via_symlink) in cases {
            for mode in [OpenMode::Read, OpenMode::ReadWrite] {
                let path = dir.path().join(name);
                let fs = fs.clone();
                let err = within(name, move || fs.open(&path, mode).map(drop).unwrap_err());
                let refused =
                    not_regular_file(&err).unwrap_or_else(|| panic!("{how}, {name}: {err}"));
                assert_eq!(
                    (refused.file_type, refused.via_symlink),
                    (file_type, via_symlink),
                    "{how}, {name} {mode:?}"
                );
            }
        }
    }
    let shown = within("display", {
        let path = dir.path().join("null");
        move || FileSystem::os().open(&path, OpenMode::Read).unwrap_err()
    });
    assert_eq!(
        shown.to_string(),
        "a character device behind a symbolic link, not a regular file"
    );
}

#[test]
fn creating_modes_and_file_locks_never_follow_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("precious");
    std::fs::write(&target, b"keep me").unwrap();
    let link = dir.path().join("epochs.tmp");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let dangling = dir.path().join("lock");
    std::os::unix::fs::symlink(outside.path().join("created"), &dangling).unwrap();
    for (how, fs) in systems(dir.path()) {
        for mode in [OpenMode::CreateTruncate, OpenMode::CreateOrOpen] {
            let err = fs.open(&link, mode).unwrap_err();
            assert_eq!(
                not_regular_file(&err).map(|n| n.file_type),
                Some(FileType::Symlink),
                "{how}, {mode:?}"
            );
            let err = fs.open(&dangling, mode).unwrap_err();
            assert_eq!(
                not_regular_file(&err).map(|n| n.file_type),
                Some(FileType::Symlink)
            );
        }
        let err = fs.try_lock(&dangling).unwrap_err();
        assert_eq!(
            not_regular_file(&err).map(|n| n.file_type),
            Some(FileType::Symlink)
        );
        let exists = fs.open(&link, OpenMode::CreateNew).unwrap_err();
        assert_eq!(exists.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me", "never emptied");
        assert!(
            !outside.path().join("created").exists(),
            "never created through"
        );
        // Reading follows a link to a regular file, as an operator may place a
        // segment elsewhere.
        let mut buf = [0u8; 7];
        fs.open(&link, OpenMode::Read)
            .unwrap()
            .read_exact_at(&mut buf, 0)
            .unwrap();
        assert_eq!(&buf, b"keep me");
    }
}

#[test]
fn list_dir_reports_each_entry_type_without_following_links() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("fifo"));
    std::os::unix::fs::symlink("/dev/null", dir.path().join("null")).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("plain"), b"").unwrap();
    let mut listed: Vec<_> = FileSystem::os()
        .list_dir(dir.path())
        .unwrap()
        .into_iter()
        .map(|e| (e.name.into_string().unwrap(), e.file_type))
        .collect();
    listed.sort();
    let fs = FileSystem::os();
    for (name, file_type) in &listed {
        assert_eq!(
            fs.entry_type(&dir.path().join(name)).unwrap(),
            Some(*file_type)
        );
    }
    assert_eq!(fs.entry_type(&dir.path().join("none")).unwrap(), None);
    assert_eq!(
        listed,
        [
            ("fifo".to_owned(), FileType::Fifo),
            ("null".to_owned(), FileType::Symlink),
            ("plain".to_owned(), FileType::Regular),
            ("sub".to_owned(), FileType::Directory),
        ]
    );
}

#[test]
fn dir_lock_holds_while_files_in_the_directory_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let lock_file = dir.path().join("lock");
    for (how, fs) in systems(dir.path()) {
        let first = fs.try_lock_dir(dir.path()).unwrap().expect("free");
        let file_guard = fs.try_lock(&lock_file).unwrap().expect("free");
        std::fs::remove_file(&lock_file).unwrap();
        // The file lock is gone with its name: a new file, a new lock.
        assert!(fs.try_lock(&lock_file).unwrap().is_some(), "{how}");
        // The directory's is not, asked through the same handle or another.
        assert!(fs.try_lock_dir(dir.path()).unwrap().is_none(), "{how}");
        assert!(
            FileSystem::os().try_lock_dir(dir.path()).unwrap().is_none(),
            "{how}"
        );
        drop(first);
        drop(file_guard);
        // Released with its guard, though the handle still holds the
        // directory open.
        assert!(fs.try_lock_dir(dir.path()).unwrap().is_some(), "{how}");
        assert!(
            FileSystem::os().try_lock_dir(dir.path()).unwrap().is_some(),
            "{how}"
        );
    }
}

#[test]
fn lock_dir_listing_lists_as_list_dir_does_and_holds_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("fifo"));
    std::os::unix::fs::symlink("/dev/null", dir.path().join("null")).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    // More names than one read of the directory returns, and long ones.
    for i in 0..300 {
        std::fs::write(dir.path().join(format!("{i:0>200}")), b"").unwrap();
    }
    let sorted = |mut entries: Vec<felix_io::DirEntry>| {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries
    };
    let everything = sorted(FileSystem::os().list_dir(dir.path()).unwrap());
    assert_eq!(everything.len(), 303);
    for (how, fs) in systems(dir.path()) {
        let (guard, listed) = fs.try_lock_dir_listing(dir.path()).unwrap().expect("free");
        assert_eq!(sorted(listed.unwrap()), everything, "{how}");
        assert!(matches!(fs.try_lock_dir(dir.path()), Ok(None)), "{how}");
        assert!(
            matches!(fs.try_lock_dir_listing(dir.path()), Ok(None)),
            "{how}"
        );
        drop(guard);
        // A second listing through the same handle starts at the first
        // entry again.
        let (_again, listed) = fs.try_lock_dir_listing(dir.path()).unwrap().expect("free");
        assert_eq!(sorted(listed.unwrap()), everything, "{how}");
    }
}

#[test]
fn through_dir_opens_the_directory_held_and_other_paths_by_name() {
    let parent = tempfile::tempdir().unwrap();
    let (dir, moved) = (parent.path().join("dir"), parent.path().join("moved"));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("a"), b"held").unwrap();
    std::fs::write(dir.join("sub/b"), b"by path").unwrap();
    let held = FileSystem::os().through_dir(&dir);
    std::fs::rename(&dir, &moved).unwrap();
    // The held directory's entries are reached through its descriptor,
    // whatever its name has become...
    let (file, len) = held
        .open_with_len(&dir.join("a"), OpenMode::ReadWrite)
        .unwrap();
    assert_eq!(len, Some(4));
    file.write_all_at(b"HELD", 0).unwrap();
    assert_eq!(std::fs::read(moved.join("a")).unwrap(), b"HELD");
    held.open(&dir.join("new"), OpenMode::CreateNew).unwrap();
    assert!(moved.join("new").is_file());
    let exists = held
        .open(&dir.join("new"), OpenMode::CreateNew)
        .unwrap_err();
    assert_eq!(exists.kind(), std::io::ErrorKind::AlreadyExists);
    assert!(held.try_lock(&dir.join("lock")).unwrap().is_some());
    assert!(moved.join("lock").is_file());
    // ... and every other path by its name: the old one no longer leads
    // anywhere.
    let err = held.open(&dir.join("sub/b"), OpenMode::Read).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    let (file, len) = held
        .open_with_len(&moved.join("sub/b"), OpenMode::Read)
        .unwrap();
    let mut buf = vec![0u8; 7];
    file.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!((len, buf.as_slice()), (Some(7), &b"by path"[..]));
    let err = FileSystem::os()
        .open(&dir.join("a"), OpenMode::Read)
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn through_a_missing_directory_is_the_file_system_by_path() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("later");
    let fs = FileSystem::os().through_dir(&dir);
    std::fs::create_dir(&dir).unwrap();
    // Nothing was held: the directory made since is reached by its name.
    fs.open(&dir.join("a"), OpenMode::CreateNew).unwrap();
    assert!(dir.join("a").is_file());
    assert!(fs.try_lock_dir(&dir).unwrap().is_some());
}
