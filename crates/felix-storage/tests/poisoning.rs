//! A failed fdatasync or write stops the shard for good with the original
//! error; durable data stays readable and a reopen recovers.

mod common;

use common::{config, open, payload, read_all, records};
use felix_segment::SegmentError;
use felix_segment::fs::faults;
use felix_storage::{Durability, StorageError};

const EIO: i32 = 5;
const ENOSPC: i32 = 28;

fn original_io(err: &StorageError) -> (&'static str, i32) {
    let StorageError::Poisoned { original, .. } = err else {
        panic!("not poisoned: {err:?}")
    };
    match &**original {
        StorageError::Segment {
            source: SegmentError::Poisoned { original, .. },
            ..
        } => match &**original {
            SegmentError::Io { op, source, .. } => (op, source.raw_os_error().unwrap()),
            other => panic!("{other:?}"),
        },
        StorageError::Segment {
            source: SegmentError::Io { op, source, .. },
            ..
        } => (op, source.raw_os_error().unwrap()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn append_after_fdatasync_failure_is_refused_with_the_original_error() {
    let dir = tempfile::tempdir().unwrap();
    let tag = dir.path().to_string_lossy().into_owned();
    let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
    shard.append(&records(0, 2, 10)).unwrap();
    faults::inject("fdatasync", &tag, 0, EIO);

    let err = shard.append(&records(2, 1, 10)).unwrap_err();
    assert_eq!(original_io(&err), ("fdatasync", EIO));
    assert_eq!(
        shard.durable_offset(),
        2,
        "the failed sync made nothing durable"
    );
    assert!(shard.poisoned().is_some());

    // Never retried: later appends and syncs fail with the same original
    // error, without another fdatasync (none is injected, so a retry would
    // have succeeded).
    for later in [
        shard.append(&records(3, 1, 10)).unwrap_err(),
        shard.sync().unwrap_err(),
    ] {
        assert_eq!(original_io(&later), ("fdatasync", EIO));
    }
    assert_eq!(shard.durable_offset(), 2);
    // Durable data is still readable.
    assert_eq!(
        shard.read(0, 1 << 20).unwrap().len(),
        3,
        "records 0..2 and the written-but-unsynced 2"
    );
    faults::clear(&tag);
    drop(shard);

    let reopened = open(dir.path(), config(1 << 20, Durability::OnCommit));
    let all = read_all(&reopened, 0);
    assert!(all.len() >= 2, "acknowledged records survive");
    assert_eq!(all[..2], [(0, payload(0, 10)), (1, payload(1, 10))]);
    reopened.append(&records(all.len() as u64, 1, 10)).unwrap();
}

#[test]
fn append_after_write_failure_is_refused_and_nothing_partial_is_readable() {
    let dir = tempfile::tempdir().unwrap();
    let tag = dir.path().to_string_lossy().into_owned();
    let shard = open(dir.path(), config(1 << 20, Durability::OnCommit));
    shard.append(&records(0, 1, 10)).unwrap();
    faults::inject("write", &tag, 0, ENOSPC);
    let err = shard.append(&records(1, 5, 10)).unwrap_err();
    assert_eq!(original_io(&err), ("write", ENOSPC));
    assert_eq!(err.io_kind(), Some(std::io::ErrorKind::StorageFull));
    assert_eq!(shard.next_offset(), 1);
    assert_eq!(read_all(&shard, 0), [(0, payload(0, 10))]);
    faults::clear(&tag);
}

#[test]
fn roll_with_failing_seal_poisons_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    let tag = dir.path().to_string_lossy().into_owned();
    let shard = open(dir.path(), config(200, Durability::None));
    shard.append(&records(0, 1, 100)).unwrap();
    faults::inject("fsync", &tag, 0, EIO);
    let err = shard.append(&records(1, 1, 100)).unwrap_err();
    assert!(matches!(err, StorageError::Poisoned { .. }), "{err:?}");
    assert!(matches!(
        shard.append(&records(1, 1, 100)),
        Err(StorageError::Poisoned { .. })
    ));
    faults::clear(&tag);
    drop(shard);
    let reopened = open(dir.path(), config(200, Durability::None));
    assert_eq!(read_all(&reopened, 0), [(0, payload(0, 100))]);
}
