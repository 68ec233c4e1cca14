//! Simulated power loss through a Raft log's life: seeded random
//! workloads of appends across terms, votes (new and committed),
//! truncations (each followed by appends of a later term, as a new leader
//! overwrites a follower's tail), purges (inside the log, of its every
//! entry, or past its end as after a snapshot), each after the snapshot it
//! purges up to is recorded (as a stream's state machine records it), and
//! clean reopens, each run
//! over several seeds. The power is cut after every file-system call,
//! every disk state the crash could leave (felix-storage's plans: subsets
//! of the pending writes, torn writes, lost blocks) is opened as a log,
//! and it must hold:
//! - the vote saved last (or, if a save was under way, the one it saved);
//! - the last purged id saved last (or the one a purge under way saved),
//!   with the log beginning just after it;
//! - the snapshot recorded last (or the one a save under way recorded),
//!   membership included;
//! - every entry reported durable and not purged, byte for byte;
//! - nothing never appended, and nothing a finished truncation removed.
//!
//! `FELIX_RAFT_POWER_LOSS_SEEDS=N cargo test -p felix-raft --test
//! power_loss -- --nocapture` runs N seeds instead of CI's [`SEEDS`].

#[path = "../../felix-storage/tests/power_loss/plans.rs"]
mod plans;

use std::collections::{BTreeMap, BTreeSet};

use felix_io::FileSystem;
use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_raft::{Entry, LogId, Request, Vote};
use felix_raft::{FelixLogStore, TypeConfig};
use felix_storage::{Durability, Preallocation, StoreConfig};
use openraft::storage::SnapshotMeta;
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::vote::leader_id_std::CommittedLeaderId;
use openraft::{BasicNode, EntryPayload, Membership, RaftLogReader, StoredMembership};

use plans::{Rng, plans};

const DIR: &str = "/log";

fn config() -> StoreConfig {
    StoreConfig {
        durability: Durability::None,
        // A few entries a segment, so purges and truncations cross files.
        segment_size_bytes: 160,
        index_spacing_bytes: 64,
        preallocate: Preallocation::Off,
        writeback_bytes: None,
        ..StoreConfig::default()
    }
}

fn id(term: u64, index: u64) -> LogId {
    LogId::new_term_index(term, index)
}

fn entry(term: u64, index: u64) -> Entry {
    Entry {
        log_id: id(term, index),
        payload: EntryPayload::Normal(Request::at(index, format!("t{term}-{index}").into_bytes())),
    }
}

/// An entry as the check compares it.
type Seen = (LogId, Vec<u8>);

fn seen(e: &Entry) -> Seen {
    let payload = match &e.payload {
        EntryPayload::Normal(p) => felix_raft::EntryData::payload(p).to_vec(),
        other => format!("{other:?}").into_bytes(),
    };
    (e.log_id, payload)
}

/// What the workload got acknowledged, and what it only attempted.
#[derive(Debug, Default)]
struct Model {
    /// Durable entries of the log as it stands, by index.
    acked: BTreeMap<u64, Seen>,
    /// Every entry ever passed to `append`.
    attempted: BTreeSet<Seen>,
    /// Entries a truncation that returned removed: never to be seen again.
    stale: BTreeSet<Seen>,
    vote: Option<Vote>,
    vote_under_way: Option<Vote>,
    purged: Option<LogId>,
    purge_under_way: Option<LogId>,
    snapshot: Option<LogId>,
    snapshot_under_way: Option<LogId>,
    /// Where a truncation under way cuts: durable entries from there on
    /// may be gone.
    truncate_under_way: Option<u64>,
    /// Whether the whole workload ran.
    finished: bool,
}

async fn append(
    log: &mut FelixLogStore<TypeConfig>,
    m: &mut Model,
    term: u64,
    at: std::ops::Range<u64>,
) -> bool {
    let entries: Vec<_> = at.map(|i| entry(term, i)).collect();
    m.attempted.extend(entries.iter().map(seen));
    if log.blocking_append(entries.clone()).await.is_err() {
        return false;
    }
    m.acked
        .extend(entries.iter().map(|e| (e.log_id.index, seen(e))));
    true
}

