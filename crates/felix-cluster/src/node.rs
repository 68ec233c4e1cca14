//! A node: many replicated shards, one openraft group each, on one felix
//! [`Store`] (one sync pool), one tokio runtime and one connection per
//! peer node.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use felix_io::FileSystem;
use felix_raft::{FelixLogStore, TypeConfig};
use felix_storage::{Durability, Retention, ShardId, ShardKey, Store, StoreConfig};
use openraft::{Raft, SnapshotPolicy};
use tokio::net::TcpListener;
use tokio::sync::{OnceCell, watch};
use tokio::task::JoinHandle;

use crate::error::NodeError;
use crate::network::{GroupNetwork, Peers};
use crate::quiesce::Quiet;
use crate::state_machine::StreamMachine;
use crate::tls::{NodeTls, TlsFiles};
use crate::wire::ShardName;

/// How long shutting one group down may take (a sync stuck on a failing
/// disk must not keep the node from exiting).
const GROUP_SHUTDOWN: Duration = Duration::from_secs(10);

/// A replicated shard's Raft.
pub(crate) type GroupRaft = Raft<TypeConfig, StreamMachine>;

/// Raft's timings, in milliseconds. Every node of a cluster should use the
/// same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaftTimings {
    /// How often a leader sends heartbeats. Default 100 ms.
    pub heartbeat_ms: u64,
    /// The shortest time a follower waits without hearing from a leader
    /// before it stands for election. Default 500 ms.
    pub election_min_ms: u64,
    /// The longest such time (each wait is drawn between the two).
    /// Default 1,000 ms.
    pub election_max_ms: u64,
}

impl Default for RaftTimings {
    fn default() -> Self {
        Self {
            heartbeat_ms: 100,
            election_min_ms: 500,
            election_max_ms: 1000,
        }
    }
}

/// How to start a node: [`Node::start`].
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The node's id, unique in the cluster (not 0).
    pub id: u64,
    /// The directory of the node's felix store (created if missing). A
    /// directory a node used before is a restart: its shards' groups are
    /// opened again.
    pub dir: PathBuf,
    /// The address to listen on, e.g. `127.0.0.1:7101`; unless
    /// [`advertise`](Self::advertise) says otherwise, it is also the
    /// address peers reach this node at. Port 0 picks a free port (see
    /// [`Node::addr`]).
    pub listen: String,
    /// The address peers and clients are told to reach this node at, when
    /// it is not the listen address (a wildcard `0.0.0.0:PORT`, or a
    /// proxy in between). Default `None`: the address bound.
    pub advertise: Option<String>,
    /// The other nodes this one knows, by id: where a new shard's replicas
    /// are reached. The node also learns the members named when it is asked
    /// to host a new shard, and a node added to a shard it leads; a group's
    /// Raft messages go to the addresses its membership records.
    pub peers: BTreeMap<u64, String>,
    /// Raft's timings.
    pub timings: RaftTimings,
    /// The store's configuration (segment size, open-shard budget...). Its
    /// durability is always [`Durability::None`]: each group's log asks for
    /// its own syncs (see felix-raft). Its retention must stay off (the
    /// default): the store would delete a Raft log's segments behind
    /// openraft's back; [`retention`](Self::retention) is the replicated
    /// one. Default [`StoreConfig::default`].
    pub store: StoreConfig,
    /// Retention of every replicated shard, through the log: every
    /// `interval`, each shard's leader finds where its own log would begin
    /// under `max_bytes` and `max_age` (whole sealed segments, as
    /// [`Shard::apply_retention`](felix_storage::Shard::apply_retention)
    /// measures them) and appends a log-start entry, so every replica's
    /// start moves to the same offset. Limits take effect only with an
    /// interval (an interval without limits is refused at start, as a
    /// store's is). Default none: nothing is deleted but by
    /// [`delete_records_before`](crate::ReplicatedShard::delete_records_before).
    pub retention: Retention,
    /// The file system the store lives on. Default the real one; tests run
    /// a node on felix-io's simulated file system to fail its disk or cut
    /// its power.
    pub file_system: FileSystem,
    /// TLS for every connection, both ways: peers and clients must present
    /// a certificate chaining to `ca`. `None` (the default) serves and
    /// connects in the clear.
    pub tls: Option<TlsFiles>,
    /// The most bytes of requests one connection may have in the node's
    /// hands at a time (read, not yet answered); a connection at the limit
    /// is not read until answers free room. A frame larger than the limit
    /// takes all of it. Default [`MAX_IN_FLIGHT_BYTES`](crate::MAX_IN_FLIGHT_BYTES)
    /// (256 MiB).
    pub max_in_flight_bytes: usize,
}

