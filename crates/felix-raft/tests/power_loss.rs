//! Simulated power loss through a Raft log's life: appends across terms, a
//! vote, a truncation, purges (one inside the log, one of its every entry)
//! and more appends. The power is cut after every file-system call, every
//! disk state the crash could leave (felix-storage's plans: subsets of the
//! pending writes, torn writes, lost blocks) is opened as a log, and it
//! must hold:
//! - the vote saved last (or, if a save was under way, the one it saved);
//! - the last purged id saved last (or the one a purge under way saved),
//!   with the log beginning just after it;
//! - every entry reported durable and not purged, byte for byte;
//! - nothing never appended, and nothing a finished truncation removed.

#[path = "../../felix-storage/tests/power_loss/plans.rs"]
mod plans;

use std::collections::{BTreeMap, BTreeSet};

use felix_io::FileSystem;
use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_raft::{FelixLogStore, TypeConfig};
use felix_storage::{Durability, Preallocation, StoreConfig};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftLogReader, Vote};

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

fn id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 0), index)
}

fn entry(term: u64, index: u64) -> Entry<TypeConfig> {
    Entry {
        log_id: id(term, index),
        payload: EntryPayload::Normal(format!("t{term}-{index}").into_bytes()),
    }
}

/// An entry as the check compares it.
type Seen = (LogId<u64>, Vec<u8>);

fn seen(e: &Entry<TypeConfig>) -> Seen {
    let payload = match &e.payload {
        EntryPayload::Normal(p) => p.clone(),
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
    vote: Option<Vote<u64>>,
    vote_under_way: Option<Vote<u64>>,
    purged: Option<LogId<u64>>,
    purge_under_way: Option<LogId<u64>>,
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

async fn vote(log: &mut FelixLogStore<TypeConfig>, m: &mut Model, vote: Vote<u64>) -> bool {
    m.vote_under_way = Some(vote);
    if log.save_vote(&vote).await.is_err() {
        return false;
    }
    m.vote = Some(vote);
    m.vote_under_way = None;
    true
}

async fn purge(log: &mut FelixLogStore<TypeConfig>, m: &mut Model, upto: LogId<u64>) -> bool {
    m.purge_under_way = Some(upto);
    if log.purge(upto).await.is_err() {
        return false;
    }
    m.purged = Some(upto);
    m.purge_under_way = None;
    m.acked.retain(|&i, _| i > upto.index);
    true
}

async fn truncate(log: &mut FelixLogStore<TypeConfig>, m: &mut Model, at: LogId<u64>) -> bool {
    m.truncate_under_way = Some(at.index);
    if log.truncate(at).await.is_err() {
        return false;
    }
    m.truncate_under_way = None;
    let removed = m.acked.split_off(&at.index);
    m.stale.extend(removed.into_values());
    true
}

/// Runs the workload until it ends or the power does.
async fn run(fs: &SimFs) -> Model {
    let mut m = Model::default();
    let Ok(mut log) = FelixLogStore::<TypeConfig>::options(DIR)
        .config(config())
        .file_system(FileSystem::new(fs.clone()))
        .open()
    else {
        return m;
    };
    let log = &mut log;
    let m_ref = &mut m;
    let ran = append(log, m_ref, 1, 0..6).await
        && vote(log, m_ref, Vote::new(2, 1)).await
        && append(log, m_ref, 2, 6..10).await
        && truncate(log, m_ref, id(2, 8)).await
        && append(log, m_ref, 3, 8..11).await
        && purge(log, m_ref, id(1, 3)).await
        && vote(log, m_ref, Vote::new_committed(3, 1)).await
        && purge(log, m_ref, id(3, 10)).await
        && append(log, m_ref, 3, 11..13).await
        && log.close().is_ok();
    m.finished = ran;
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
    let from = purged.map_or(0, |p| p.index + 1);
    if log.shard().base_offset() != from {
        return Err(format!(
            "the log begins at {}, not just after the purged {purged:?}",
            log.shard().base_offset()
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

/// Cuts the power after every call, with `faults` injected, and checks
/// every crash state: the number checked, or the first failure.
async fn sweep(faults: &[Fault]) -> Result<(u64, u64), String> {
    let fresh = || {
        let fs = SimFs::new();
        for fault in faults {
            fs.inject(fault.clone());
        }
        fs
    };
    let uncut_fs = fresh();
    let uncut = run(&uncut_fs).await;
    assert!(uncut.finished, "{uncut:?}");
    let total = uncut_fs.mutating_calls();
    let mut rng = Rng(0x5EED);
    let mut states = 0u64;
    for cut in 0..=total {
        let fs = fresh();
        fs.cut_power_after(cut);
        let model = run(&fs).await;
        for plan in plans(&fs, &mut rng) {
            states += 1;
            let crashed = fs.crash(&plan);
            check(&crashed, &model).await.map_err(|e| {
                format!(
                    "power cut after {cut} of {total} calls, {plan:?}: {e}\npending: {:?}",
                    fs.pending()
                )
            })?;
        }
    }
    Ok((total, states))
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
    let (total, states) = runtime()
        .block_on(sweep(&[]))
        .unwrap_or_else(|e| panic!("{e}"));
    println!("power loss through a Raft log: {total} calls, {states} crash states checked");
    assert!(states > 500, "the sweep checked too little: {states}");
}

/// The raft-state temporary's sync is what makes a saved vote durable
/// before the rename: with it skipped (reporting success, making nothing
/// durable), some crash state leaves the name on a file without its bytes,
/// and the vote that was saved is lost (the log refuses to open on it).
#[test]
fn power_loss_check_catches_a_skipped_sync_of_the_raft_state_temporary() {
    let fault = Fault {
        op: FaultOp::SyncFile,
        path_contains: "raft-state.tmp".into(),
        skip: 0,
        effect: FaultEffect::SyncSkipped,
    };
    let Err(failure) = runtime().block_on(sweep(&[fault])) else {
        panic!("skipping the raft-state temporary's sync went unnoticed");
    };
    assert!(
        failure.contains("open: raft-state file /log/raft-state is unusable"),
        "{failure}"
    );
    println!("skipping the raft-state temporary's sync: {failure}");
}
