//! Crash safety of the rewrite: stop after each step, as a crash would, and
//! check that the next load sees the old history or the new one.

use std::fs;

use super::*;

const STEPS: [StoreStep; 4] = [
    StoreStep::TempWritten,
    StoreStep::TempSynced,
    StoreStep::Renamed,
    StoreStep::DirSynced,
];

use crate::history::history_of as history;

fn old_history() -> EpochHistory {
    history(&[(1, 0), (2, 10)])
}

fn new_history() -> EpochHistory {
    history(&[(1, 0), (2, 10), (5, 40)])
}

/// Whether a crash right after `step` must leave the new file in place: only
/// once the rename has happened.
fn expects_new(step: StoreStep) -> bool {
    step >= StoreStep::Renamed
}

#[test]
fn store_crash_after_each_step_leaves_old_or_new() {
    for step in STEPS {
        let dir = tempfile::tempdir().unwrap();
        let file = EpochsFile::new(&felix_io::FileSystem::os(), dir.path());
        file.store(&old_history()).unwrap();

        file.store_until(&new_history(), Some(step)).unwrap();
        let loaded = file.load();

        assert!(matches!(loaded.status, LoadStatus::Loaded), "{step:?}");
        let expected = if expects_new(step) {
            new_history()
        } else {
            old_history()
        };
        assert_eq!(loaded.history, expected, "{step:?}");
        assert_eq!(loaded.removed_stale_temp, !expects_new(step), "{step:?}");
        assert!(!dir.path().join(EPOCHS_TEMP_FILE_NAME).exists(), "{step:?}");

        // The shard goes on: the next store after the crash completes.
        file.store(&new_history()).unwrap();
        assert_eq!(file.load().history, new_history(), "{step:?}");
    }
}

#[test]
fn store_crash_after_each_step_without_old_file_leaves_absent_or_new() {
    for step in STEPS {
        let dir = tempfile::tempdir().unwrap();
        let file = EpochsFile::new(&felix_io::FileSystem::os(), dir.path());

        file.store_until(&new_history(), Some(step)).unwrap();
        let loaded = file.load();

        if expects_new(step) {
            assert!(matches!(loaded.status, LoadStatus::Loaded), "{step:?}");
            assert_eq!(loaded.history, new_history(), "{step:?}");
        } else {
            assert!(matches!(loaded.status, LoadStatus::Absent), "{step:?}");
            assert!(loaded.history.is_empty(), "{step:?}");
        }
        assert_eq!(loaded.removed_stale_temp, !expects_new(step), "{step:?}");
    }
}

#[test]
fn load_torn_temp_after_crash_reads_old_and_removes_it() {
    // Before its fsync, a crash may leave the temporary with any prefix of
    // its bytes; none of them may leak into the history.
    let mut full = Vec::new();
    encode_epochs(new_history().entries(), &mut full).unwrap();
    for len in 0..=full.len() {
        let dir = tempfile::tempdir().unwrap();
        let file = EpochsFile::new(&felix_io::FileSystem::os(), dir.path());
        file.store(&old_history()).unwrap();
        file.store_until(&new_history(), Some(StoreStep::TempWritten))
            .unwrap();
        fs::write(dir.path().join(EPOCHS_TEMP_FILE_NAME), &full[..len]).unwrap();

        let loaded = file.load();

        assert!(matches!(loaded.status, LoadStatus::Loaded), "len {len}");
        assert_eq!(loaded.history, old_history(), "len {len}");
        assert!(loaded.removed_stale_temp, "len {len}");
        assert!(
            !dir.path().join(EPOCHS_TEMP_FILE_NAME).exists(),
            "len {len}"
        );
    }
}

#[test]
fn load_unsynced_rename_lost_reads_old() {
    // A crash between the rename and the directory fsync may lose the rename:
    // the old file and the complete, synced temporary are both on disk, which
    // is exactly the state after `TempSynced`. Build it by hand to say so.
    let dir = tempfile::tempdir().unwrap();
    let file = EpochsFile::new(&felix_io::FileSystem::os(), dir.path());
    file.store(&old_history()).unwrap();
    let mut new_bytes = Vec::new();
    encode_epochs(new_history().entries(), &mut new_bytes).unwrap();
    fs::write(dir.path().join(EPOCHS_TEMP_FILE_NAME), &new_bytes).unwrap();

    let loaded = file.load();

    assert!(matches!(loaded.status, LoadStatus::Loaded));
    assert_eq!(loaded.history, old_history());
    assert!(loaded.removed_stale_temp);
}

#[test]
fn load_stale_temp_only_reads_absent_and_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(EPOCHS_TEMP_FILE_NAME), b"FLEP partial").unwrap();
    let loaded = EpochsFile::new(&felix_io::FileSystem::os(), dir.path()).load();
    assert!(matches!(loaded.status, LoadStatus::Absent));
    assert!(loaded.removed_stale_temp);
    assert!(!dir.path().join(EPOCHS_TEMP_FILE_NAME).exists());
}

#[test]
fn store_over_stale_temp_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = EpochsFile::new(&felix_io::FileSystem::os(), dir.path());
    fs::write(dir.path().join(EPOCHS_TEMP_FILE_NAME), vec![0xAB; 100_000]).unwrap();
    file.store(&new_history()).unwrap();
    let loaded = file.load();
    assert!(matches!(loaded.status, LoadStatus::Loaded));
    assert_eq!(loaded.history, new_history());
    assert!(!loaded.removed_stale_temp);
}

#[test]
fn display_io_error_names_operation_and_path() {
    let err = felix_io::IoError::new(
        "fsync",
        Path::new("/x/epochs.tmp"),
        io::Error::other("Input/output error"),
    );
    assert_eq!(err.to_string(), "fsync /x/epochs.tmp: Input/output error");
    assert_eq!(err.op(), "fsync");
    assert_eq!(err.path(), Path::new("/x/epochs.tmp"));
    assert_eq!(err.kind(), io::ErrorKind::Other);
}
