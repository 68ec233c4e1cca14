//! A minimal state machine for the tests: it keeps every normal entry it
//! applied (index and bytes), with real snapshots (built, installed, read),
//! optionally kept in a file so that a node restarts from its snapshot.

use std::io::Cursor;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use felix_raft::TypeConfig;
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};

/// What the state machine holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmData {
    pub last_applied: Option<LogId<u64>>,
    pub membership: StoredMembership<u64, BasicNode>,
    /// Every normal entry applied: its index and its bytes.
    pub entries: Vec<(u64, Vec<u8>)>,
}

#[derive(Debug, Clone)]
struct StoredSnapshot {
    meta: SnapshotMeta<u64, BasicNode>,
    data: Vec<u8>,
}

#[derive(Debug, Default)]
struct Inner {
    data: SmData,
    snapshot: Option<StoredSnapshot>,
    builds: u64,
    /// Where the current snapshot is kept, if anywhere.
    file: Option<PathBuf>,
}

/// The state machine; clones share it (the test keeps one to look at).
#[derive(Debug, Clone, Default)]
pub struct StateMachine {
    inner: Arc<Mutex<Inner>>,
}

impl StateMachine {
    /// A state machine keeping its snapshot in `file`, restored from it.
    pub fn persistent(file: PathBuf) -> Self {
        let mut inner = Inner {
            file: Some(file.clone()),
            ..Inner::default()
        };
        if let Ok(bytes) = std::fs::read(&file) {
            let (meta, data): (SnapshotMeta<u64, BasicNode>, Vec<u8>) =
                postcard::from_bytes(&bytes).expect("snapshot file");
            inner.data = postcard::from_bytes(&data).expect("snapshot data");
            inner.snapshot = Some(StoredSnapshot { meta, data });
        }
        Self {
            inner: Arc::new(Mutex::new(inner)),
        }
    }

    pub fn data(&self) -> SmData {
        self.inner.lock().unwrap().data.clone()
    }

    /// The last log id of the current snapshot, if any.
    pub fn snapshot_last(&self) -> Option<LogId<u64>> {
        self.inner
            .lock()
            .unwrap()
            .snapshot
            .as_ref()
            .and_then(|s| s.meta.last_log_id)
    }
}

fn keep(inner: &mut Inner, snapshot: StoredSnapshot) -> Result<(), StorageError<u64>> {
    if let Some(file) = &inner.file {
        let bytes = postcard::to_allocvec(&(&snapshot.meta, &snapshot.data))
            .map_err(|e| StorageIOError::write_snapshot(None, &e))?;
        let temp = file.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            let f = std::fs::File::create(&temp)?;
            std::io::Write::write_all(&mut &f, &bytes)?;
            f.sync_all()?;
            std::fs::rename(&temp, file)?;
            std::fs::File::open(file.parent().expect("a parent"))?.sync_all()
        };
        write().map_err(|e| StorageIOError::write_snapshot(None, &e))?;
    }
    inner.snapshot = Some(snapshot);
    Ok(())
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        let mut inner = self.inner.lock().unwrap();
        let data = postcard::to_allocvec(&inner.data)
            .map_err(|e| StorageIOError::read_state_machine(&e))?;
        inner.builds += 1;
        let last = inner.data.last_applied;
        let meta = SnapshotMeta {
            last_log_id: last,
            last_membership: inner.data.membership.clone(),
            snapshot_id: format!("{}-{}", last.map_or(0, |l| l.index), inner.builds),
        };
        keep(
            &mut inner,
            StoredSnapshot {
                meta: meta.clone(),
                data: data.clone(),
            },
        )?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        let inner = self.inner.lock().unwrap();
        Ok((inner.data.last_applied, inner.data.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<u64>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut inner = self.inner.lock().unwrap();
        let mut replies = Vec::new();
        for entry in entries {
            inner.data.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(bytes) => inner.data.entries.push((entry.log_id.index, bytes)),
                EntryPayload::Membership(m) => {
                    inner.data.membership = StoredMembership::new(Some(entry.log_id), m);
                }
            }
            replies.push(entry.log_id.index);
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let bytes = snapshot.into_inner();
        let mut data: SmData = postcard::from_bytes(&bytes)
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        data.last_applied = meta.last_log_id;
        data.membership = meta.last_membership.clone();
        let mut inner = self.inner.lock().unwrap();
        inner.data = data;
        keep(
            &mut inner,
            StoredSnapshot {
                meta: meta.clone(),
                data: bytes,
            },
        )
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        let inner = self.inner.lock().unwrap();
        Ok(inner.snapshot.as_ref().map(|s| Snapshot {
            meta: s.meta.clone(),
            snapshot: Box::new(Cursor::new(s.data.clone())),
        }))
    }
}