async fn vote(log: &mut FelixLogStore<TypeConfig>, m: &mut Model, vote: Vote) -> bool {
    m.vote_under_way = Some(vote);
    if log.save_vote(&vote).await.is_err() {
        return false;
    }
    m.vote = Some(vote);
    m.vote_under_way = None;
    true
}

/// A snapshot of the stream at `last`: that id and a membership.
fn snapshot_at(last: LogId) -> SnapshotMeta<CommittedLeaderId<u64>, u64, BasicNode> {
    let members = Membership::new(
        vec![BTreeSet::from([1, 2, 3])],
        BTreeMap::from([1, 2, 3].map(|n| (n, BasicNode::new(format!("127.0.0.1:{}", 7100 + n))))),
    )
    .expect("a valid membership");
    SnapshotMeta {
        last_log_id: Some(last),
        last_membership: StoredMembership::new(Some(id(1, 0)).filter(|_| last.index > 0), members),
    }
}

async fn purge(log: &mut FelixLogStore<TypeConfig>, m: &mut Model, upto: LogId) -> bool {
    // As a stream's state machine does: the snapshot recorded first, then
    // the log purged up to it.
    if m.snapshot.is_none_or(|s| s < upto) {
        m.snapshot_under_way = Some(upto);
        if log.save_snapshot(&snapshot_at(upto)).is_err() {
            return false;
        }
        m.snapshot = Some(upto);
        m.snapshot_under_way = None;
    }
    m.purge_under_way = Some(upto);
    if log.purge(upto).await.is_err() {
        return false;
    }
    m.purged = Some(upto);
    m.purge_under_way = None;
    m.acked.retain(|&i, _| i > upto.index);
    true
}

async fn truncate(log: &mut FelixLogStore<TypeConfig>, m: &mut Model, at: LogId) -> bool {
    m.truncate_under_way = Some(at.index);
    // openraft names the last entry kept; the log reads only its index.
    let kept = at.index.checked_sub(1).map(|i| id(at.leader_id.term, i));
    if log.truncate_after(kept).await.is_err() {
        return false;
    }
    m.truncate_under_way = None;
    let removed = m.acked.split_off(&at.index);
    m.stale.extend(removed.into_values());
    true
}

/// One step of a workload.
#[derive(Debug, Clone)]
enum Op {
    /// Appends entries of `term` at these indexes (the log's next ones).
    Append {
        term: u64,
        at: std::ops::Range<u64>,
    },
    Vote(Vote),
    /// Removes the entry with this id and every later one.
    Truncate(LogId),
    /// Removes every entry up to `upto`, which lies past the log's end
    /// when `past_end` (as after a snapshot was installed).
    Purge {
        upto: LogId,
        past_end: bool,
    },
    /// Closes the log and opens it again.
    Reopen,
}

/// Operations a workload draws (it then closes the log).
const WORKLOAD_OPS: usize = 12;

