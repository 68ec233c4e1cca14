//! A failed fdatasync or write stops the shard for good with the original
//! error; durable data stays readable and a reopen recovers. Faults are
//! injected through the simulated file system.

mod common;

use std::path::Path;

use common::{config, payload, records};
use felix_io::FileSystem;
use felix_io::sim::{CrashPlan, Fault, FaultEffect, FaultOp, SimFs};
use felix_segment::SegmentError;
use felix_storage::{Durability, Shard, StorageError, StoreConfig};

const EIO: i32 = 5;
const ENOSPC: i32 = 28;
const DIR: &str = "/shard";

fn open(fs: &SimFs, config: StoreConfig) -> Shard {
    Shard::options(Path::new(DIR))
        .file_system(FileSystem::new(fs.clone()))
        .config(config)
        .label("sim")
        .open()
        .unwrap()
}

/// The `(op, errno)` of the failure the call that met it got as its own
/// error: never `Poisoned`, which names an earlier failure.
fn own_io(err: &StorageError) -> (&'static str, i32) {
    assert!(
        !matches!(err, StorageError::Poisoned { .. }),
        "the failing call got `Poisoned`: {err}"
    );
    io_of(err)
}

/// The `(op, errno)` of the failure that poisoned the shard, which a later
/// call reports as `Poisoned`.
fn original_io(err: &StorageError) -> (&'static str, i32) {
    let StorageError::Poisoned { original, .. } = err else {
        panic!("not poisoned: {err:?}")
    };
    io_of(original)
}

fn io_of(err: &StorageError) -> (&'static str, i32) {
    let mut source = match err {
        StorageError::Segment { source, .. } => source,
        other => panic!("{other:?}"),
    };
    while let SegmentError::Poisoned { original, .. } = source {
        source = original;
    }
    match source {
        SegmentError::Io(err) => (err.op(), err.raw_os_error().unwrap()),
        other => panic!("{other:?}"),
    }
}

fn sync_fault(effect: FaultEffect) -> Fault {
    Fault {
        op: FaultOp::SyncFile,
        path_contains: ".log".into(),
        skip: 0,
        effect,
    }
}

#[test]
fn append_after_fdatasync_failure_is_refused_with_the_original_error_and_never_retried() {
    for effect in [
        FaultEffect::SyncFailKeep(EIO),
        FaultEffect::SyncFailDrop(EIO),
    ] {
        let sim = SimFs::new();
        let shard = open(&sim, config(1 << 20, Durability::OnCommit));
        shard.append(&records(0, 2, 10)).wait().unwrap();
        sim.inject(sync_fault(effect));
        let log_before = sim.log().len();

        let err = shard.append(&records(2, 1, 10)).wait().unwrap_err();
        assert_eq!(own_io(&err), ("fdatasync", EIO), "{effect:?}");
        assert_eq!(
            shard.offsets().durable,
            2,
            "the failed sync made nothing durable"
        );
        for later in [
            shard.append(&records(3, 1, 10)).wait().unwrap_err(),
            shard.sync().unwrap_err(),
        ] {
            assert_eq!(original_io(&later), ("fdatasync", EIO));
        }
        // No write and no second sync of the segment follow the failure.
        let after: Vec<_> = sim.log()[log_before..]
            .iter()
            .map(|e| (e.op, e.ok))
            .collect();
        assert_eq!(after, [("write", true), ("sync_data", false)], "{effect:?}");
        assert_eq!(shard.offsets().durable, 2);
        drop(shard);

        // Whatever the disk kept, reopening loses nothing acknowledged.
        for plan in [
            CrashPlan::durable_only(),
            CrashPlan::everything(sim.pending().len()),
        ] {
            let crashed = sim.crash(&plan);
            let reopened = open(&crashed, config(1 << 20, Durability::OnCommit));
            let all = common::read_all(&reopened, reopened.offsets().base);
            assert!(all.len() >= 2, "{effect:?} {plan:?}");
            assert_eq!(all[..2], [(0, payload(0, 10)), (1, payload(1, 10))]);
            reopened
                .append(&records(all.len() as u64, 1, 10))
                .wait()
                .unwrap();
        }
    }
}

