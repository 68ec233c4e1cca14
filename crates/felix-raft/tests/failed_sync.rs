//! A failed sync reaches openraft's append callback as the error: the
//! entries are never reported durable.

use felix_io::FileSystem;
use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_raft::{FelixLogStore, TypeConfig};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, StorageError};

const EIO: i32 = 5;

#[test]
fn append_whose_sync_fails_reports_the_io_error_to_the_callback() {
    let sim = SimFs::new();
    let mut log: FelixLogStore<TypeConfig> = FelixLogStore::options("/log")
        .file_system(FileSystem::new(sim.clone()))
        .open()
        .unwrap();
    sim.inject(Fault {
        op: FaultOp::SyncFile,
        path_contains: ".log".into(),
        skip: 0,
        effect: FaultEffect::SyncFailKeep(EIO),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let entry = Entry::<TypeConfig> {
            log_id: LogId::new(CommittedLeaderId::new(1, 0), 0),
            payload: EntryPayload::Normal(b"lost".to_vec()),
        };
        let err = log.blocking_append([entry]).await.unwrap_err();
        assert!(matches!(err, StorageError::IO { .. }), "{err:?}");
        let text = format!("{err:?}");
        assert!(text.contains("Input/output error"), "{text}");
        // Written, so readable, but never durable.
        assert_eq!(log.shard().offsets().written, 1);
        assert_eq!(log.shard().durable_offset(), 0);
        assert!(log.get_log_state().await.is_ok());
    });
}
