//! Crash safety of the rewrite: the power cut after every call of a store
//! on the simulated disk, and every state the crash could leave loaded: the
//! old history or the new one, never a mix.

use std::fs;

use felix_io::Vfs;
use felix_io::sim::{CrashPlan, SimFs, Tear};

use super::*;

use crate::history::history_of as history;

fn old_history() -> EpochHistory {
    history(&[(1, 0), (2, 10)])
}

fn new_history() -> EpochHistory {
    history(&[(1, 0), (2, 10), (5, 40)])
}

/// A shard directory `/s` on a simulated disk, with the old history stored
/// when `old`.
fn sim_dir(old: bool) -> SimFs {
    let sim = SimFs::new();
    sim.create_dir_all(Path::new("/s")).unwrap();
    sim.sync_dir(Path::new("/")).unwrap();
    if old {
        let file = EpochsFile::new(&FileSystem::new(sim.clone()), "/s");
        file.store(&old_history()).unwrap();
    }
    sim
}

/// Cuts the power after every call of a store of the new history and loads
/// every disk the crash could leave (each subset of the pending operations,
/// every kept write whole or torn): the old history (absent without one) or
/// the new, the new once the store returned, and the shard goes on.
fn crash_through_a_store(old: bool) -> (u64, u64) {
    let calls = {
        let sim = sim_dir(old);
        let before = sim.mutating_calls();
        EpochsFile::new(&FileSystem::new(sim.clone()), "/s")
            .store(&new_history())
            .unwrap();
        sim.mutating_calls() - before
    };
    let (mut states, mut new) = (0, 0);
    for cut in 0..=calls {
        let sim = sim_dir(old);
        sim.cut_power_after(cut);
        let returned = EpochsFile::new(&FileSystem::new(sim.clone()), "/s")
            .store(&new_history())
            .is_ok();
        let pending = sim.pending();
        for bits in 0..1u64 << pending.len() {
            let keep: Vec<bool> = (0..pending.len()).map(|i| bits >> i & 1 == 1).collect();
            let tears = (0..pending.len())
                .filter(|&i| keep[i] && pending[i].kind == "write")
                .flat_map(|i| {
                    [
                        Some((i, Tear::Prefix(pending[i].len / 2))),
                        Some((i, Tear::Zeros)),
                    ]
                });
            for tear in std::iter::once(None).chain(tears) {
                states += 1;
                let plan = CrashPlan {
                    keep: keep.clone(),
                    tear,
                };
                let file = EpochsFile::new(&FileSystem::new(sim.crash(&plan)), "/s");
                let loaded = file.load();
                let at = format!("cut after {cut} (returned: {returned}), {plan:?}: {loaded:?}");
                if loaded.history == new_history() {
                    new += 1;
                    assert!(matches!(loaded.status, LoadStatus::Loaded), "{at}");
                } else if old {
                    assert!(!returned, "{at}");
                    assert!(matches!(loaded.status, LoadStatus::Loaded), "{at}");
                    assert_eq!(loaded.history, old_history(), "{at}");
                } else {
                    assert!(!returned, "{at}");
                    assert!(matches!(loaded.status, LoadStatus::Absent), "{at}");
                }
                // The shard goes on: the next store after the crash completes.
                file.store(&new_history()).unwrap();
                assert_eq!(file.load().history, new_history(), "{at}");
            }
        }
    }
    (states, new)
}

#[test]
fn store_crash_at_every_call_leaves_old_or_new() {
    let (states, new) = crash_through_a_store(true);
    assert!(states >= 12 && new > 0 && new < states, "{new} of {states}");
}

#[test]
fn store_crash_at_every_call_without_old_file_leaves_absent_or_new() {
    let (states, new) = crash_through_a_store(false);
    assert!(states >= 12 && new > 0 && new < states, "{new} of {states}");
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