impl NodeConfig {
    /// A configuration with the given id, directory and listen address,
    /// no peers, and defaults for the rest.
    pub fn new(id: u64, dir: impl Into<PathBuf>, listen: impl Into<String>) -> Self {
        Self {
            id,
            dir: dir.into(),
            listen: listen.into(),
            advertise: None,
            peers: BTreeMap::new(),
            timings: RaftTimings::default(),
            store: StoreConfig::default(),
            retention: Retention::default(),
            file_system: FileSystem::os(),
            tls: None,
            max_in_flight_bytes: crate::server::MAX_IN_FLIGHT_BYTES,
        }
    }
}

/// One group a node hosts: its Raft, its log and its state machine.
#[derive(Clone)]
pub(crate) struct Group {
    pub(crate) raft: GroupRaft,
    pub(crate) log: FelixLogStore<TypeConfig>,
    pub(crate) machine: StreamMachine,
    /// Whether its timers are off while it is idle (`quiesce.rs`).
    pub(crate) quiet: Arc<Quiet>,
    /// Set by the first [`Group::stop`]: a group stops once.
    stopped: Arc<AtomicBool>,
}

impl Group {
    /// Shuts the group's Raft down (at most [`GROUP_SHUTDOWN`]) and closes
    /// its log, once: a node's shutdown and an open that finished during
    /// it may both ask.
    async fn stop(&self, node: u64, key: &ShardKey) {
        if self.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        match tokio::time::timeout(GROUP_SHUTDOWN, self.raft.shutdown()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(node, shard = %key, error = %e, "group shutdown");
            }
            Err(_) => {
                tracing::warn!(node, shard = %key, "group did not stop within {GROUP_SHUTDOWN:?}");
            }
        }
        if let Err(source) = self.log.close() {
            tracing::warn!(node, shard = %key, error = %source, "closing the log");
        }
    }
}

/// What the node's tasks share.
pub(crate) struct Shared {
    pub(crate) id: u64,
    pub(crate) addr: String,
    pub(crate) store: Store,
    pub(crate) peers: Arc<Peers>,
    /// Node id to address: the configured peers, this node, and whatever
    /// memberships taught it.
    pub(crate) known: RwLock<BTreeMap<u64, String>>,
    raft_config: Arc<openraft::Config>,
    /// Each hosted group, opened once (the cell) whoever asks first.
    groups: Mutex<HashMap<ShardKey, Arc<OnceCell<Group>>>>,
    /// Shards whose groups failed to open at start: not served, reported
    /// by status with the reason.
    unopened: Mutex<BTreeMap<ShardKey, String>>,
    /// Set when the node shuts down: no group opens any more.
    closing: AtomicBool,
    /// Connections to this node open now.
    pub(crate) inbound: AtomicU64,
    /// Groups that stopped on this node since it started (a peer that
    /// sees the count move wakes the quiet groups this node led).
    pub(crate) stops: Arc<AtomicU64>,
    /// An id of this run of the node (its start time, in nanoseconds since
    /// the Unix epoch): peers that see it change know it restarted.
    pub(crate) run: u64,
    timings: RaftTimings,
    /// [`NodeConfig::max_in_flight_bytes`], at least 1.
    pub(crate) max_in_flight_bytes: usize,
    /// The most bytes of requests one connection held at a time since the
    /// node started.
    pub(crate) inbound_bytes_peak: AtomicU64,
    /// How connections are accepted, when TLS is on.
    pub(crate) tls: Option<NodeTls>,
}

/// A running node. Dropping it without [`Node::shutdown`] leaves its
/// tasks running until the runtime ends.
pub struct Node {
    shared: Arc<Shared>,
    local: SocketAddr,
    stop: watch::Sender<bool>,
    server: JoinHandle<()>,
}