/// A seeded random workload that a Raft node could make: appends continue
/// the log; terms and votes only rise; a truncation removes at least one
/// entry above the last purge, and the appends after it are of a later
/// term (a new leader's), so no removed entry can come back as the same
/// bytes; purges only rise, and may pass the log's end, after which the
/// log continues just past the purge.
fn workload(seed: u64) -> Vec<Op> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut term = 1;
    let mut vote: Option<Vote> = None;
    // The terms of the entries held, by index; the log continues at `next`.
    let mut held: BTreeMap<u64, u64> = BTreeMap::new();
    let mut next = 0;
    let mut ops = Vec::new();
    let append = |ops: &mut Vec<Op>, held: &mut BTreeMap<u64, u64>, next: &mut u64, term, count| {
        ops.push(Op::Append {
            term,
            at: *next..*next + count,
        });
        held.extend((*next..*next + count).map(|i| (i, term)));
        *next += count;
    };
    append(&mut ops, &mut held, &mut next, term, 1 + rng.below(4));
    while ops.len() < WORKLOAD_OPS {
        match rng.below(10) {
            0..=3 => append(&mut ops, &mut held, &mut next, term, 1 + rng.below(4)),
            4 => {
                term += 1;
                let v = Vote::new(term, 1 + rng.below(3));
                vote = Some(v);
                ops.push(Op::Vote(v));
            }
            5 => {
                // The vote committed (a leader elected), or a new one.
                let v = match vote {
                    Some(v) if !v.committed => {
                        Vote::new_committed(v.leader_id.term, v.leader_id.voted_for)
                    }
                    _ => {
                        term += 1;
                        Vote::new(term, 1 + rng.below(3))
                    }
                };
                vote = Some(v);
                ops.push(Op::Vote(v));
            }
            6 => {
                let Some((&first, _)) = held.first_key_value() else {
                    continue;
                };
                let at = first + rng.below(next - first);
                ops.push(Op::Truncate(id(held[&at], at)));
                held.split_off(&at);
                next = at;
                term += 1;
            }
            7 | 8 => {
                let Some((&first, _)) = held.first_key_value() else {
                    continue;
                };
                // Up to one past the end.
                let upto = first + rng.below(next - first + 1);
                let upto_term = held.get(&upto).copied().unwrap_or(term);
                ops.push(Op::Purge {
                    upto: id(upto_term, upto),
                    past_end: upto >= next,
                });
                held = held.split_off(&(upto + 1));
                next = next.max(upto + 1);
            }
            _ => ops.push(Op::Reopen),
        }
    }
    ops
}

fn open(fs: &SimFs) -> Result<FelixLogStore<TypeConfig>, String> {
    FelixLogStore::<TypeConfig>::options(DIR)
        .config(config())
        .file_system(FileSystem::new(fs.clone()))
        .open()
        .map_err(|e| format!("open: {e}"))
}

/// Runs `ops`, then closes the log, until they end or the power does.
async fn run(fs: &SimFs, ops: &[Op]) -> Model {
    let mut m = Model::default();
    let Ok(mut log) = open(fs) else {
        return m;
    };
    for op in ops {
        let done = match op {
            Op::Append { term, at } => append(&mut log, &mut m, *term, at.clone()).await,
            Op::Vote(v) => vote(&mut log, &mut m, *v).await,
            Op::Truncate(at) => truncate(&mut log, &mut m, *at).await,
            Op::Purge { upto, .. } => purge(&mut log, &mut m, *upto).await,
            Op::Reopen => {
                if log.close().is_err() {
                    return m;
                }
                match open(fs) {
                    Ok(reopened) => {
                        log = reopened;
                        true
                    }
                    Err(_) => false,
                }
            }
        };
        if !done {
            return m;
        }
    }
    m.finished = log.close().is_ok();
    m
}

