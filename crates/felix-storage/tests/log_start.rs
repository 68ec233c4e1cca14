//! A log start inside a segment: `delete_records_before`, `move_log_start`
//! and `reset_to`
//! record it durably in the `log-start` file; reads, offsets, truncation,
//! retention and the generation history follow it; losing the file loses
//! no record.

mod common;

use std::path::Path;

use common::{config, open, read_all, records, segment_files};
use felix_format::LOG_START_FILE_NAME;
use felix_storage::{
    Durability, MovedBy, Offsets, ReadBound, Record, Retention, Shard, StorageError, StoreConfig,
};

fn small() -> StoreConfig {
    // Eight 68-byte records to a segment.
    config(600, Durability::OnCommit)
}

fn filled(dir: &Path, count: u64) -> Shard {
    let shard = open(dir, small());
    for batch in records(0, count, 40).chunks(4) {
        shard.append(batch).wait().unwrap();
    }
    shard
}

#[test]
fn delete_records_before_trims_reads_inside_a_segment_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let shard = filled(dir.path(), 20);
    assert_eq!(shard.delete_records_before(11).unwrap(), 11);
    assert_eq!(shard.offsets().base, 11);
    assert_eq!(
        shard.offsets(),
        Offsets {
            base: 11,
            readable: 20,
            written: 20,
            durable: 20
        }
    );
    for below in [0, 8, 10] {
        let err = shard
            .read(below, 1 << 20, ReadBound::Committed)
            .unwrap_err();
        assert!(
            matches!(err, StorageError::Trimmed { requested, oldest: 11, .. } if requested == below),
            "{err:?}"
        );
    }
    assert_eq!(read_all(&shard, 11).len(), 9);
    assert!(dir.path().join(LOG_START_FILE_NAME).exists());
    // Durable before the call returned: an unclean reopen keeps it too.
    drop(shard);
    std::fs::remove_file(dir.path().join(felix_format::CLEAN_SHUTDOWN_FILE_NAME)).ok();
    let shard = open(dir.path(), small());
    assert_eq!(shard.offsets().base, 11);
    assert!(matches!(
        shard.read(10, 100, ReadBound::Committed),
        Err(StorageError::Trimmed { oldest: 11, .. })
    ));
    assert_eq!(read_all(&shard, 11).len(), 9);
}

#[test]
fn delete_records_before_never_moves_backwards_and_past_the_end_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let shard = filled(dir.path(), 12);
    assert_eq!(shard.delete_records_before(9).unwrap(), 9);
    assert_eq!(shard.delete_records_before(3).unwrap(), 9);
    assert_eq!(shard.offsets().base, 9);
    let err = shard.delete_records_before(13).unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::DeletePastEnd {
                requested: 13,
                readable_end: 12,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(shard.offsets().base, 9);
    // Up to the readable end: the log is empty and the next append follows.
    assert_eq!(shard.delete_records_before(12).unwrap(), 12);
    assert_eq!(shard.read(12, 100, ReadBound::Committed).unwrap(), []);
    let receipt = shard.append(&[Record::new(1, "next")]).wait().unwrap();
    assert_eq!(receipt.first_offset, 12);
}

#[test]
fn delete_records_before_is_bounded_by_what_a_committed_read_returns() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(4096, Durability::OnCommit));
    shard.append(&[Record::new(1, "a")]).wait().unwrap();
    let readable = shard.offsets().readable;
    let err = shard.delete_records_before(readable + 1).unwrap_err();
    assert!(matches!(err, StorageError::DeletePastEnd { .. }), "{err:?}");
}

#[test]
fn truncate_to_below_the_log_start_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let shard = filled(dir.path(), 20);
    shard.delete_records_before(11).unwrap();
    let err = shard.truncate_to(10).unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::TruncateBelowBase {
                requested: 10,
                oldest: 11,
                ..
            }
        ),
        "{err:?}"
    );
    shard.truncate_to(15).unwrap();
    assert_eq!((shard.offsets().base, shard.offsets().written), (11, 15));
    // Truncating to the start itself empties the log there.
    shard.truncate_to(11).unwrap();
    assert_eq!((shard.offsets().base, shard.offsets().written), (11, 11));
    assert_eq!(
        shard
            .append(&[Record::new(1, "x")])
            .wait()
            .unwrap()
            .first_offset,
        11
    );
}

