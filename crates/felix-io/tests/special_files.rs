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
    for (name, file_type, via_symlink) in cases {
        for mode in [OpenMode::Read, OpenMode::ReadWrite] {
            let path = dir.path().join(name);
            let err = within(name, move || {
                FileSystem::os().open(&path, mode).map(drop).unwrap_err()
            });
            let refused = not_regular_file(&err).unwrap_or_else(|| panic!("{name}: {err}"));
            assert_eq!(
                (refused.file_type, refused.via_symlink),
                (file_type, via_symlink),
                "{name} {mode:?}"
            );
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
    let fs = FileSystem::os();

    for mode in [OpenMode::CreateTruncate, OpenMode::CreateOrOpen] {
        let err = fs.open(&link, mode).unwrap_err();
        assert_eq!(
            not_regular_file(&err).map(|n| n.file_type),
            Some(FileType::Symlink),
            "{mode:?}"
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
    let fs = FileSystem::os();
    let lock_file = dir.path().join("lock");
    let first = fs.try_lock_dir(dir.path()).unwrap().expect("free");
    let file_guard = fs.try_lock(&lock_file).unwrap().expect("free");
    std::fs::remove_file(&lock_file).unwrap();
    // The file lock is gone with its name: a new file, a new lock.
    assert!(fs.try_lock(&lock_file).unwrap().is_some());
    // The directory's is not.
    assert!(fs.try_lock_dir(dir.path()).unwrap().is_none());
    drop(first);
    drop(file_guard);
    assert!(fs.try_lock_dir(dir.path()).unwrap().is_some());
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
    let fs = FileSystem::os();
    let sorted = |mut entries: Vec<felix_io::DirEntry>| {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries
    };
    let (guard, listed) = fs.try_lock_dir_listing(dir.path()).unwrap().expect("free");
    let listed = sorted(listed.unwrap());
    assert_eq!(listed.len(), 303);
    assert_eq!(listed, sorted(fs.list_dir(dir.path()).unwrap()));
    assert!(matches!(fs.try_lock_dir(dir.path()), Ok(None)));
    assert!(matches!(fs.try_lock_dir_listing(dir.path()), Ok(None)));
    drop(guard);
    assert!(fs.try_lock_dir(dir.path()).unwrap().is_some());
}