/// Opens a crashed disk as a log and holds it to the model.
async fn check(crashed: &SimFs, m: &Model) -> Result<(), String> {
    let mut log = FelixLogStore::<TypeConfig>::options(DIR)
        .config(config())
        .file_system(FileSystem::new(crashed.clone()))
        .open()
        .map_err(|e| format!("open: {e}"))?;
    let vote = log
        .read_vote()
        .await
        .map_err(|e| format!("read_vote: {e}"))?;
    if vote != m.vote && (m.vote_under_way.is_none() || vote != m.vote_under_way) {
        return Err(format!(
            "vote {vote:?}; saved {:?}, under way {:?}",
            m.vote, m.vote_under_way
        ));
    }
    let state = log
        .get_log_state()
        .await
        .map_err(|e| format!("get_log_state: {e}"))?;
    let purged = state.last_purged_log_id;
    if purged != m.purged && (m.purge_under_way.is_none() || purged != m.purge_under_way) {
        return Err(format!(
            "last purged {purged:?}; saved {:?}, under way {:?}",
            m.purged, m.purge_under_way
        ));
    }
    let snapshot = log
        .snapshot()
        .map_err(|e| format!("snapshot: {e}"))?
        .map(|meta| match meta.last_log_id {
            Some(last) if meta == snapshot_at(last) => Ok(last),
            _ => Err(meta),
        })
        .transpose()
        .map_err(|meta| format!("snapshot {meta:?} is not what was recorded"))?;
    if snapshot != m.snapshot
        && (m.snapshot_under_way.is_none() || snapshot != m.snapshot_under_way)
    {
        return Err(format!(
            "snapshot {snapshot:?}; recorded {:?}, under way {:?}",
            m.snapshot, m.snapshot_under_way
        ));
    }
    let from = purged.map_or(0, |p| p.index + 1);
    if log.shard().offsets().base != from {
        return Err(format!(
            "the log begins at {}, not just after the purged {purged:?}",
            log.shard().offsets().base
        ));
    }
    let found: Vec<Seen> = log
        .try_get_log_entries(0..u64::MAX)
        .await
        .map_err(|e| format!("read: {e}"))?
        .iter()
        .map(seen)
        .collect();
    let by_index: BTreeMap<u64, &Seen> = found.iter().map(|s| (s.0.index, s)).collect();
    let cut = m.truncate_under_way.unwrap_or(u64::MAX);
    for (index, want) in m.acked.range(from..) {
        let got = by_index.get(index);
        if got != Some(&want) && !(*index >= cut && got.is_none()) {
            return Err(format!(
                "durable entry {index} is {:?}, not {want:?}",
                by_index.get(index)
            ));
        }
    }
    for s in &found {
        if !m.attempted.contains(s) {
            return Err(format!("entry {s:?} was never appended"));
        }
        if m.stale.contains(s) {
            return Err(format!("entry {s:?} came back after its truncation"));
        }
    }
    let last = found.last().map(|s| s.0).or(purged);
    if state.last_log_id != last {
        return Err(format!(
            "last log id {:?}, but the log ends at {last:?}",
            state.last_log_id
        ));
    }
    log.close().map_err(|e| format!("close: {e}"))?;
    Ok(())
}

/// Seeds CI runs: `FELIX_RAFT_POWER_LOSS_SEEDS`, or this many.
const SEEDS: u64 = 8;
/// The least the sweep checks over [`SEEDS`] seeds (scaled for another
/// count): about 5% below the 46,529 crash states it checked when this
/// was set (printed with `--nocapture`), so a sweep whose runs end early
/// falls short.
const MIN_STATES: u64 = 44_000;