impl Node {
    /// Opens the node's store, opens every group it held (a restart), and
    /// starts serving on the listen address. Must be called within a
    /// tokio runtime.
    pub async fn start(config: NodeConfig) -> Result<Node, NodeError> {
        let id = config.id;
        let raft_config = openraft::Config {
            heartbeat_interval: config.timings.heartbeat_ms,
            election_timeout_min: config.timings.election_min_ms,
            election_timeout_max: config.timings.election_max_ms,
            // The stream is the state: a snapshot is taken only where the
            // log start moves (`log_start.rs`), and the log is purged up to
            // it at once, keeping nothing it covers, so the snapshot is
            // always the entry just below the log start.
            snapshot_policy: SnapshotPolicy::Never,
            max_in_snapshot_log_to_keep: 0,
            purge_batch_size: 1,
            // A node cut off and back, or slowed by a busy machine, asks
            // first whether it could win before it bumps the term: no
            // elections that feed each other.
            enable_pre_vote: Some(true),
            ..openraft::Config::default()
        }
        .validate()
        .map_err(|e| NodeError::Timings {
            node: id,
            reason: e.to_string(),
        })?;
        let tls = match &config.tls {
            Some(files) => Some(
                NodeTls::from_files(files, id)
                    .map_err(|source| NodeError::Tls { node: id, source })?,
            ),
            None => None,
        };
        if config.store.retention != Retention::default() {
            return Err(NodeError::Retention {
                node: id,
                found: config.store.retention,
            });
        }
        StoreConfig {
            retention: config.retention,
            ..StoreConfig::default()
        }
        .validate()
        .map_err(|source| NodeError::RetentionConfig { node: id, source })?;
        let store_config = StoreConfig {
            durability: Durability::None,
            ..config.store
        };
        let store = Store::options(&config.dir)
            .config(store_config)
            .file_system(config.file_system.clone())
            .open()
            .map_err(|source| NodeError::Store {
                node: id,
                dir: config.dir.clone(),
                source,
            })?;
        let listener =
            TcpListener::bind(&config.listen)
                .await
                .map_err(|source| NodeError::Listen {
                    node: id,
                    addr: config.listen.clone(),
                    source,
                })?;
        let local = listener.local_addr().map_err(|source| NodeError::Listen {
            node: id,
            addr: config.listen.clone(),
            source,
        })?;
        let addr = config
            .advertise
            .clone()
            .unwrap_or_else(|| local.to_string());
        let mut known = config.peers.clone();
        known.insert(id, addr.clone());
        let shared = Arc::new(Shared {
            id,
            addr,
            store,
            peers: Peers::new(id, tls.as_ref().map(|t| t.client.clone())),
            known: RwLock::new(known),
            raft_config: Arc::new(raft_config),
            groups: Mutex::new(HashMap::new()),
            unopened: Mutex::new(BTreeMap::new()),
            closing: AtomicBool::new(false),
            inbound: AtomicU64::new(0),
            stops: Arc::default(),
            run: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
            timings: config.timings,
            max_in_flight_bytes: config
                .max_in_flight_bytes
                .clamp(1, usize::try_from(u32::MAX).unwrap_or(usize::MAX)),
            inbound_bytes_peak: AtomicU64::new(0),
            tls,
        });
        let ids = shared.store.keys().map_err(|source| NodeError::Store {
            node: id,
            dir: config.dir.clone(),
            source,
        })?;
        for shard in ids {
            match shard {
                // One shard that cannot open does not keep the node from
                // serving the others: it is logged and reported by status.
                ShardId::Key(key) => {
                    if let Err(e) = shared.group(&key).await {
                        tracing::error!(node = id, shard = %key, error = %e, "shard not served: its group did not open");
                        let mut unopened = shared
                            .unopened
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner);
                        unopened.insert(key, e.to_string());
                        shared.stops.fetch_add(1, Ordering::AcqRel);
                    }
                }
                ShardId::Dir(name) => {
                    tracing::warn!(node = id, dir = %name, "a shard directory without a key is not served");
                }
            }
        }
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(crate::quiesce::keep(Arc::clone(&shared), stopped.clone()));
        tokio::spawn(crate::log_start::retain(
            Arc::clone(&shared),
            config.retention,
            stopped.clone(),
        ));
        let server = tokio::spawn(crate::server::serve(Arc::clone(&shared), listener, stopped));
        tracing::info!(node = id, addr = %shared.addr, "node started");
        Ok(Node {
            shared,
            local,
            stop,
            server,
        })
    }

    /// The node's id.
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// The address the node listens on.
    pub fn addr(&self) -> SocketAddr {
        self.local
    }

    /// The replicated shard `key` if this node hosts it.
    pub async fn shard(&self, key: &ShardKey) -> Option<crate::ReplicatedShard> {
        let group = self.shared.hosted(key)?;
        Some(crate::ReplicatedShard::new(
            key.clone(),
            group,
            Arc::clone(&self.shared),
        ))
    }

    /// Tells the node where node `id` listens (as [`NodeConfig::peers`]
    /// does at start), e.g. for a node added to the cluster later.
    pub fn add_peer(&self, id: u64, addr: impl Into<String>) {
        self.shared.learn(id, &addr.into());
    }

    /// Stops serving, shuts every group down and closes the store (each
    /// shard's clean-shutdown file written).
    pub async fn shutdown(self) -> Result<(), NodeError> {
        {
            // Under the groups' lock, as an open checks it once done: an
            // open finished before this is among the groups stopped below,
            // and one finished after it sees `closing` and stops its own.
            let _groups = self
                .shared
                .groups
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.shared.closing.store(true, Ordering::Release);
        }
        let _ = self.stop.send(true);
        let _ = self.server.await;
        let groups = self.shared.all_groups();
        self.shared
            .groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        for (key, group) in groups {
            group.stop(self.shared.id, &key).await;
        }
        self.shared
            .store
            .close()
            .map_err(|source| NodeError::Store {
                node: self.shared.id,
                dir: self.shared.store.root().to_path_buf(),
                source,
            })?;
        tracing::info!(node = self.shared.id, "node stopped");
        Ok(())
    }
}

