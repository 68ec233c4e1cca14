//! Directories renamed and removed: the simulation makes each durable only
//! once the parent is synced, carries everything inside (files, pending
//! operations, locks) along a rename, and the OS file system agrees on
//! what `remove_dir` refuses.

use std::io::ErrorKind;
use std::path::Path;

use felix_io::sim::{CrashPlan, SimFs};
use felix_io::{FileSystem, OpenMode, Vfs, remove_dir_all};

/// `/root/shard` holding one durable file, everything synced.
fn setup() -> SimFs {
    let fs = SimFs::new();
    fs.create_dir_all(Path::new("/root/shard")).unwrap();
    fs.sync_dir(Path::new("/")).unwrap();
    fs.sync_dir(Path::new("/root")).unwrap();
    let f = fs
        .open(Path::new("/root/shard/a.log"), OpenMode::CreateNew)
        .unwrap();
    f.write_all_at(b"acked", 0).unwrap();
    f.sync_data().unwrap();
    fs.sync_dir(Path::new("/root/shard")).unwrap();
    assert!(fs.pending().is_empty());
    fs
}

fn read(fs: &SimFs, path: &str) -> Option<Vec<u8>> {
    fs.read_file(Path::new(path)).ok()
}

fn kinds(fs: &SimFs) -> Vec<(&'static str, String)> {
    fs.pending()
        .into_iter()
        .map(|p| (p.kind, p.path.display().to_string()))
        .collect()
}

#[test]
fn rename_dir_crash_gives_the_old_name_or_the_new_one_with_its_files() {
    let fs = setup();
    fs.rename(Path::new("/root/shard"), Path::new("/root/gone"))
        .unwrap();
    assert!(!fs.is_dir(Path::new("/root/shard")));
    assert_eq!(read(&fs, "/root/gone/a.log"), Some(b"acked".to_vec()));
    assert_eq!(kinds(&fs), [("rename_dir", "/root/gone".to_string())]);

    let lost = fs.crash(&CrashPlan::durable_only());
    assert_eq!(read(&lost, "/root/shard/a.log"), Some(b"acked".to_vec()));
    assert!(!lost.is_dir(Path::new("/root/gone")));
    let kept = fs.crash(&CrashPlan::everything(1));
    assert_eq!(read(&kept, "/root/gone/a.log"), Some(b"acked".to_vec()));
    assert!(!kept.is_dir(Path::new("/root/shard")));

    fs.sync_dir(Path::new("/root")).unwrap();
    let synced = fs.crash(&CrashPlan::durable_only());
    assert_eq!(read(&synced, "/root/gone/a.log"), Some(b"acked".to_vec()));
}

#[test]
fn rename_dir_carries_pending_operations_inside_it() {
    let fs = setup();
    fs.remove_file(Path::new("/root/shard/a.log")).unwrap();
    fs.rename(Path::new("/root/shard"), Path::new("/root/gone"))
        .unwrap();
    assert_eq!(
        kinds(&fs),
        [
            ("unlink", "/root/gone/a.log".to_string()),
            ("rename_dir", "/root/gone".to_string())
        ]
    );
    // The unlink kept, the rename lost: the directory is back under its old
    // name without the file; the reverse keeps the file under the new name.
    let cases = [
        (vec![true, false], "/root/shard", None),
        (vec![false, true], "/root/gone", Some(b"acked".to_vec())),
    ];
    for (keep, dir, file) in cases {
        let crashed = fs.crash(&CrashPlan {
            keep: keep.clone(),
            tear: None,
        });
        assert!(crashed.is_dir(Path::new(dir)), "{keep:?}");
        assert_eq!(read(&crashed, &format!("{dir}/a.log")), file, "{keep:?}");
    }
}

#[test]
fn rename_dir_of_an_unsynced_new_directory_survives_only_with_its_creation() {
    let fs = setup();
    fs.create_dir_all(Path::new("/root/new")).unwrap();
    fs.rename(Path::new("/root/new"), Path::new("/root/renamed"))
        .unwrap();
    assert_eq!(
        kinds(&fs),
        [
            ("mkdir", "/root/renamed".to_string()),
            ("rename_dir", "/root/renamed".to_string())
        ]
    );
    let cases = [
        (vec![false, false], None),
        (vec![true, false], Some("/root/new")),
        (vec![true, true], Some("/root/renamed")),
        (vec![false, true], None),
    ];
    for (keep, survivor) in cases {
        let crashed = fs.crash(&CrashPlan {
            keep: keep.clone(),
            tear: None,
        });
        for dir in ["/root/new", "/root/renamed"] {
            assert_eq!(
                crashed.is_dir(Path::new(dir)),
                survivor == Some(dir),
                "{keep:?} {dir}"
            );
        }
    }
}

