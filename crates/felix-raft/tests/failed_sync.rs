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
        // The log says what it holds: the written entry, nothing purged.
        assert_eq!(
            log.get_log_state().await.unwrap(),
            openraft::storage::LogState {
                last_purged_log_id: None,
                last_log_id: Some(LogId::new(CommittedLeaderId::new(1, 0), 0)),
            }
        );
    });
}

/// More terms than the generation history holds (4096 boundaries), none
/// purged: appends go on, and the history keeps the newest 4096 (felix
/// drops the oldest boundary when it is full).
#[test]
fn append_past_a_full_generation_history_never_fails() {
    let sim = SimFs::new();
    let mut log: FelixLogStore<TypeConfig> = FelixLogStore::options("/log")
        .file_system(FileSystem::new(sim.clone()))
        .open()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let terms = felix_format::epochs::MAX_EPOCH_ENTRIES as u64 + 4;
        for term in 1..=terms {
            let entry = Entry::<TypeConfig> {
                log_id: LogId::new(CommittedLeaderId::new(term, 0), term - 1),
                payload: EntryPayload::Blank,
            };
            log.blocking_append([entry]).await.unwrap();
        }
        let history = log.shard().generations();
        assert_eq!(history.len(), felix_format::epochs::MAX_EPOCH_ENTRIES);
        assert_eq!(history.latest().map(|e| e.generation), Some(terms));
        assert_eq!(history.entries().first().map(|e| e.generation), Some(5));
        let state = log.get_log_state().await.unwrap();
        assert_eq!(
            state.last_log_id,
            Some(LogId::new(CommittedLeaderId::new(terms, 0), terms - 1))
        );
    });
}
