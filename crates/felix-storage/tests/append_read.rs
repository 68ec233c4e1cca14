//! Appends, reads, rollover and reopen of one shard.

mod common;

use bytes::Bytes;
use common::{config, open, payload, read_all, records, segment_files};
use felix_format::MAX_PAYLOAD_BYTES;
use felix_storage::{Durability, ReadBound, Record, StorageError, StoreConfig};

#[test]
fn append_assigns_contiguous_offsets_and_reads_return_them() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
    let a = shard.append(&records(0, 3, 10)).wait().unwrap();
    let b = shard.append(&records(3, 2, 10)).wait().unwrap();
    assert_eq!(
        (a.first_offset, a.last_offset, b.first_offset, b.last_offset),
        (0, 2, 3, 4)
    );
    assert_eq!(
        (
            shard.offsets().base,
            shard.offsets().written,
            shard.offsets().durable
        ),
        (0, 5, 5)
    );
    let all = read_all(&shard, 0);
    assert_eq!(all, (0..5).map(|o| (o, payload(o, 10))).collect::<Vec<_>>());
    assert_eq!(shard.read(5, 100, ReadBound::Committed).unwrap(), []);
    assert_eq!(shard.read(500, 100, ReadBound::Committed).unwrap(), []);
}

#[test]
fn append_empty_batch_and_oversized_payload_are_rejected_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
    assert!(matches!(
        shard.append(&[]).wait(),
        Err(StorageError::EmptyBatch { .. })
    ));
    let huge = Bytes::from(vec![0u8; MAX_PAYLOAD_BYTES as usize + 1]);
    let err = shard
        .append(&[
            Record::new(1, "fine"),
            Record {
                timestamp_micros: 1,
                payload: huge,
            },
        ])
        .wait()
        .unwrap_err();
    assert!(
        matches!(err, StorageError::PayloadTooLarge { index_in_batch: 1, len, max: MAX_PAYLOAD_BYTES, .. } if len == MAX_PAYLOAD_BYTES as usize + 1),
        "{err:?}"
    );
    assert_eq!(shard.offsets().written, 0);
    assert!(
        shard.poisoned().is_none(),
        "a rejected batch is not a failure"
    );
    let len = std::fs::metadata(dir.path().join("00000000000000000000.log"))
        .unwrap()
        .len();
    assert_eq!(len, 32);
}

#[test]
fn read_budget_returns_whole_records_and_at_least_one() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(1 << 20, Durability::None));
    shard.append(&records(0, 10, 72)).wait().unwrap(); // 100 bytes each on disk
    let offsets =
        |v: Vec<felix_storage::ReadRecord>| v.iter().map(|r| r.offset).collect::<Vec<_>>();
    assert_eq!(
        offsets(shard.read(0, 0, ReadBound::Committed).unwrap()),
        [0]
    );
    assert_eq!(
        offsets(shard.read(0, 250, ReadBound::Committed).unwrap()),
        [0, 1]
    );
    assert_eq!(
        offsets(shard.read(7, 1 << 20, ReadBound::Committed).unwrap()),
        [7, 8, 9]
    );
}

#[test]
fn rollover_starts_a_new_segment_without_splitting_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    // Each record is 128 bytes on disk; a segment holds the header + 7 records
    // under a 1000-byte limit.
    let shard = open(dir.path(), config(1000, Durability::OnCommit));
    for i in 0..10 {
        shard.append(&records(i * 3, 3, 100)).wait().unwrap();
    }
    // 3-record batches: two fit (32 + 768 = 800), a third would pass 1000.
    let files = segment_files(dir.path());
    assert_eq!(files.len(), 5, "{files:?}");
    assert_eq!(shard.segments().len(), 5);
    assert_eq!(shard.stats().rolls, 4);
    for name in &files[..4] {
        let len = std::fs::metadata(dir.path().join(name)).unwrap().len();
        assert_eq!(len, 32 + 6 * 128, "{name} holds two whole batches");
    }
    assert_eq!(read_all(&shard, 0).len(), 30);
    assert_eq!(read_all(&shard, 13)[0], (13, payload(13, 100)));
}

#[test]
fn rollover_gives_an_oversized_record_its_own_segment() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(1000, Durability::OnCommit));
    shard.append(&records(0, 1, 10)).wait().unwrap();
    shard.append(&records(1, 1, 5000)).wait().unwrap();
    shard.append(&records(2, 1, 10)).wait().unwrap();
    let files = segment_files(dir.path());
    assert_eq!(files.len(), 3);
    let len = std::fs::metadata(dir.path().join(&files[1])).unwrap().len();
    assert_eq!(len, 32 + 28 + 5000);
    assert_eq!(
        read_all(&shard, 0)
            .iter()
            .map(|r| r.1.len())
            .collect::<Vec<_>>(),
        [10, 5000, 10]
    );
}

#[test]
fn reopen_keeps_every_record_and_continues_offsets() {
    let dir = tempfile::tempdir().unwrap();
    {
        let shard = open(dir.path(), config(700, Durability::OnCommit));
        for i in 0..20 {
            shard.append(&records(i, 1, 50)).wait().unwrap();
        }
    }
    let shard = open(dir.path(), config(700, Durability::OnCommit));
    assert_eq!(
        (
            shard.offsets().base,
            shard.offsets().written,
            shard.offsets().durable
        ),
        (0, 20, 20)
    );
    shard.append(&records(20, 2, 50)).wait().unwrap();
    let all = read_all(&shard, 0);
    assert_eq!(
        all,
        (0..22).map(|o| (o, payload(o, 50))).collect::<Vec<_>>()
    );
    assert!(shard.stats().recovery_actions.is_empty());
}

#[test]
fn open_same_shard_twice_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let _first = open(dir.path(), config(1 << 20, Durability::None));
    let err = felix_storage::Shard::options(dir.path())
        .config(config(1 << 20, Durability::None))
        .label("again")
        .open()
        .unwrap_err();
    assert!(
        matches!(&err, StorageError::ShardLocked { dir: locked } if locked == dir.path()),
        "{err:?}"
    );
}

#[test]
fn durability_none_advances_durable_offset_only_on_sync() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(1 << 20, Durability::None));
    shard.append(&records(0, 4, 10)).wait().unwrap();
    assert_eq!(shard.offsets().durable, 0);
    shard.sync().unwrap();
    assert_eq!(shard.offsets().durable, 4);
    assert_eq!(shard.stats().syncs, 1);
}

#[test]
fn durability_none_writes_back_in_the_background_every_writeback_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(
        dir.path(),
        StoreConfig {
            writeback_bytes: Some(4096),
            ..config(1 << 20, Durability::None)
        },
    );
    // 20 records of 228 bytes: 4,560 bytes, past the threshold once.
    shard.append(&records(0, 20, 200)).wait().unwrap();
    // Nobody waits, yet the flusher syncs what was written.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while shard.offsets().durable < 20 {
        assert!(std::time::Instant::now() < deadline, "never written back");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(shard.stats().syncs, 1);
    // Below the threshold again: nothing is asked for.
    shard.append(&records(20, 1, 40)).wait().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(shard.offsets().durable, 20);
    assert_eq!(shard.stats().syncs, 1);
}

#[test]
fn append_written_then_wait_durable_splits_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
    let receipt = shard.append(&records(0, 2, 10)).written().unwrap();
    assert_eq!(shard.offsets().durable, 0);
    shard.wait_durable(receipt.last_offset + 1).wait().unwrap();
    assert_eq!(shard.offsets().durable, 2);
}
