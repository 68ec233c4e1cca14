//! The raft-state fixtures under `fixtures/v2/raft-state/` read as
//! `fixtures/v2/README.md` says: the golden file gives the log its vote
//! and finishes its purge; each damaged one refuses the open with the
//! decode error it is named after.

use std::path::{Path, PathBuf};

use felix_format::RAFT_STATE_FILE_NAME;
use felix_raft::{FelixLogStore, RaftLogError, TypeConfig, Vote};
use openraft::RaftLogReader;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v2/raft-state")
}

/// Copies `dir`'s binaries (not the `.hex.txt` dumps) into `to`.
fn copy_into(dir: &Path, to: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".hex.txt") && entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

#[test]
fn fixture_raft_state_golden_gives_the_vote_and_finishes_the_purge() {
    let dir = tempfile::tempdir().unwrap();
    copy_into(&fixtures(), dir.path());
    let mut log: FelixLogStore<TypeConfig> = FelixLogStore::options(dir.path()).open().unwrap();
    // Purged up to index 2: the open moved small-shard's start to 3.
    assert_eq!(log.shard().base_offset(), 3);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let vote = rt.block_on(log.read_vote()).unwrap();
    assert_eq!(vote, Some(Vote::new_committed(3, 2)));
}

#[test]
fn fixture_raft_state_damaged_each_refuses_the_open_with_its_variant() {
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(fixtures().join("damaged")).unwrap() {
        let entry = entry.unwrap();
        let variant = entry.file_name().to_string_lossy().into_owned();
        let dir = tempfile::tempdir().unwrap();
        copy_into(&fixtures(), dir.path());
        copy_into(&entry.path(), dir.path());
        let err = FelixLogStore::<TypeConfig>::options(dir.path())
            .open()
            .unwrap_err();
        match err {
            RaftLogError::RaftState { path, source } => {
                assert_eq!(source.name(), variant);
                assert_eq!(path, dir.path().join(RAFT_STATE_FILE_NAME));
            }
            other => panic!("{variant}: {other:?}"),
        }
        seen.push(variant);
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            "RaftStateChecksum",
            "RaftStateFlags",
            "RaftStateInconsistent",
            "RaftStateLength",
            "RaftStateMagic",
            "RaftStateVersion"
        ]
    );
}
