//! Replica support: appends at the leader's offsets, truncation, reset,
//! generations, and logs that begin anywhere.

mod common;

use bytes::Bytes;
use common::{config, open, payload, read_all, records, segment_files};
use felix_storage::epochs::{Divergence, HistoryError, LeaderAnswer};
use felix_storage::{Durability, ReadBound, ReplicatedRecord, Shard, StorageError};

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
    assert_eq!((shard.offsets().base, shard.offsets().written), (511, 511));
    shard.append_replicated(&replicated(511, 3)).unwrap();
    let err = shard.read(0, 100, ReadBound::Committed).unwrap_err();
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
    assert_eq!(
        (reopened.offsets().base, reopened.offsets().written),
        (511, 514)
    );
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
    assert_eq!(
        shard.offsets().written,
        2,
        "a rejected batch writes nothing"
    );
}

#[test]
fn truncate_to_drops_records_across_segments_and_appends_continue() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(600, Durability::OnCommit));
    for i in 0..30 {
        shard.append(&records(i, 1, 40)).wait().unwrap(); // 68 bytes each: 8 per segment
    }
    let before = segment_files(dir.path()).len();
    assert!(before >= 4);
    shard.truncate_to(10).unwrap();
    assert_eq!((shard.offsets().written, shard.offsets().durable), (10, 10));
    assert!(segment_files(dir.path()).len() < before);
    assert_eq!(
        read_all(&shard, 0),
        (0..10).map(|o| (o, payload(o, 40))).collect::<Vec<_>>()
    );
    shard.append(&records(100, 3, 40)).wait().unwrap();
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
            shard.append(&records(i, 1, 40)).wait().unwrap();
        }
        shard.truncate_to(cut).unwrap();
        assert_eq!(shard.offsets().written, cut, "cut {cut}");
        assert_eq!(read_all(&shard, 0).len() as u64, cut);
        drop(shard);
        let reopened = open(dir.path(), config(600, Durability::OnCommit));
        assert_eq!(reopened.offsets().written, cut, "cut {cut} after reopen");
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
    assert_eq!(shard.offsets().written, 105);
}

#[test]
fn reset_to_discards_everything_and_begins_at_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(600, Durability::OnCommit));
    for i in 0..20 {
        shard.append(&records(i, 1, 40)).wait().unwrap();
    }
    shard.begin_generation(1).unwrap();
    shard.reset_to(5000).unwrap();
    assert_eq!(
        (
            shard.offsets().base,
            shard.offsets().written,
            shard.offsets().durable
        ),
        (5000, 5000, 5000)
    );
    assert_eq!(segment_files(dir.path()).len(), 1);
    assert!(shard.generations().is_empty());
    shard.append_replicated(&replicated(5000, 2)).unwrap();
    drop(shard);
    let reopened = open(dir.path(), config(600, Durability::OnCommit));
    assert_eq!(
        (reopened.offsets().base, reopened.offsets().written),
        (5000, 5002)
    );
}

#[test]
fn generations_are_recorded_at_the_log_end_and_cut_by_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
    shard.begin_generation(1).unwrap();
    shard.append(&records(0, 5, 10)).wait().unwrap();
    shard.begin_generation(3).unwrap();
    shard.append(&records(5, 5, 10)).wait().unwrap();
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
        shard.append(&records(0, 5, 10)).wait().unwrap();
        shard.begin_generation(2).unwrap();
        shard.append(&records(5, 5, 10)).wait().unwrap();
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
        assert_eq!(reopened.offsets().written, next);
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

/// The generation history as `(generation, start_offset)` pairs.
fn history(shard: &Shard) -> Vec<(u64, u64)> {
    shard
        .generations()
        .entries()
        .iter()
        .map(|e| (e.generation, e.start_offset))
        .collect()
}

/// Issue row 10: `ReplicatedRecord` had no generation, so a follower had to
/// call `begin_generation` at each boundary itself, and forgetting left
/// `end_offset_for` answering `None`. Records now carry the leader's
/// generation and the follower records each boundary as it appends.
#[test]
fn append_replicated_records_the_leaders_generation_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let leader = open(
        &dir.path().join("leader"),
        config(600, Durability::OnCommit),
    );
    let follower = open(
        &dir.path().join("follower"),
        config(600, Durability::OnCommit),
    );
    leader.begin_generation(1).unwrap();
    leader.append(&records(0, 4, 30)).wait().unwrap();
    leader.begin_generation(4).unwrap();
    leader.append(&records(4, 3, 30)).wait().unwrap();
    leader.begin_generation(6).unwrap();
    leader.append(&records(7, 2, 30)).wait().unwrap();

    // Fetched in small pieces, so boundaries fall inside and between batches.
    let mut next = 0;
    while next < leader.offsets().written {
        let batch = leader
            .read_replicated(next, 100, ReadBound::Written)
            .unwrap();
        next = batch.last().unwrap().offset + 1;
        follower.append_replicated(&batch).unwrap();
    }
    assert_eq!(history(&follower), [(1, 0), (4, 4), (6, 7)]);
    assert_eq!(history(&follower), history(&leader));
    for generation in 0..8 {
        assert_eq!(
            follower.end_offset_for(generation),
            leader.end_offset_for(generation),
            "generation {generation}"
        );
    }
    assert_eq!(
        read_all(&follower, 0),
        read_all(&leader, 0),
        "the same records"
    );
    drop(follower);
    let reopened = open(
        &dir.path().join("follower"),
        config(600, Durability::OnCommit),
    );
    assert_eq!(history(&reopened), [(1, 0), (4, 4), (6, 7)]);
}

