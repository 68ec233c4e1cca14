//! Replica support: appends at the leader's offsets, truncation, reset,
//! generations, and logs that begin anywhere.

mod common;

use bytes::Bytes;
use common::{config, open, payload, read_all, records, segment_files};
use felix_storage::{Durability, ReplicatedRecord, Shard, StorageError};

fn replicated(from: u64, count: u64) -> Vec<ReplicatedRecord> {
    (from..from + count)
        .map(|o| ReplicatedRecord {
            offset: o,
            generation: None,
            timestamp_micros: o,
            payload: Bytes::from(payload(o, 40)),
        })
        .collect()
}

#[test]
fn open_at_offset_begins_a_replica_log_there_and_reads_below_are_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let shard = Shard::options(dir.path())
        .config(config(1 << 20, Durability::OnCommit))
        .label("replica")
        .initial_offset(511)
        .open()
        .unwrap();
    assert_eq!((shard.base_offset(), shard.next_offset()), (511, 511));
    shard.append_replicated(&replicated(511, 3)).unwrap();
    let err = shard.read(0, 100).unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::Trimmed {
                requested: 0,
                oldest: 511,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(read_all(&shard, 511).len(), 3);
    drop(shard);
    let reopened = open(dir.path(), config(1 << 20, Durability::OnCommit));
    assert_eq!((reopened.base_offset(), reopened.next_offset()), (511, 514));
}

#[test]
fn append_replicated_rejects_anything_but_the_next_offset() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
    shard.append_replicated(&replicated(0, 2)).unwrap();
    let err = shard.append_replicated(&replicated(3, 1)).unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::ReplicaOffsetMismatch {
                index_in_batch: 0,
                expected: 2,
                found: 3,
                ..
            }
        ),
        "{err:?}"
    );
    let mut gap = replicated(2, 3);
    gap[2].offset = 9;
    let err = shard.append_replicated(&gap).unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::ReplicaOffsetMismatch {
                index_in_batch: 2,
                expected: 4,
                found: 9,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(shard.next_offset(), 2, "a rejected batch writes nothing");
}

#[test]
fn truncate_to_drops_records_across_segments_and_appends_continue() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(600, Durability::OnCommit));
    for i in 0..30 {
        shard.append(&records(i, 1, 40)).unwrap(); // 68 bytes each: 8 per segment
    }
    let before = segment_files(dir.path()).len();
    assert!(before >= 4);
    shard.truncate_to(10).unwrap();
    assert_eq!((shard.next_offset(), shard.durable_offset()), (10, 10));
    assert!(segment_files(dir.path()).len() < before);
    assert_eq!(
        read_all(&shard, 0),
        (0..10).map(|o| (o, payload(o, 40))).collect::<Vec<_>>()
    );
    shard.append(&records(100, 3, 40)).unwrap();
    let all = read_all(&shard, 0);
    assert_eq!(all.len(), 13);
    assert_eq!(
        all[10],
        (10, payload(100, 40)),
        "new records take the truncated offsets"
    );
    drop(shard);
    let reopened = open(dir.path(), config(600, Durability::OnCommit));
    assert_eq!(read_all(&reopened, 0), all);
}

#[test]
fn truncate_to_within_the_active_segment_and_at_segment_boundaries() {
    for cut in [0u64, 1, 7, 8, 9, 15, 16, 23] {
        let dir = tempfile::tempdir().unwrap();
        let shard = open(dir.path(), config(600, Durability::OnCommit));
        for i in 0..24 {
            shard.append(&records(i, 1, 40)).unwrap();
        }
        shard.truncate_to(cut).unwrap();
        assert_eq!(shard.next_offset(), cut, "cut {cut}");
        assert_eq!(read_all(&shard, 0).len() as u64, cut);
        drop(shard);
        let reopened = open(dir.path(), config(600, Durability::OnCommit));
        assert_eq!(reopened.next_offset(), cut, "cut {cut} after reopen");
        assert!(
            reopened
                .stats()
                .recovery_actions
                .iter()
                .all(|a| matches!(a, felix_recovery::Action::RebuildIndex { .. }))
        );
    }
}