impl Shared {
    /// The group of `key`, opened when this node does not host it yet (its
    /// log created if the store has no such shard). Each key opens once,
    /// and opening one does not hold up lookups of the others.
    pub(crate) async fn group(&self, key: &ShardKey) -> Result<Group, NodeError> {
        if self.closing.load(Ordering::Acquire) {
            return Err(NodeError::Stopping { node: self.id });
        }
        let cell = {
            let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(groups.entry(key.clone()).or_default())
        };
        let group = cell.get_or_try_init(|| self.open_group(key)).await;
        // Read under the groups' lock, as the shutdown sets it.
        let closing = {
            let _groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
            self.closing.load(Ordering::Acquire)
        };
        match group {
            // Done while the node began to stop: the shutdown may have
            // collected the groups before this one was there, so this one
            // stops here rather than run on with the store closed under it
            // (stopping twice does nothing).
            Ok(group) if closing => {
                group.stop(self.id, key).await;
                Err(NodeError::Stopping { node: self.id })
            }
            Ok(group) => Ok(group.clone()),
            // The store may have closed under the open.
            Err(_) if closing => Err(NodeError::Stopping { node: self.id }),
            Err(e) => Err(e),
        }
    }

    async fn open_group(&self, key: &ShardKey) -> Result<Group, NodeError> {
        let shard = key.to_string();
        let log = FelixLogStore::<TypeConfig>::in_store(&self.store, key).map_err(|source| {
            NodeError::Log {
                node: self.id,
                shard: shard.clone(),
                source,
            }
        })?;
        let recorded = log.snapshot().map_err(|source| NodeError::Log {
            node: self.id,
            shard: shard.clone(),
            source,
        })?;
        let machine = StreamMachine::new(log.clone(), recorded.and_then(|meta| meta.last_log_id));
        let network = GroupNetwork {
            peers: Arc::clone(&self.peers),
            shard: ShardName::from(key),
        };
        let raft = Raft::new(
            self.id,
            Arc::clone(&self.raft_config),
            network,
            log.clone(),
            machine.clone(),
        )
        .await
        .map_err(|e| NodeError::Raft {
            node: self.id,
            shard: shard.clone(),
            reason: e.to_string(),
        })?;
        tokio::spawn(crate::log_start::keep_start(
            self.id,
            shard.clone(),
            raft.clone(),
            log.clone(),
            machine.wanted_start(),
        ));
        tokio::spawn(crate::status::watch_group(
            self.id,
            shard,
            raft.clone(),
            Arc::clone(&self.stops),
        ));
        Ok(Group {
            raft,
            log,
            machine,
            quiet: Arc::default(),
            stopped: Arc::default(),
        })
    }

    /// The group of `key` if this node hosts it.
    pub(crate) fn hosted(&self, key: &ShardKey) -> Option<Group> {
        let groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        groups.get(key).and_then(|cell| cell.get().cloned())
    }

    /// Every hosted group, by key.
    pub(crate) fn all_groups(&self) -> Vec<(ShardKey, Group)> {
        let groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        let mut all: Vec<_> = groups
            .iter()
            .filter_map(|(k, cell)| cell.get().map(|g| (k.clone(), g.clone())))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// The shards whose groups failed to open at start, and why.
    pub(crate) fn unopened(&self) -> Vec<(ShardKey, String)> {
        let unopened = self.unopened.lock().unwrap_or_else(PoisonError::into_inner);
        unopened
            .iter()
            .map(|(k, why)| (k.clone(), why.clone()))
            .collect()
    }

    /// Remembers where `node` listens.
    pub(crate) fn learn(&self, node: u64, addr: &str) {
        let mut known = self.known.write().unwrap_or_else(PoisonError::into_inner);
        known.insert(node, addr.to_owned());
    }

    /// Where `node` listens, if known.
    pub(crate) fn address_of(&self, node: u64) -> Option<String> {
        self.known
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&node)
            .cloned()
    }

    /// Every node this one knows, with its address (itself included).
    pub(crate) fn known_peers(&self) -> Vec<(u64, String)> {
        let known = self.known.read().unwrap_or_else(PoisonError::into_inner);
        known.iter().map(|(id, addr)| (*id, addr.clone())).collect()
    }

    /// Raft's timings on this node.
    pub(crate) fn timings(&self) -> RaftTimings {
        self.timings
    }

    /// How long a call to a peer on a client's behalf may take.
    pub(crate) fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.raft_config.election_timeout_max.saturating_mul(4))
    }
}