#[test]
fn retention_deletes_the_segments_wholly_below_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let shard = filled(dir.path(), 30);
    assert_eq!(segment_files(dir.path()).len(), 4);
    // Offset 17 lies in the third segment (16..24).
    shard.delete_records_before(17).unwrap();
    let outcome = shard.apply_retention().unwrap();
    assert_eq!(outcome.deleted_segments, [0, 1]);
    assert_eq!(outcome.base_offset, 17);
    assert_eq!(shard.offsets().base, 17);
    assert_eq!(segment_files(dir.path()).len(), 2);
    drop(shard);
    let shard = open(dir.path(), small());
    assert_eq!(shard.offsets().base, 17);
    assert_eq!(read_all(&shard, 17).len(), 13);
}

#[test]
fn retention_by_size_and_the_log_start_give_the_later_base() {
    let dir = tempfile::tempdir().unwrap();
    let shard = filled(dir.path(), 30);
    shard.delete_records_before(3).unwrap();
    drop(shard);
    let shard = open(
        dir.path(),
        StoreConfig {
            retention: Retention {
                max_bytes: Some(1500),
                ..Retention::default()
            },
            ..small()
        },
    );
    let outcome = shard.apply_retention().unwrap();
    assert_eq!(outcome.base_offset, 16);
    assert_eq!(shard.offsets().base, 16);
}

#[test]
fn reset_to_records_the_start_and_the_next_append_gets_it() {
    let dir = tempfile::tempdir().unwrap();
    let shard = filled(dir.path(), 20);
    shard.begin_generation(4).unwrap();
    shard.reset_to(1_000).unwrap();
    assert_eq!(
        (shard.offsets().base, shard.offsets().written),
        (1_000, 1_000)
    );
    assert!(dir.path().join(LOG_START_FILE_NAME).exists());
    assert!(shard.generations().is_empty());
    drop(shard);
    let shard = open(dir.path(), small());
    assert_eq!(
        (shard.offsets().base, shard.offsets().written),
        (1_000, 1_000)
    );
    assert_eq!(
        shard
            .append(&[Record::new(1, "x")])
            .wait()
            .unwrap()
            .first_offset,
        1_000
    );
    assert!(matches!(
        shard.read(999, 10, ReadBound::Committed),
        Err(StorageError::Trimmed { oldest: 1_000, .. })
    ));
}

#[test]
fn reset_to_cut_short_after_the_start_was_recorded_opens_as_the_new_log() {
    let dir = tempfile::tempdir().unwrap();
    let shard = filled(dir.path(), 20);
    let next_id = shard.segments().last().unwrap().extent.id + 1;
    drop(shard);
    // What a crash right after the log-start file was replaced leaves: the
    // old segments, and a start naming the fresh segment's id.
    let start = felix_format::log_start::LogStart {
        start_offset: 500,
        first_segment_id: next_id,
        moved_by: felix_format::log_start::MovedBy::Deletion,
    };
    felix_recovery::write_log_start(&felix_storage::io::FileSystem::os(), dir.path(), &start)
        .unwrap();
    std::fs::remove_file(dir.path().join(felix_format::CLEAN_SHUTDOWN_FILE_NAME)).ok();
    let shard = open(dir.path(), small());
    assert_eq!((shard.offsets().base, shard.offsets().written), (500, 500));
    assert_eq!(shard.segments().len(), 1);
    assert_eq!(shard.segments()[0].extent.id, next_id);
    assert_eq!(segment_files(dir.path()).len(), 1);
}

#[test]
fn log_start_file_lost_or_damaged_loses_no_record() {
    for damage in ["removed", "garbage", "bit flip"] {
        let dir = tempfile::tempdir().unwrap();
        let shard = filled(dir.path(), 20);
        shard.delete_records_before(11).unwrap();
        drop(shard);
        let path = dir.path().join(LOG_START_FILE_NAME);
        match damage {
            "removed" => std::fs::remove_file(&path).unwrap(),
            "garbage" => std::fs::write(&path, b"garbage").unwrap(),
            _ => {
                let mut bytes = std::fs::read(&path).unwrap();
                bytes[12] ^= 0x10;
                std::fs::write(&path, bytes).unwrap();
            }
        }
        let shard = open(dir.path(), small());
        // Records reappear; none vanish.
        assert_eq!(shard.offsets().base, 0, "{damage}");
        assert_eq!(read_all(&shard, 0).len(), 20, "{damage}");
    }
}