#[test]
fn truncate_to_below_base_is_an_error_and_past_end_does_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let shard = Shard::options(dir.path())
        .config(config(1 << 20, Durability::OnCommit))
        .label("r")
        .initial_offset(100)
        .open()
        .unwrap();
    shard.append_replicated(&replicated(100, 5)).unwrap();
    let err = shard.truncate_to(99).unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::TruncateBelowBase {
                requested: 99,
                oldest: 100,
                ..
            }
        ),
        "{err:?}"
    );
    shard.truncate_to(105).unwrap();
    shard.truncate_to(1000).unwrap();
    assert_eq!(shard.next_offset(), 105);
}

#[test]
fn reset_to_discards_everything_and_begins_at_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(600, Durability::OnCommit));
    for i in 0..20 {
        shard.append(&records(i, 1, 40)).unwrap();
    }
    shard.begin_generation(1).unwrap();
    shard.reset_to(5000).unwrap();
    assert_eq!(
        (
            shard.base_offset(),
            shard.next_offset(),
            shard.durable_offset()
        ),
        (5000, 5000, 5000)
    );
    assert_eq!(segment_files(dir.path()).len(), 1);
    assert!(shard.generations().is_empty());
    shard.append_replicated(&replicated(5000, 2)).unwrap();
    drop(shard);
    let reopened = open(dir.path(), config(600, Durability::OnCommit));
    assert_eq!(
        (reopened.base_offset(), reopened.next_offset()),
        (5000, 5002)
    );
}

#[test]
fn generations_are_recorded_at_the_log_end_and_cut_by_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
    shard.begin_generation(1).unwrap();
    shard.append(&records(0, 5, 10)).unwrap();
    shard.begin_generation(3).unwrap();
    shard.append(&records(5, 5, 10)).unwrap();
    assert_eq!(shard.generation_at(4), Some(1));
    assert_eq!(shard.generation_at(5), Some(3));
    let answer = shard.end_offset_for(2).unwrap();
    assert_eq!((answer.generation, answer.end_offset), (1, 5));
    let err = shard.begin_generation(2).unwrap_err();
    assert!(matches!(err, StorageError::Generation { .. }), "{err:?}");

    shard.truncate_to(5).unwrap();
    assert_eq!(
        shard.generations().entries().len(),
        1,
        "generation 3 wrote nothing left"
    );
    drop(shard);
    let reopened = open(dir.path(), config(1 << 20, Durability::OnCommit));
    assert_eq!(reopened.generation_at(4), Some(1));
    assert_eq!(reopened.generations().entries().len(), 1);
}

#[test]
fn open_cuts_back_an_epochs_file_that_runs_past_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    {
        let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
        shard.begin_generation(1).unwrap();
        shard.append(&records(0, 5, 10)).unwrap();
        shard.begin_generation(2).unwrap();
        shard.append(&records(5, 5, 10)).unwrap();
    }
    // Cut the log behind the shard's back, as a crash between cutting the
    // log and rewriting the history would leave it: first to exactly where
    // generation 2 began (a leader that has not written yet: kept), then
    // below it (a generation past the log end: cut).
    let log = dir.path().join("00000000000000000000.log");
    let generations_after_cut_to = |next: u64| {
        let len = 32 + next * 38;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .unwrap()
            .set_len(len)
            .unwrap();
        let _ = std::fs::remove_file(dir.path().join("00000000000000000000.index"));
        let reopened = open(dir.path(), config(1 << 20, Durability::OnCommit));
        assert_eq!(reopened.next_offset(), next);
        reopened
            .generations()
            .entries()
            .iter()
            .map(|e| (e.generation, e.start_offset))
            .collect::<Vec<_>>()
    };
    assert_eq!(generations_after_cut_to(5), [(1, 0), (2, 5)]);
    assert_eq!(generations_after_cut_to(4), [(1, 0)]);
}
