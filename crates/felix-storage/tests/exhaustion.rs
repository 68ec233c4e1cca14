//! The ends of the id and offset spaces: a shard whose active segment is
//! `u64::MAX` refuses the roll past it (a wrapped id would name segment 0,
//! and the shard would no longer open), and an append that would give a
//! record an offset past `u64::MAX - 1` is refused; either way nothing is
//! written, and the shard stays consistent and reopens.

use std::path::Path;

use felix_segment::{SegmentConfig, SegmentWriter};
use felix_storage::{
    Durability, Preallocation, ReadBound, Record, ReplicatedRecord, Shard, StorageError,
    StoreConfig,
};

fn config(durability: Durability) -> StoreConfig {
    StoreConfig {
        durability,
        segment_size_bytes: 1024,
        index_spacing_bytes: 128,
        preallocate: Preallocation::Off,
        ..StoreConfig::default()
    }
}

fn record(offset: u64) -> Record {
    Record::new(offset, format!("record-{offset:020}-{}", "z".repeat(30)))
}

/// A shard directory whose only segment has id `u64::MAX` and begins at
/// offset 7.
fn last_id_shard(dir: &Path) {
    let config = SegmentConfig::default();
    let mut writer = SegmentWriter::create(
        &felix_io::FileSystem::os(),
        dir,
        u64::MAX,
        7,
        config,
        "last".into(),
    )
    .unwrap();
    writer.append(&[record(7)]).unwrap();
    writer.sync().unwrap();
}

fn segment_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
}

/// Appends one record at a time until an append fails; returns the error.
fn fill(shard: &Shard) -> StorageError {
    loop {
        let next = shard.offsets().written;
        if let Err(err) = shard.append(&[record(next)]).wait() {
            return err;
        }
        assert!(next < 1000, "never refused");
    }
}

fn check_reopens(dir: &Path, next: u64) {
    let shard = Shard::options(dir)
        .config(config(Durability::OnCommit))
        .label("last")
        .open()
        .unwrap();
    assert!(shard.stats().recovery_actions.is_empty());
    assert_eq!(shard.offsets().written, next);
    let mut offset = shard.offsets().base;
    while offset < next {
        for r in shard.read(offset, 1 << 20, ReadBound::Committed).unwrap() {
            assert_eq!(r.payload, record(offset).payload);
            offset += 1;
        }
    }
}

#[test]
fn append_needing_a_segment_after_id_u64_max_is_refused_and_the_shard_reopens() {
    let dir = tempfile::tempdir().unwrap();
    last_id_shard(dir.path());
    let shard = Shard::options(dir.path())
        .config(config(Durability::None))
        .label("last")
        .open()
        .unwrap();
    let err = fill(&shard);
    assert!(
        matches!(&err, StorageError::SegmentIdsExhausted { last_id, .. } if *last_id == u64::MAX),
        "{err:?}"
    );
    assert!(shard.poisoned().is_none(), "refused, not failed");
    let next = shard.offsets().written;
    assert!(next > 8);
    // Nothing of the refused append was written, and no segment wrapped.
    assert_eq!(segment_names(dir.path()), ["18446744073709551615.log"]);
    assert_eq!(shard.read(next, 1 << 20, ReadBound::Committed).unwrap(), []);
    shard.sync().unwrap();
    drop(shard);
    check_reopens(dir.path(), next);
}

#[test]
fn on_commit_append_needing_a_segment_after_id_u64_max_stops_the_shard_and_it_reopens() {
    let dir = tempfile::tempdir().unwrap();
    last_id_shard(dir.path());
    let shard = Shard::options(dir.path())
        .config(config(Durability::OnCommit))
        .label("last")
        .open()
        .unwrap();
    let err = fill(&shard);
    // Offsets are assigned before a combined write: the refused roll stops
    // the shard. The append that met it gets the typed reason itself; every
    // later call is refused as poisoned, naming it.
    assert!(
        matches!(&err, StorageError::SegmentIdsExhausted { last_id, .. } if *last_id == u64::MAX),
        "{err:?}"
    );
    match &shard
        .append(&[record(shard.offsets().written)])
        .wait()
        .unwrap_err()
    {
        StorageError::Poisoned { original, .. } => assert!(
            matches!(&**original, StorageError::SegmentIdsExhausted { last_id, .. } if *last_id == u64::MAX),
            "{original:?}"
        ),
        other => panic!("{other:?}"),
    }
    let durable = shard.offsets().durable;
    drop(shard);
    assert_eq!(segment_names(dir.path()), ["18446744073709551615.log"]);
    check_reopens(dir.path(), durable);
}

#[test]
fn append_past_the_last_offset_is_refused_with_nothing_written() {
    for durability in [Durability::None, Durability::OnCommit] {
        let dir = tempfile::tempdir().unwrap();
        let start = u64::MAX - 4;
        let shard = Shard::options(dir.path())
            .config(config(durability))
            .label("end")
            .initial_offset(start)
            .open()
            .unwrap();
        shard
            .append(&[record(start), record(start + 1)])
            .wait()
            .unwrap();
        let err = shard
            .append(&[record(start + 2), record(start + 3), record(start + 4)])
            .wait()
            .unwrap_err();
        assert!(
            matches!(
                err,
                StorageError::OffsetSpaceExhausted { next_offset, records: 3, .. }
                    if next_offset == u64::MAX - 2
            ),
            "{durability:?}: {err:?}"
        );
        // The last two offsets a record can have still go.
        let receipt = shard
            .append(&[record(start + 2), record(start + 3)])
            .wait()
            .unwrap();
        assert_eq!(receipt.last_offset, u64::MAX - 1);
        assert_eq!(shard.offsets().written, u64::MAX);
        assert!(matches!(
            shard.append(&[record(0)]).wait(),
            Err(StorageError::OffsetSpaceExhausted {
                next_offset: u64::MAX,
                records: 1,
                ..
            })
        ));
        assert!(shard.poisoned().is_none());
        shard.sync().unwrap();
        drop(shard);
        check_reopens(dir.path(), u64::MAX);
    }
}

#[test]
fn append_replicated_past_the_last_offset_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let start = u64::MAX - 1;
    let shard = Shard::options(dir.path())
        .config(config(Durability::None))
        .label("end")
        .initial_offset(start)
        .open()
        .unwrap();
    let replicated = |offset: u64| ReplicatedRecord {
        offset,
        generation: None,
        timestamp_micros: 1,
        payload: "r".into(),
    };
    let err = shard
        .append_replicated(&[replicated(start), replicated(u64::MAX)])
        .unwrap_err();
    assert!(
        matches!(err, StorageError::OffsetSpaceExhausted { next_offset, records: 2, .. } if next_offset == start),
        "{err:?}"
    );
    shard.append_replicated(&[replicated(start)]).unwrap();
    assert_eq!(shard.offsets().written, u64::MAX);
}
