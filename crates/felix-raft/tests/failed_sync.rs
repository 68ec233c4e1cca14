//! A failed sync reaches openraft's append callback as the error: the
//! entries are never reported durable, and every later append fails.

use felix_io::FileSystem;
use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_raft::{Entry, FelixLogStore, LogId, RaftLogError, Request, TypeConfig};
use felix_storage::StorageError;
use openraft::EntryPayload;
use openraft::storage::{IOFlushed, RaftLogStorage, RaftLogStorageExt};
use openraft::type_config::TypeConfigExt;

/// The felix error inside an `io::Error` the log gave openraft.
fn felix_error(e: &std::io::Error) -> &RaftLogError {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<RaftLogError>())
        .unwrap_or_else(|| panic!("not a felix error: {e:?}"))
}

/// The OS error at the root of `e`'s source chain, if any.
fn root_os_error(e: &(dyn std::error::Error + 'static)) -> Option<i32> {
    let mut current = Some(e);
    let mut found = None;
    while let Some(err) = current {
        if let Some(code) = err
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
        {
            found = Some(code);
        }
        current = err.source();
    }
    found
}

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
        let entry = Entry {
            log_id: LogId::new_term_index(1, 0),
            payload: EntryPayload::Normal(Request::at(1, &b"lost"[..])),
        };
        let (tx, rx) = TypeConfig::oneshot();
        // Written: the append itself succeeds; the sync then fails.
        log.append([entry], IOFlushed::signal(tx)).await.unwrap();
        let err = rx.await.unwrap().unwrap_err();
        assert!(
            matches!(felix_error(&err), RaftLogError::Storage(_)),
            "{err:?}"
        );
        assert_eq!(root_os_error(&err), Some(EIO), "{err:?}");
        // Written, so readable, but never durable.
        assert_eq!(log.shard().offsets().written, 1);
        assert_eq!(log.shard().offsets().durable, 0);
        // The log says what it holds: the written entry, nothing purged.
        assert_eq!(
            log.get_log_state().await.unwrap(),
            openraft::storage::LogState {
                last_purged_log_id: None,
                last_log_id: Some(LogId::new_term_index(1, 0)),
            }
        );
        // The shard is poisoned: every later append fails, writing nothing
        // (tried twice: the first failure changes nothing either).
        for _ in 0..2 {
            let next = Entry {
                log_id: LogId::new_term_index(1, 1),
                payload: EntryPayload::Normal(Request::at(2, &b"after"[..])),
            };
            let err = log.append([next], IOFlushed::noop()).await.unwrap_err();
            assert!(
                matches!(
                    felix_error(&err),
                    RaftLogError::Storage(StorageError::Poisoned { .. })
                ),
                "{err:?}"
            );
            assert_eq!(log.shard().offsets().written, 1);
        }
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
            let entry = Entry {
                log_id: LogId::new_term_index(term, term - 1),
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
            Some(LogId::new_term_index(terms, terms - 1))
        );
    });
}
