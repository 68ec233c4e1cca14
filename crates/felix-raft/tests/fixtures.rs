//! The raft-state fixtures under `fixtures/v2/raft-state/` read as
//! `fixtures/v2/README.md` says: the golden file, version 1 (felix-raft on
//! openraft 0.9), refuses the open naming its log encoding; each damaged
//! one refuses the open with the decode error it is named after. The Raft
//! log under `fixtures/v2/raft-log/` (log encoding 2, a version-2 file)
//! opens and reads as the entries it was made of. The snapshot under
//! `fixtures/v2/raft-snapshot/` reads back as openraft's; each damaged one
//! refuses the open with its decode error.

use std::path::{Path, PathBuf};

use felix_format::RAFT_STATE_FILE_NAME;
use std::collections::{BTreeMap, BTreeSet};

use felix_raft::{Entry, FelixLogStore, LogId, RaftLogError, Request, TypeConfig, Vote};
use openraft::storage::RaftLogStorage;
use openraft::{BasicNode, EntryPayload, Membership, RaftLogReader};

fn raft_log_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v2/raft-log")
}

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
fn fixture_raft_state_version_1_is_refused_naming_its_format_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    copy_into(&fixtures(), dir.path());
    let before: Vec<_> = ["raft-state", "00000000000000000000.log"]
        .iter()
        .map(|n| std::fs::read(dir.path().join(n)).unwrap())
        .collect();
    let err = FelixLogStore::<TypeConfig>::options(dir.path())
        .open()
        .unwrap_err();
    assert!(
        matches!(&err, RaftLogError::LogEncoding { path, found: 1 } if *path == dir.path().join(RAFT_STATE_FILE_NAME)),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "the Raft log in {} is in log encoding 1 (written by felix-raft on openraft 0.9: postcard entries); this release reads log encoding 2",
            dir.path().display()
        )
    );
    let after: Vec<_> = ["raft-state", "00000000000000000000.log"]
        .iter()
        .map(|n| std::fs::read(dir.path().join(n)).unwrap())
        .collect();
    assert_eq!(before, after);
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

#[test]
fn fixture_raft_log_reads_as_its_entries_with_vote_and_committed_id() {
    let dir = tempfile::tempdir().unwrap();
    copy_into(&raft_log_fixture(), dir.path());
    let mut log: FelixLogStore<TypeConfig> = FelixLogStore::options(dir.path()).open().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(
            log.read_vote().await.unwrap(),
            Some(Vote::new_committed(3, 2))
        );
        assert_eq!(
            log.read_committed().await.unwrap(),
            Some(LogId::new_term_index(3, 3))
        );
        let nodes = BTreeMap::from([(1, BasicNode::new("a")), (2, BasicNode::new("b"))]);
        let membership = Membership::new(vec![BTreeSet::from([1, 2])], nodes).unwrap();
        let entry = |term, index, payload| Entry {
            log_id: LogId::new_term_index(term, index),
            payload,
        };
        // The fixture's timestamps: 1 ms apart after its creation time.
        let at = |offset: u64| 1_700_000_000_000_000 + 1_000 * (offset + 1);
        assert_eq!(
            log.try_get_log_entries(0..5).await.unwrap(),
            vec![
                entry(1, 0, EntryPayload::Blank),
                entry(1, 1, EntryPayload::Membership(membership)),
                entry(
                    1,
                    2,
                    EntryPayload::Normal(Request::at(at(2), &b"created"[..]))
                ),
                entry(3, 3, EntryPayload::Blank),
                entry(
                    3,
                    4,
                    EntryPayload::Normal(Request::at(at(4), &b"shipped"[..]))
                ),
            ]
        );
    });
}

fn raft_snapshot_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v2/raft-snapshot")
}

/// The snapshot `fixtures/v2/raft-snapshot/` records reads back as
/// openraft's: the id, and the membership in the bytes a membership entry
/// holds (voters {1, 2} at addresses "a" and "b").
#[test]
fn fixture_raft_snapshot_reads_as_its_id_and_membership() {
    let dir = tempfile::tempdir().unwrap();
    copy_into(&raft_snapshot_fixture(), dir.path());
    let log = FelixLogStore::<TypeConfig>::options(dir.path())
        .open()
        .unwrap();
    let meta = log.snapshot().unwrap().unwrap();
    assert_eq!(meta.last_log_id, Some(LogId::new_term_index(1, 1)));
    assert_eq!(
        *meta.last_membership.log_id(),
        Some(LogId::new_term_index(1, 1))
    );
    let members = Membership::new(
        vec![BTreeSet::from([1, 2])],
        BTreeMap::from([(1, BasicNode::new("a")), (2, BasicNode::new("b"))]),
    )
    .unwrap();
    assert_eq!(*meta.last_membership.membership(), members);
}

#[test]
fn fixture_raft_snapshot_damaged_each_refuses_the_open_with_its_variant() {
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(raft_snapshot_fixture().join("damaged")).unwrap() {
        let entry = entry.unwrap();
        let variant = entry.file_name().to_string_lossy().into_owned();
        let dir = tempfile::tempdir().unwrap();
        copy_into(&raft_snapshot_fixture(), dir.path());
        copy_into(&entry.path(), dir.path());
        let err = FelixLogStore::<TypeConfig>::options(dir.path())
            .open()
            .unwrap_err();
        match err {
            RaftLogError::RaftSnapshot { path, source } => {
                assert_eq!(source.name(), variant);
                assert_eq!(path, dir.path().join("raft-snapshot"));
            }
            other => panic!("{variant}: {other:?}"),
        }
        seen.push(variant);
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            "RaftSnapshotBodyTooLong",
            "RaftSnapshotChecksum",
            "RaftSnapshotFlags",
            "RaftSnapshotInconsistent",
            "RaftSnapshotLengthMismatch",
            "RaftSnapshotMagic",
            "RaftSnapshotShort",
            "RaftSnapshotVersion"
        ]
    );
}