fn seeds() -> u64 {
    std::env::var("FELIX_RAFT_POWER_LOSS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEEDS)
}

/// What one seed's sweep covered.
#[derive(Debug, Default, Clone, Copy)]
struct Swept {
    /// Mutating file-system calls of the uncut workload.
    calls: u64,
    /// Crash states opened and checked.
    states: u64,
}

/// Runs seed `seed`'s workload once uncut (every operation must succeed),
/// then cuts the power after every call, with `faults` injected, and checks
/// every crash state: what was covered, or the first failure.
async fn sweep(seed: u64, faults: &[Fault]) -> Result<Swept, String> {
    let ops = workload(seed);
    let fresh = || {
        let fs = SimFs::new();
        for fault in faults {
            fs.inject(fault.clone());
        }
        fs
    };
    let uncut_fs = fresh();
    let uncut = run(&uncut_fs, &ops).await;
    // Every operation is valid where the workload makes it: one that
    // failed with the power on would end every run there, unnoticed.
    assert!(
        uncut.finished,
        "seed {seed}: the workload failed without a power cut: {uncut:?}\nworkload: {ops:?}\ncalls: {:?}",
        uncut_fs.log()
    );
    let total = uncut_fs.mutating_calls();
    let mut rng = Rng(0x5EED ^ seed);
    let mut states = 0u64;
    for cut in 0..=total {
        let fs = fresh();
        fs.cut_power_after(cut);
        let model = run(&fs, &ops).await;
        // A run ends early only because the power went out.
        if !model.finished && fs.log().iter().all(|call| call.ok) {
            return Err(format!(
                "seed {seed}, power cut after {cut} of {total} calls: the workload stopped with the power on\nworkload: {ops:?}"
            ));
        }
        for plan in plans(&fs, &mut rng) {
            states += 1;
            let crashed = fs.crash(&plan);
            check(&crashed, &model).await.map_err(|e| {
                format!(
                    "seed {seed}, power cut after {cut} of {total} calls, {plan:?}: {e}\nworkload: {ops:?}\npending: {:?}",
                    fs.pending()
                )
            })?;
        }
    }
    Ok(Swept {
        calls: total,
        states,
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn power_loss_through_votes_purges_and_truncation_loses_nothing_acknowledged() {
    let seeds = seeds();
    let runtime = runtime();
    let mut total = Swept::default();
    let mut kinds = BTreeSet::new();
    for seed in 0..seeds {
        let swept = runtime
            .block_on(sweep(seed, &[]))
            .unwrap_or_else(|e| panic!("{e}"));
        total.calls += swept.calls;
        total.states += swept.states;
        kinds.extend(workload(seed).iter().map(|op| match op {
            Op::Append { .. } => "append",
            Op::Vote(v) if v.committed => "committed vote",
            Op::Vote(_) => "vote",
            Op::Truncate(_) => "truncate",
            Op::Purge { past_end: true, .. } => "purge past the end",
            Op::Purge { .. } => "purge",
            Op::Reopen => "reopen",
        }));
    }
    println!(
        "power loss through a Raft log: {seeds} seeds, {} calls, {} crash states checked; operations: {kinds:?}",
        total.calls, total.states
    );
    // The CI seeds between them reach every kind of operation.
    if seeds >= SEEDS {
        assert_eq!(kinds.len(), 7, "{kinds:?}");
    }
    assert!(
        total.states >= MIN_STATES * seeds / SEEDS,
        "the sweep checked too little: {total:?}"
    );
}

/// The first failure a sweep finds with the sync of the temporary `temp`
/// skipped (reporting success, making nothing durable), over the CI seeds.
fn failure_with_skipped_sync_of(temp: &str) -> Option<String> {
    let fault = Fault {
        op: FaultOp::SyncFile,
        path_contains: temp.into(),
        skip: 0,
        effect: FaultEffect::SyncSkipped,
    };
    let runtime = runtime();
    (0..SEEDS).find_map(|seed| {
        runtime
            .block_on(sweep(seed, std::slice::from_ref(&fault)))
            .err()
    })
}

/// The raft-state temporary's sync is what makes a saved vote durable
/// before the rename: with it skipped, some crash state leaves the name on
/// a file without its bytes, and the vote that was saved is lost (the log
/// refuses to open on it).
#[test]
fn power_loss_check_catches_a_skipped_sync_of_the_raft_state_temporary() {
    let failure = failure_with_skipped_sync_of("raft-state.tmp")
        .expect("skipping the raft-state temporary's sync went unnoticed");
    assert!(
        failure.contains("open: raft-state file /log/raft-state is unusable"),
        "{failure}"
    );
}

/// The same of the raft-snapshot temporary: with its sync skipped, some
/// crash state leaves a recorded snapshot without its bytes, and the log
/// refuses to open on it (a membership purged with no record of it).
#[test]
fn power_loss_check_catches_a_skipped_sync_of_the_raft_snapshot_temporary() {
    let failure = failure_with_skipped_sync_of("raft-snapshot.tmp")
        .expect("skipping the raft-snapshot temporary's sync went unnoticed");
    assert!(
        failure.contains("open: raft-snapshot file /log/raft-snapshot is unusable"),
        "{failure}"
    );
}
