//! What a felix Raft log says after it is closed (or crashes) and opens
//! again: the vote, the purge (term included), the entries.

use felix_format::raft_state::{RaftLogId, RaftState, encode_raft_state};
use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
use felix_raft::{Entry, LogId, Request, Vote};
use felix_raft::{FelixLogStore, RaftLogError, TypeConfig};
use openraft::storage::{LogState, RaftLogStorage, RaftLogStorageExt};
use openraft::{EntryPayload, RaftLogReader};

fn id(term: u64, index: u64) -> LogId {
    LogId::new_term_index(term, index)
}

fn entry(term: u64, index: u64) -> Entry {
    Entry {
        log_id: id(term, index),
        payload: EntryPayload::Normal(Request::at(index, format!("e{index}").into_bytes())),
    }
}

fn open(dir: &std::path::Path) -> FelixLogStore<TypeConfig> {
    FelixLogStore::options(dir).open().unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn reopen_log_keeps_vote_entries_and_purge_with_its_term() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let mut log = open(dir.path());
        log.blocking_append((0..10).map(|i| entry(1 + i / 5, i)))
            .await
            .unwrap();
        log.save_vote(&Vote::new_committed(2, 3)).await.unwrap();
        log.purge(id(1, 3)).await.unwrap();
        log.close().unwrap();
        drop(log);

        let mut log = open(dir.path());
        assert_eq!(
            log.read_vote().await.unwrap(),
            Some(Vote::new_committed(2, 3))
        );
        assert_eq!(
            log.get_log_state().await.unwrap(),
            LogState {
                last_purged_log_id: Some(id(1, 3)),
                last_log_id: Some(id(2, 9)),
            }
        );
        let entries = log.try_get_log_entries(0..100).await.unwrap();
        assert_eq!(entries.first().map(|e| e.log_id), Some(id(1, 4)));
        assert_eq!(entries.len(), 6);
        // The terms are the shard's generations.
        assert_eq!(log.shard().generation_at(4), Some(1));
        assert_eq!(log.shard().generation_at(9), Some(2));
    });
}

#[test]
fn reopen_after_purge_past_the_end_is_empty_at_the_purged_id() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let mut log = open(dir.path());
        log.blocking_append((0..3).map(|i| entry(1, i)))
            .await
            .unwrap();
        log.purge(id(4, 20)).await.unwrap();
        log.close().unwrap();
        drop(log);

        let mut log = open(dir.path());
        assert_eq!(
            log.get_log_state().await.unwrap(),
            LogState {
                last_purged_log_id: Some(id(4, 20)),
                last_log_id: Some(id(4, 20)),
            }
        );
        assert_eq!(log.shard().offsets().base, 21);
        log.blocking_append([entry(5, 21)]).await.unwrap();
        assert_eq!(
            log.get_log_state().await.unwrap().last_log_id,
            Some(id(5, 21))
        );
    });
}

/// A purge stores its id, then moves the log start: a crash between the
/// two leaves the raft-state file ahead of the shard, and the next open
/// finishes the purge.
#[test]
fn open_after_crash_between_purge_writes_finishes_the_purge() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let mut log = open(dir.path());
        log.blocking_append((0..10).map(|i| entry(1, i)))
            .await
            .unwrap();
        log.save_vote(&Vote::new(1, 2)).await.unwrap();
        log.close().unwrap();
        drop(log);
        // The first write of purge((1, 5)) done, the second not.
        let state = RaftState {
            vote: Some(felix_format::raft_state::RaftVote {
                term: 1,
                voted_for: Some(2),
                committed: false,
            }),
            last_purged: Some(RaftLogId { term: 1, index: 5 }),
            ..RaftState::default()
        };
        std::fs::write(dir.path().join("raft-state"), encode_raft_state(&state)).unwrap();

        let mut log = open(dir.path());
        assert_eq!(log.shard().offsets().base, 6);
        assert_eq!(
            log.get_log_state().await.unwrap(),
            LogState {
                last_purged_log_id: Some(id(1, 5)),
                last_log_id: Some(id(1, 9)),
            }
        );
        assert_eq!(log.read_vote().await.unwrap(), Some(Vote::new(1, 2)));
        let entries = log.try_get_log_entries(0..10).await.unwrap();
        assert_eq!(entries.first().map(|e| e.log_id.index), Some(6));
    });
}

#[test]
fn open_with_damaged_raft_state_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let path = dir.path().join("raft-state");
    std::fs::write(&path, b"FLRS torn").unwrap();
    let err = FelixLogStore::<TypeConfig>::options(dir.path())
        .open()
        .unwrap_err();
    assert!(
        matches!(
            &err,
            RaftLogError::RaftState {
                path: p,
                source: SideFileError {
                    kind: SideFileKind::RaftState,
                    defect: SideFileDefect::Length { len: 9 },
                    embedded: None,
                },
            }
                if *p == path
        ),
        "{err:?}"
    );
}

#[test]
fn open_with_damaged_raft_snapshot_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let path = dir.path().join("raft-snapshot");
    std::fs::write(&path, [&b"FLSN"[..], &[0; 44]].concat()).unwrap();
    let err = FelixLogStore::<TypeConfig>::options(dir.path())
        .open()
        .unwrap_err();
    assert!(
        matches!(
            &err,
            RaftLogError::RaftSnapshot {
                path: p,
                source: SideFileError {
                    kind: SideFileKind::RaftSnapshot,
                    defect: SideFileDefect::Version { expected: 1, found: 0 },
                    embedded: None,
                },
            }
                if *p == path
        ),
        "{err:?}"
    );
}

