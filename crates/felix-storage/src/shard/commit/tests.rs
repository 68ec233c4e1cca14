#![cfg(not(loom))]

use super::*;
use crate::pool::SyncPool;
use felix_io::FileSystem;
use felix_segment::{SegmentConfig, SegmentWriter};
use job::Next;

fn writer(dir: &std::path::Path) -> SegmentWriter {
    SegmentWriter::create(
        &FileSystem::os(),
        dir,
        0,
        0,
        SegmentConfig::default(),
        "t".into(),
    )
    .unwrap()
}

/// A shard's commit on `writer`'s segment: on-commit, a pool of one.
fn commit_on(writer: &SegmentWriter) -> std::sync::Arc<Commit> {
    Commit::new(
        "t".into(),
        crate::Durability::OnCommit,
        0,
        writer.sync_handle(),
        SyncPool::new("t".into(), 1),
        16,
        Default::default(),
    )
}

/// A sync that was in flight when the log was cut must not mark the
/// offsets written after the cut as durable: its `fdatasync` covered
/// what the file held before.
#[test]
fn finish_sync_begun_before_a_cut_does_not_advance_durable() {
    let dir = tempfile::tempdir().unwrap();
    let writer = writer(dir.path());
    let commit = commit_on(&writer);
    commit.set_written(10);
    let (upto, epoch, _) = commit.begin_sync(&mut commit.lock());
    assert_eq!(upto, 10);
    commit.reset_log(5, None, writer.sync_handle());
    let (_, again, outcome) =
        commit.finish_sync(upto, epoch, Ok(()), std::time::Duration::ZERO, false);
    assert!(outcome.is_ok() && again == Next::Idle);
    let state = commit.lock();
    assert_eq!(
        (state.durable, commit.written(), state.syncing()),
        (0, 5, false)
    );
    drop(state);

    // A sync begun after the cut counts.
    let (upto, epoch, _) = commit.begin_sync(&mut commit.lock());
    let _ = commit.finish_sync(upto, epoch, Ok(()), std::time::Duration::ZERO, false);
    assert_eq!(commit.lock().durable, 5);
}

/// A sync that succeeds after another failure stopped the shard does not
/// move the durable offset: its waiters were told of the failure, so the
/// records it covered were never acknowledged and must not be served.
#[test]
fn finish_sync_after_a_poison_leaves_durable_frozen() {
    let dir = tempfile::tempdir().unwrap();
    let writer = writer(dir.path());
    let commit = commit_on(&writer);
    commit.set_written(4);
    let (upto, epoch, _) = commit.begin_sync(&mut commit.lock());
    let err = commit.poison_with(StorageError::EmptyBatch { shard: "t".into() });
    assert!(matches!(err, StorageError::EmptyBatch { .. }), "{err:?}");
    let (_, _, outcome) = commit.finish_sync(upto, epoch, Ok(()), std::time::Duration::ZERO, false);
    assert!(outcome.is_ok());
    assert_eq!((commit.lock().durable, commit.durable()), (0, 0));
    commit.advance_durable(4);
    assert_eq!(commit.durable(), 0);
}

/// A failed write of queued batches gives their offsets back (`assigned`
/// moves down to what was written) without writing them. Once the shard
/// is closed or poisoned, an append of those offsets is told of it, not
/// acknowledged by a sync that covered only the records before them; an
/// append the sync did cover is acknowledged.
#[test]
fn a_stopped_shard_acknowledges_only_appends_a_sync_covered() {
    let dir = tempfile::tempdir().unwrap();
    let writer = writer(dir.path());
    let new_commit = || {
        let commit = commit_on(&writer);
        commit.set_written(4);
        let (upto, epoch, _) = commit.begin_sync(&mut commit.lock());
        let _ = commit.finish_sync(upto, epoch, Ok(()), std::time::Duration::ZERO, false);
        // Records 4..8 were queued (assigned), then their write failed and
        // gave them back.
        commit.set_assigned(8);
        commit.set_assigned(4);
        commit
    };
    let wait = |commit: &Commit, offset| commit.wait_durable_with(offset, true, &|| Ok(()));

    let closed = new_commit();
    closed.close();
    assert!(matches!(
        wait(&closed, 8),
        Err(StorageError::ShardClosed { .. })
    ));
    assert!(matches!(wait(&closed, 4), Ok(())));

    let poisoned = new_commit();
    poisoned.poison_with(StorageError::EmptyBatch { shard: "t".into() });
    assert!(matches!(
        wait(&poisoned, 8),
        Err(StorageError::EmptyBatch { .. })
    ));
    assert!(matches!(wait(&poisoned, 4), Ok(())));
}