#[test]
fn append_after_write_failure_is_refused_and_nothing_partial_is_readable() {
    let sim = SimFs::new();
    let shard = open(&sim, config(1 << 20, Durability::OnCommit));
    shard.append(&records(0, 1, 10)).wait().unwrap();
    sim.inject(Fault {
        op: FaultOp::Write,
        path_contains: ".log".into(),
        skip: 0,
        effect: FaultEffect::ShortWrite {
            written: 40,
            errno: ENOSPC,
        },
    });
    let err = shard.append(&records(1, 5, 10)).wait().unwrap_err();
    assert_eq!(own_io(&err), ("write", ENOSPC));
    assert_eq!(err.io_kind(), Some(std::io::ErrorKind::StorageFull));
    assert_eq!(shard.offsets().written, 1);
    assert_eq!(
        common::read_all(&shard, shard.offsets().base),
        [(0, payload(0, 10))]
    );
    drop(shard);
    // The 40 bytes that reached the file hold record 1 whole (38 bytes) and
    // two bytes of record 2. Record 1 was appended, just never acknowledged,
    // so it may survive; the torn record 2 is repaired away on open.
    let reopened = open(
        &sim.crash(&CrashPlan::everything(sim.pending().len())),
        config(1 << 20, Durability::OnCommit),
    );
    assert_eq!(
        common::read_all(&reopened, reopened.offsets().base),
        [(0, payload(0, 10)), (1, payload(1, 10))]
    );
    assert!(matches!(
        reopened.stats().recovery_actions.as_slice(),
        [felix_recovery::Action::Truncate { .. }, ..]
    ));
}

#[test]
fn roll_with_failing_seal_poisons_the_shard() {
    let sim = SimFs::new();
    let shard = open(&sim, config(200, Durability::None));
    shard.append(&records(0, 1, 100)).wait().unwrap();
    sim.inject(sync_fault(FaultEffect::SyncFailKeep(EIO)));
    let err = shard.append(&records(1, 1, 100)).wait().unwrap_err();
    assert_eq!(own_io(&err), ("fdatasync", EIO));
    assert!(matches!(
        shard.append(&records(1, 1, 100)).wait(),
        Err(StorageError::Poisoned { .. })
    ));
    // The next segment was never created: the old one was not yet sealed.
    assert_eq!(
        sim.read_file(Path::new("/shard/00000000000000000001.log"))
            .unwrap_err()
            .kind(),
        std::io::ErrorKind::NotFound
    );
    drop(shard);
    let reopened = open(&sim, config(200, Durability::None));
    assert_eq!(
        common::read_all(&reopened, reopened.offsets().base),
        [(0, payload(0, 100))]
    );
}

/// A sealed segment replaced with a copy whose rename's directory sync
/// fails: the replace reports the failed sync, the shard stops as for any
/// failed sync (never retried), and a reopen serves every record, from the
/// old file or the copy.
#[test]
fn replace_whose_directory_sync_fails_stops_the_shard_and_loses_nothing() {
    let sim = SimFs::new();
    let segment_size =
        felix_format::SEGMENT_HEADER_LEN as u64 + 4 * felix_format::record_encoded_len(10);
    let shard = open(&sim, config(segment_size, Durability::OnCommit));
    // One record per append: a batch is never split across segments.
    for offset in 0..10 {
        shard.append(&records(offset, 1, 10)).wait().unwrap();
    }
    let sealed = shard.segments()[0].extent;
    assert_eq!((sealed.base_offset, sealed.next_offset), (0, 4));
    let path = Path::new(DIR)
        .join(felix_format::file_name(sealed.id, felix_format::FileKind::Segment).as_str());
    let copy = bytes::Bytes::from(sim.read_file(&path).unwrap());
    sim.inject(Fault {
        op: FaultOp::SyncDir,
        path_contains: String::new(),
        skip: 0,
        effect: FaultEffect::Errno(EIO),
    });

    let err = shard
        .replace_sealed_segment(sealed.id, &felix_storage::SegmentCopy::Bytes(copy))
        .unwrap_err();
    assert_eq!(own_io(&err), ("fsync directory", EIO));
    for later in [
        shard.append(&records(10, 1, 10)).wait().unwrap_err(),
        shard.sync().unwrap_err(),
    ] {
        assert_eq!(original_io(&later), ("fsync directory", EIO));
    }
    // Reads go on: the records were never in doubt.
    assert_eq!(common::read_all(&shard, 0).len(), 10);
    drop(shard);

    for plan in [
        CrashPlan::durable_only(),
        CrashPlan::everything(sim.pending().len()),
    ] {
        let crashed = sim.crash(&plan);
        let reopened = open(&crashed, config(segment_size, Durability::OnCommit));
        let all = common::read_all(&reopened, 0);
        assert_eq!(
            all,
            (0..10).map(|o| (o, payload(o, 10))).collect::<Vec<_>>(),
            "{plan:?}"
        );
    }
}