#[test]
fn delete_records_before_prunes_the_generation_history_below_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), small());
    for generation in 1..=5u64 {
        shard.begin_generation(generation).unwrap();
        shard.append(&records(0, 4, 10)).wait().unwrap();
    }
    // Generations 1..=5 began at 0, 4, 8, 12, 16.
    assert_eq!(shard.generations().len(), 5);
    shard.delete_records_before(9).unwrap();
    let starts: Vec<(u64, u64)> = shard
        .generations()
        .entries()
        .iter()
        .map(|e| (e.generation, e.start_offset))
        .collect();
    // 1 and 2 are wholly below the start; generation 3 covers it, and now
    // begins there.
    assert_eq!(starts, [(3, 9), (4, 12), (5, 16)]);
    assert_eq!(shard.generation_at(9), Some(3));
    drop(shard);
    let shard = open(dir.path(), small());
    assert_eq!(shard.generations().len(), 3);
}

#[test]
fn log_start_survives_a_clean_close_whose_record_does_not_hold_it() {
    let dir = tempfile::tempdir().unwrap();
    let shard = filled(dir.path(), 20);
    shard.delete_records_before(13).unwrap();
    shard.close().unwrap();
    // The clean-shutdown record lists segments only; the open that trusts
    // it reads the log-start file all the same.
    assert!(
        dir.path()
            .join(felix_format::CLEAN_SHUTDOWN_FILE_NAME)
            .exists()
    );
    let shard = open(dir.path(), small());
    assert_eq!(shard.offsets().base, 13);
    assert!(matches!(
        shard.read(12, 10, ReadBound::Committed),
        Err(StorageError::Trimmed { oldest: 13, .. })
    ));
}

#[test]
fn generation_history_full_never_fails_an_append_and_deletion_prunes_it() {
    // On a simulated disk: thousands of epochs stores cost no syncs.
    let sim = felix_io::sim::SimFs::new();
    let shard = Shard::options(Path::new("/shard"))
        .file_system(felix_storage::io::FileSystem::new(sim))
        .config(config(1 << 20, Durability::None))
        .label("history")
        .open()
        .unwrap();
    let max = felix_format::epochs::MAX_EPOCH_ENTRIES as u64;
    for generation in 1..=max + 3 {
        shard.begin_generation(generation).unwrap();
        // Generation g begins at offset g - 1.
        shard
            .append(&[Record::new(generation, "g")])
            .wait()
            .unwrap();
    }
    // Full: the oldest generations were dropped, never an append refused.
    assert_eq!(shard.generations().len(), max as usize);
    shard.delete_records_before(max).unwrap();
    // Generations max + 1..=max + 3 began at max..max + 2.
    let starts: Vec<u64> = shard
        .generations()
        .entries()
        .iter()
        .map(|e| e.start_offset)
        .collect();
    assert_eq!(starts, [max, max + 1, max + 2]);
    shard.append(&[Record::new(1, "after")]).wait().unwrap();
}

/// What the shard's log-start file records moved its start.
fn moved_by(dir: &Path) -> MovedBy {
    felix_recovery::read_log_start(&felix_storage::io::FileSystem::os(), dir)
        .start()
        .unwrap()
        .moved_by
}

#[test]
fn move_log_start_records_what_moved_it_and_a_deletion_or_reset_clears_offload() {
    let dir = tempfile::tempdir().unwrap();
    let shard = filled(dir.path(), 20);
    assert_eq!(shard.move_log_start(9, MovedBy::Offload).unwrap(), 9);
    assert_eq!(moved_by(dir.path()), MovedBy::Offload);
    // At or below the start nothing changes, the record included.
    assert_eq!(shard.delete_records_before(5).unwrap(), 9);
    assert_eq!(moved_by(dir.path()), MovedBy::Offload);
    // A deletion past it says a deletion moved it.
    assert_eq!(shard.delete_records_before(12).unwrap(), 12);
    assert_eq!(moved_by(dir.path()), MovedBy::Deletion);
    assert_eq!(shard.move_log_start(16, MovedBy::Offload).unwrap(), 16);
    drop(shard);
    let shard = open(dir.path(), small());
    assert_eq!(shard.offsets().base, 16);
    assert_eq!(moved_by(dir.path()), MovedBy::Offload);
    shard.reset_to(40).unwrap();
    assert_eq!(moved_by(dir.path()), MovedBy::Deletion);
}