#[test]
fn append_replicated_refuses_a_generation_going_backwards_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
    let with_generations = |from: u64, generations: &[u64]| -> Vec<ReplicatedRecord> {
        generations
            .iter()
            .enumerate()
            .map(|(i, g)| ReplicatedRecord {
                offset: from + i as u64,
                generation: Some(*g),
                timestamp_micros: 1,
                payload: Bytes::from(payload(from + i as u64, 10)),
            })
            .collect()
    };
    shard
        .append_replicated(&with_generations(0, &[2, 2, 3]))
        .unwrap();
    for (batch, last, requested) in [(vec![3, 1], 3, 1), (vec![4, 5, 4], 5, 4)] {
        let err = shard
            .append_replicated(&with_generations(3, &batch))
            .unwrap_err();
        assert!(
            matches!(
                err,
                StorageError::Generation {
                    refusal: HistoryError::GenerationWentBackwards { last: l, requested: r },
                    ..
                } if l == last && r == requested
            ),
            "{batch:?}: {err:?}"
        );
        assert_eq!(shard.offsets().written, 3, "{batch:?}: nothing written");
        assert_eq!(history(&shard), [(2, 0), (3, 2)]);
    }
}

#[test]
fn read_record_into_replicated_is_one_call() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
    shard.begin_generation(7).unwrap();
    shard.append(&records(0, 1, 10)).wait().unwrap();
    let read = shard.read(0, 100, ReadBound::Committed).unwrap().remove(0);
    let generation = shard.generation_at(read.offset);
    assert_eq!(
        read.clone().into_replicated(generation),
        ReplicatedRecord {
            offset: 0,
            generation: Some(7),
            timestamp_micros: 0,
            payload: read.payload,
        }
    );
    assert_eq!(
        shard.read_replicated(0, 100, ReadBound::Committed).unwrap()[0].generation,
        Some(7)
    );
}

/// The KIP-279 exchange, one call per step on the follower, under its writer
/// lock. The follower copied offset 0 (generation 0), then led generation 2
/// and wrote offsets the leader never saw; the leader led generation 1 from
/// offset 1 and generation 3 from offset 3. Asked about generation 2, the
/// leader answers about 1, which the follower never had: truncate where its
/// generation 0 ended and ask again, about 0.
#[test]
fn reconcile_truncates_to_the_divergence_point_and_cuts_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let leader = open(
        &dir.path().join("leader"),
        config(200, Durability::OnCommit),
    );
    let follower = open(
        &dir.path().join("follower"),
        config(200, Durability::OnCommit),
    );
    leader.begin_generation(0).unwrap();
    leader.append(&records(0, 1, 30)).wait().unwrap();
    follower
        .append_replicated(
            &leader
                .read_replicated(0, u64::MAX, ReadBound::Written)
                .unwrap(),
        )
        .unwrap();
    follower.begin_generation(2).unwrap();
    for offset in 1..9 {
        follower.append(&records(offset, 1, 30)).wait().unwrap();
    }
    leader.begin_generation(1).unwrap();
    leader.append(&records(1, 2, 30)).wait().unwrap();
    leader.begin_generation(3).unwrap();
    leader.append(&records(3, 4, 30)).wait().unwrap();
    assert!(follower.segments().len() > 2, "the cut crosses segments");

    let mut steps = Vec::new();
    loop {
        let latest = follower.generations().latest().unwrap().generation;
        let answer = leader.end_offset_for(latest).unwrap();
        let step = follower.reconcile(answer).unwrap();
        steps.push(step);
        if !matches!(step, Divergence::AskAgain { .. }) {
            break;
        }
    }
    assert_eq!(
        steps,
        [
            Divergence::AskAgain { truncate_to: 1 },
            Divergence::Resolved { truncate_to: 1 }
        ]
    );
    assert_eq!(follower.offsets().written, 1);
    assert_eq!(history(&follower), [(0, 0)]);
    follower
        .append_replicated(
            &leader
                .read_replicated(1, u64::MAX, ReadBound::Written)
                .unwrap(),
        )
        .unwrap();
    assert_eq!(read_all(&follower, 0), read_all(&leader, 0));
    assert_eq!(history(&follower), history(&leader));
}

/// A divergence below the follower's first offset cannot be truncated to:
/// nothing changes, and the error says where the log begins. One below the
/// follower's history removes everything the history covers.
#[test]
fn reconcile_below_the_base_offset_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let follower = Shard::options(dir.path())
        .config(config(1 << 20, Durability::OnCommit))
        .initial_offset(100)
        .open()
        .unwrap();
    follower.begin_generation(5).unwrap();
    follower.append_replicated(&replicated(100, 3)).unwrap();
    let err = follower
        .reconcile(LeaderAnswer {
            generation: 5,
            end_offset: 50,
        })
        .unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::TruncateBelowBase {
                requested: 50,
                oldest: 100,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(follower.offsets().written, 103);
    assert_eq!(history(&follower), [(5, 100)]);

    // The leader only ever had generation 2: everything from where the
    // follower's history begins is not the leader's.
    let step = follower
        .reconcile(LeaderAnswer {
            generation: 2,
            end_offset: 50,
        })
        .unwrap();
    assert_eq!(step, Divergence::BeforeHistory { truncate_to: 100 });
    assert_eq!(follower.offsets().written, 100);
    assert_eq!(history(&follower), []);
}