#[test]
fn rename_dir_refuses_a_taken_name() {
    let fs = setup();
    fs.create_dir_all(Path::new("/root/other")).unwrap();
    fs.write_file(Path::new("/root/file"), b"x").unwrap();
    let err = fs
        .rename(Path::new("/root/shard"), Path::new("/root/other"))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DirectoryNotEmpty);
    let err = fs
        .rename(Path::new("/root/shard"), Path::new("/root/file"))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotADirectory);
    assert!(fs.is_dir(Path::new("/root/shard")));
}

#[test]
fn remove_dir_crash_loses_an_unsynced_removal_and_keeps_the_durable_entries() {
    let fs = setup();
    fs.remove_file(Path::new("/root/shard/a.log")).unwrap();
    fs.remove_dir(Path::new("/root/shard")).unwrap();
    assert!(!fs.is_dir(Path::new("/root/shard")));
    assert_eq!(
        kinds(&fs),
        [
            ("unlink", "/root/shard/a.log".to_string()),
            ("rmdir", "/root/shard".to_string())
        ]
    );
    let cases = [
        (vec![false, false], true, Some(b"acked".to_vec())),
        (vec![true, false], true, None),
        (vec![false, true], false, None),
        (vec![true, true], false, None),
    ];
    for (keep, dir, file) in cases {
        let crashed = fs.crash(&CrashPlan {
            keep: keep.clone(),
            tear: None,
        });
        assert_eq!(crashed.is_dir(Path::new("/root/shard")), dir, "{keep:?}");
        assert_eq!(read(&crashed, "/root/shard/a.log"), file, "{keep:?}");
    }
    fs.sync_dir(Path::new("/root")).unwrap();
    assert!(fs.pending().is_empty());
    assert!(
        !fs.crash(&CrashPlan::durable_only())
            .is_dir(Path::new("/root/shard"))
    );
}

#[test]
fn remove_dir_refuses_a_non_empty_directory_a_file_and_a_missing_name() {
    let fs = setup();
    let err = fs.remove_dir(Path::new("/root/shard")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DirectoryNotEmpty);
    fs.create_dir_all(Path::new("/root/parent/child")).unwrap();
    let err = fs.remove_dir(Path::new("/root/parent")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DirectoryNotEmpty);
    let err = fs.remove_dir(Path::new("/root/shard/a.log")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotADirectory);
    let err = fs.remove_dir(Path::new("/root/missing")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(read(&fs, "/root/shard/a.log"), Some(b"acked".to_vec()));
}

#[test]
fn dir_lock_follows_its_directory_through_a_rename() {
    let fs = setup();
    let guard = fs.try_lock_dir(Path::new("/root/shard")).unwrap().unwrap();
    let file_guard = fs.try_lock(Path::new("/root/shard/lock")).unwrap().unwrap();
    fs.rename(Path::new("/root/shard"), Path::new("/root/gone"))
        .unwrap();
    assert!(fs.try_lock_dir(Path::new("/root/gone")).unwrap().is_none());
    assert!(fs.try_lock(Path::new("/root/gone/lock")).unwrap().is_none());
    // A new directory under the old name is another one, not locked.
    fs.create_dir_all(Path::new("/root/shard")).unwrap();
    let other = fs.try_lock_dir(Path::new("/root/shard")).unwrap();
    assert!(other.is_some());
    drop((guard, file_guard));
    assert!(fs.try_lock_dir(Path::new("/root/gone")).unwrap().is_some());
    assert!(fs.try_lock(Path::new("/root/gone/lock")).unwrap().is_some());
}

#[test]
fn remove_dir_all_removes_a_tree_on_the_simulation_and_the_disk() {
    let sim = setup();
    sim.create_dir_all(Path::new("/root/shard/inner")).unwrap();
    sim.write_file(Path::new("/root/shard/inner/b"), b"y")
        .unwrap();
    remove_dir_all(&FileSystem::new(sim.clone()), Path::new("/root/shard")).unwrap();
    assert!(!sim.is_dir(Path::new("/root/shard")));
    assert!(sim.list_dir(Path::new("/root")).unwrap().is_empty());

    let root = tempfile::tempdir().unwrap();
    let os = FileSystem::os();
    let dir = root.path().join("shard");
    os.create_dir_all(&dir.join("inner")).unwrap();
    os.open(&dir.join("a.log"), OpenMode::CreateNew).unwrap();
    os.open(&dir.join("inner/b"), OpenMode::CreateNew).unwrap();
    // A link is removed itself, never followed.
    let outside = root.path().join("outside");
    std::fs::write(&outside, b"kept").unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("link")).unwrap();
    let err = os.remove_dir(&dir).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DirectoryNotEmpty);
    remove_dir_all(&os, &dir).unwrap();
    assert!(!dir.exists());
    assert_eq!(std::fs::read(&outside).unwrap(), b"kept");
}