#[test]
fn a_snapshot_recorded_survives_a_reopen_with_its_membership() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    assert_eq!(log.snapshot().unwrap(), None);
    let members = openraft::Membership::new(
        vec![[1u64, 2].into()],
        std::collections::BTreeMap::from([
            (1u64, openraft::BasicNode::new("a:1")),
            (2, openraft::BasicNode::new("b:2")),
        ]),
    )
    .unwrap();
    let meta = openraft::storage::SnapshotMeta {
        last_log_id: Some(id(3, 41)),
        last_membership: openraft::StoredMembership::new(Some(id(2, 7)), members),
    };
    log.save_snapshot(&meta).unwrap();
    log.close().unwrap();
    drop(log);
    let reopened = open(dir.path());
    assert_eq!(reopened.snapshot().unwrap(), Some(meta));
}

#[test]
fn truncate_drops_entries_and_their_generations() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let mut log = open(dir.path());
        log.blocking_append((0..6).map(|i| entry(1 + i / 3, i)))
            .await
            .unwrap();
        // Everything after index 2 goes: entries 3.. and their term.
        log.truncate_after(Some(id(1, 2))).await.unwrap();
        assert_eq!(
            log.get_log_state().await.unwrap().last_log_id,
            Some(id(1, 2))
        );
        assert_eq!(
            log.shard().generations().latest().map(|e| e.generation),
            Some(1)
        );
        // A new leader's entries go on at the end.
        log.blocking_append([entry(3, 3)]).await.unwrap();
        assert_eq!(log.shard().generation_at(3), Some(3));
    });
}

/// A raft-state vote that names no candidate (the layout allows one; this
/// crate never writes it) has no openraft 0.10 vote to give: reading it
/// fails, naming the term, rather than forgetting the vote.
#[test]
fn vote_for_no_candidate_is_refused_naming_its_term() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let state = RaftState {
        vote: Some(felix_format::raft_state::RaftVote {
            term: 4,
            voted_for: None,
            committed: false,
        }),
        last_purged: None,
        ..RaftState::default()
    };
    std::fs::write(dir.path().join("raft-state"), encode_raft_state(&state)).unwrap();
    let rt = runtime();
    rt.block_on(async {
        let mut log = open(dir.path());
        let err = log.read_vote().await.unwrap_err();
        let inner = err
            .get_ref()
            .and_then(|e| e.downcast_ref::<RaftLogError>())
            .unwrap();
        assert!(
            matches!(inner, RaftLogError::VoteWithoutCandidate { term: 4, .. }),
            "{inner:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "shard {}'s raft-state file records a vote in term 4 for no candidate",
                log.shard().label()
            )
        );
    });
}

fn stored_committed(dir: &std::path::Path) -> Option<Option<RaftLogId>> {
    let bytes = std::fs::read(dir.join("raft-state")).ok()?;
    Some(
        felix_format::raft_state::decode_raft_state(&bytes)
            .unwrap()
            .committed,
    )
}

/// The committed id is stored in the raft-state file, lazily: the first
/// one at once (its entry durable), a later one close behind it only at
/// close; read back after a reopen.
#[test]
fn committed_id_is_stored_and_read_back_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let mut log = open(dir.path());
        assert_eq!(log.read_committed().await.unwrap(), None);
        log.blocking_append((0..10).map(|i| entry(1, i)))
            .await
            .unwrap();
        log.save_committed(Some(id(1, 3))).await.unwrap();
        assert_eq!(
            stored_committed(dir.path()),
            Some(Some(RaftLogId { term: 1, index: 3 }))
        );
        log.save_committed(Some(id(1, 5))).await.unwrap();
        assert_eq!(log.read_committed().await.unwrap(), Some(id(1, 5)));
        // Two entries past the stored one, within the second: not yet.
        assert_eq!(
            stored_committed(dir.path()),
            Some(Some(RaftLogId { term: 1, index: 3 }))
        );
        log.close().unwrap();
        assert_eq!(
            stored_committed(dir.path()),
            Some(Some(RaftLogId { term: 1, index: 5 }))
        );
        drop(log);
        let mut log = open(dir.path());
        assert_eq!(log.read_committed().await.unwrap(), Some(id(1, 5)));
    });
}

/// A committed id naming an entry this log does not hold durably is kept
/// in memory only: an open never finds the committed id past the log, and
/// `read_committed` never names an entry past the log's end.
#[test]
fn committed_id_past_the_durable_log_is_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let mut log = open(dir.path());
        log.blocking_append((0..3).map(|i| entry(1, i)))
            .await
            .unwrap();
        log.save_committed(Some(id(1, 7))).await.unwrap();
        // Read back no further than the log's last entry.
        assert_eq!(log.read_committed().await.unwrap(), Some(id(1, 2)));
        assert_eq!(stored_committed(dir.path()), None, "no file written");
        log.save_committed(Some(id(1, 2))).await.unwrap();
        assert_eq!(
            stored_committed(dir.path()),
            Some(Some(RaftLogId { term: 1, index: 2 }))
        );
        // Nor at close.
        log.save_committed(Some(id(1, 7))).await.unwrap();
        log.close().unwrap();
        assert_eq!(
            stored_committed(dir.path()),
            Some(Some(RaftLogId { term: 1, index: 2 }))
        );
    });
}
