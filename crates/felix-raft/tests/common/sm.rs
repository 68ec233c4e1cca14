//! A minimal state machine for the tests: it keeps every normal entry it
//! applied (index and bytes), with real snapshots (built, installed, read),
//! optionally kept in a file so that a node restarts from its snapshot.

use std::io::Cursor;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use felix_raft::{EntryData, TypeConfig};
use futures::{Stream, TryStreamExt};
use openraft::alias::{LogIdOf, SnapshotMetaOf, SnapshotOf, StoredMembershipOf};
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder, StoredMembership};
use serde::{Deserialize, Serialize};

pub type Snapshot = SnapshotOf<TypeConfig, Cursor<Vec<u8>>>;
type SnapshotMeta = SnapshotMetaOf<TypeConfig>;
type LogId = LogIdOf<TypeConfig>;

fn io(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// What the state machine holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmData {
    pub last_applied: Option<LogId>,
    pub membership: StoredMembershipOf<TypeConfig>,
    /// Every normal entry applied: its index and its bytes.
    pub entries: Vec<(u64, Vec<u8>)>,
}

#[derive(Debug, Clone)]
struct StoredSnapshot {
    meta: SnapshotMeta,
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
            let (meta, data): (SnapshotMeta, Vec<u8>) =
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
    pub fn snapshot_last(&self) -> Option<LogId> {
        self.inner
            .lock()
            .unwrap()
            .snapshot
            .as_ref()
            .and_then(|s| s.meta.last_log_id)
    }
}

fn keep(inner: &mut Inner, snapshot: StoredSnapshot) -> Result<(), std::io::Error> {
    if let Some(file) = &inner.file {
        let bytes = postcard::to_allocvec(&(&snapshot.meta, &snapshot.data)).map_err(io)?;
        let temp = file.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            let f = std::fs::File::create(&temp)?;
            std::io::Write::write_all(&mut &f, &bytes)?;
            f.sync_all()?;
            std::fs::rename(&temp, file)?;
            std::fs::File::open(file.parent().expect("a parent"))?.sync_all()
        };
        write()?;
    }
    inner.snapshot = Some(snapshot);
    Ok(())
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn build_snapshot(&mut self) -> Result<Snapshot, std::io::Error> {
        let mut inner = self.inner.lock().unwrap();
        let data = postcard::to_allocvec(&inner.data).map_err(io)?;
        inner.builds += 1;
        let meta = SnapshotMeta {
            last_log_id: inner.data.last_applied,
            last_membership: inner.data.membership.clone(),
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
            snapshot: Cursor::new(data),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotData = Cursor<Vec<u8>>;
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembershipOf<TypeConfig>), std::io::Error> {
        let inner = self.inner.lock().unwrap();
        Ok((inner.data.last_applied, inner.data.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), std::io::Error>
    where
        Strm: Stream<Item = Result<EntryResponder<TypeConfig>, std::io::Error>>
            + Unpin
            + OptionalSend,
    {
        while let Some((entry, responder)) = entries.try_next().await? {
            let index = entry.log_id.index;
            {
                let mut inner = self.inner.lock().unwrap();
                inner.data.last_applied = Some(entry.log_id);
                match entry.payload {
                    EntryPayload::Blank => {}
                    EntryPayload::Normal(request) => {
                        inner.data.entries.push((index, request.payload().to_vec()))
                    }
                    EntryPayload::Membership(m) => {
                        inner.data.membership = StoredMembership::new(Some(entry.log_id), m);
                    }
                }
            }
            if let Some(responder) = responder {
                responder.send(index);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Cursor<Vec<u8>>,
    ) -> Result<(), std::io::Error> {
        let bytes = snapshot.into_inner();
        let mut data: SmData = postcard::from_bytes(&bytes).map_err(io)?;
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

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, std::io::Error> {
        let inner = self.inner.lock().unwrap();
        Ok(inner.snapshot.as_ref().map(|s| Snapshot {
            meta: s.meta.clone(),
            snapshot: Cursor::new(s.data.clone()),
        }))
    }
}
