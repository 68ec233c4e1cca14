//! Simulated power loss: random workloads are crashed between every two
//! file-system calls, and every disk state the crash could leave (any subset
//! of the unsynced operations, one write torn or left as zeros) is reopened
//! and checked against what was acknowledged.
//!
//! `FELIX_POWER_LOSS_SEEDS=N cargo test -p felix-storage --test power_loss
//! -- --nocapture` runs N seeds per durability policy instead of CI's budget.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use felix_epochs::EpochHistory;
use felix_io::FileSystem;
use felix_io::sim::{CrashPlan, Fault, FaultEffect, FaultOp, SimFs, Tear};
use felix_storage::{Durability, Record, Retention, Shard, StoreConfig};

const DIR: &str = "/shard";
/// Subsets are enumerated in full up to this many pending operations.
const EXHAUSTIVE_PENDING: usize = 6;
/// Plans sampled when more operations are pending.
const SAMPLED_PLANS: usize = 48;

#[derive(Debug, Clone, Copy)]
enum Op {
    Append {
        count: u64,
        len: usize,
    },
    Sync,
    Truncate {
        back: u64,
    },
    Retention {
        max_bytes: u64,
    },
    Generation,
    Reopen,
    /// `Shard::close` (a clean-shutdown file), then keep writing: the next
    /// open meets a record the later writes made stale.
    Close,
    /// `Shard::close`, then reopen trusting the record.
    CloseReopen,
}

/// A small deterministic generator (xorshift64*), so every failure names a
/// seed that reproduces it.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn workload(seed: u64, len: usize) -> Vec<Op> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..len)
        .map(|_| match rng.below(13) {
            0..=5 => Op::Append {
                count: 1 + rng.below(3),
                len: rng.below(60) as usize,
            },
            6 => Op::Sync,
            7 => Op::Truncate { back: rng.below(4) },
            8 => Op::Retention {
                max_bytes: 300 + rng.below(600),
            },
            9 => Op::Generation,
            10 => Op::Reopen,
            11 => Op::Close,
            _ => Op::CloseReopen,
        })
        .collect()
}

fn config(durability: Durability, retention_bytes: Option<u64>) -> StoreConfig {
    StoreConfig {
        segment_size_bytes: 300,
        index_spacing_bytes: 64,
        preallocate: false,
        durability,
        writeback_bytes: None,
        retention: Retention {
            max_bytes: retention_bytes,
            ..Retention::default()
        },
        repair_checksum_tail: false,
    }
}

fn payload(seed: u64, serial: u64, len: usize) -> Vec<u8> {
    let mut p = format!("{seed}:{serial}:").into_bytes();
    p.resize(len.max(p.len()), b'~');
    p
}

/// What the workload did, as far as a crash check needs to know.
#[derive(Debug, Default)]
struct Model {
    /// The live log as the workload saw it: offset → payload.
    log: BTreeMap<u64, Vec<u8>>,
    /// Every payload ever appended at each offset (a record may be replaced
    /// after a truncation), so nothing never appended can pass as data.
    appended: BTreeMap<u64, BTreeSet<Vec<u8>>>,
    /// Records acknowledged as durable and not since given up by the
    /// workload (truncated or retained away).
    acked: BTreeMap<u64, Vec<u8>>,
    /// Histories the epochs file may hold: the last one stored, and one
    /// whose store was interrupted.
    histories: Vec<EpochHistory>,
    /// Mutating file-system calls made before the power went out.
    calls: u64,
}

impl Model {
    fn ack_below(&mut self, durable: u64) {
        for (&offset, payload) in self.log.range(..durable) {
            self.acked.insert(offset, payload.clone());
        }
    }

    fn forget_from(&mut self, offset: u64) {
        self.log.split_off(&offset);
        self.acked.split_off(&offset);
    }

    fn forget_below(&mut self, offset: u64) {
        self.log = self.log.split_off(&offset);
        self.acked = self.acked.split_off(&offset);
    }
}

/// Runs `ops` on `fs` until they end or the power does. Returns what a crash
/// check must hold the disk to.
fn run(fs: &SimFs, seed: u64, durability: Durability, ops: &[Op]) -> Model {
    let handle = FileSystem::new(fs.clone());
    let mut model = Model {
        histories: vec![EpochHistory::new()],
        ..Model::default()
    };
    let Ok(mut shard) = Shard::open_in(&handle, Path::new(DIR), "sim", config(durability, None), 0)
    else {
        return model;
    };
    let mut generation = 0;
    let mut serial = 0;
    for op in ops {
        let ok = match *op {
            Op::Append { count, len } => {
                let next = shard.next_offset();
                let batch: Vec<_> = (0..count)
                    .map(|i| {
                        serial += 1;
                        (next + i, payload(seed, serial, len))
                    })
                    .collect();
                for (offset, p) in &batch {
                    model.appended.entry(*offset).or_default().insert(p.clone());
                    model.log.insert(*offset, p.clone());
                }
                let records: Vec<_> = batch
                    .iter()
                    .map(|(o, p)| Record::new(*o, p.clone()))
                    .collect();
                shard.append(&records).is_ok()
            }
            Op::Sync => shard.sync().is_ok(),
            Op::Truncate { back } => {
                let next = shard.next_offset();
                let to = next.saturating_sub(back).max(shard.base_offset());
                // From the call on, records at or above `to` may be gone.
                model.forget_from(to);
                // Truncating to the log end cuts nothing, history included.
                if to < next {
                    let mut cut = model.histories.last().cloned().unwrap_or_default();
                    cut.truncate_from(to);
                    model.histories.push(cut);
                }
                shard.truncate_to(to).is_ok()
            }
            Op::Retention { max_bytes } => {
                drop(shard);
                let Ok(reopened) = Shard::open_in(
                    &handle,
                    Path::new(DIR),
                    "sim",
                    config(durability, Some(max_bytes)),
                    0,
                ) else {
                    break;
                };
                shard = reopened;
                // Until it returns, anything below the active segment may go.
                let active_base = shard.segments().last().map_or(0, |s| s.base_offset);
                let result = shard.apply_retention();
                match result {
                    Ok(outcome) => {
                        model.forget_below(outcome.base_offset);
                        let mut pruned = model.histories.last().cloned().unwrap_or_default();
                        if pruned.truncate_before(outcome.base_offset) > 0 {
                            model.histories.push(pruned);
                        }
                        true
                    }
                    Err(_) => {
                        model.forget_below(active_base);
                        false
                    }
                }
            }
            Op::Generation => {
                generation += 1;
                let mut next = model.histories.last().cloned().unwrap_or_default();
                if next.record(generation, shard.next_offset()).is_ok() {
                    model.histories.push(next);
                }
                shard.begin_generation(generation).is_ok()
            }
            Op::Close => shard.close().is_ok(),
            Op::CloseReopen | Op::Reopen => {
                if matches!(op, Op::CloseReopen) {
                    if shard.close().is_err() {
                        break;
                    }
                    model.ack_below(shard.durable_offset());
                }
                drop(shard);
                match Shard::open_in(&handle, Path::new(DIR), "sim", config(durability, None), 0) {
                    Ok(reopened) => {
                        shard = reopened;
                        true
                    }
                    Err(_) => break,
                }
            }
        };
        if !ok {
            break;
        }
        model.ack_below(shard.durable_offset());
    }
    // Only the last stored history and one interrupted store are possible.
    let keep = model.histories.len().saturating_sub(2);
    model.histories.drain(..keep);
    model.calls = fs.mutating_calls();
    model
}

/// Reopens a crashed disk and checks it against the model.
fn check(crashed: &SimFs, model: &Model) -> Result<(), String> {
    let handle = FileSystem::new(crashed.clone());
    let shard = Shard::open_in(
        &handle,
        Path::new(DIR),
        "sim",
        config(Durability::OnCommit, None),
        0,
    )
    .map_err(|e| format!("open failed: {e}"))?;
    let (base, next) = (shard.base_offset(), shard.next_offset());
    let mut offset = base;
    while offset < next {
        let records = shard
            .read(offset, 1 << 20)
            .map_err(|e| format!("read {offset}: {e}"))?;
        for r in records {
            if r.offset != offset {
                return Err(format!(
                    "offsets not contiguous: {} after {}",
                    r.offset, offset
                ));
            }
            let known = model
                .appended
                .get(&offset)
                .is_some_and(|v| v.contains(&r.payload[..]));
            if !known {
                return Err(format!(
                    "offset {offset} holds bytes that were never appended there"
                ));
            }
            offset += 1;
        }
    }
    for (&o, p) in &model.acked {
        if o < base {
            return Err(format!("acknowledged offset {o} lost below base {base}"));
        }
        if o >= next {
            return Err(format!("acknowledged offset {o} lost (next offset {next})"));
        }
        let got = shard.read(o, 1).map_err(|e| format!("read {o}: {e}"))?;
        if got.first().map(|r| &r.payload[..]) != Some(&p[..]) {
            return Err(format!("acknowledged offset {o} altered"));
        }
    }
    let history = shard.generations();
    let fits = model.histories.iter().any(|h| {
        let mut h = h.clone();
        h.truncate_from(next + 1);
        let mut got = history.clone();
        got.truncate_before(base);
        h.truncate_before(base);
        h == got
    });
    if !fits {
        return Err(format!(
            "epochs history {history:?} is neither the old nor the new one {:?}",
            model.histories
        ));
    }
    Ok(())
}

/// The crash plans to try for `pending` operations: every subset when few,
/// a seeded sample otherwise; each with the last kept write whole, torn
/// after its first byte, torn in the middle, or left as zeros.
fn plans(fs: &SimFs, rng: &mut Rng) -> Vec<CrashPlan> {
    let pending = fs.pending();
    let n = pending.len();
    let subsets: Vec<Vec<bool>> = if n <= EXHAUSTIVE_PENDING {
        (0..1u64 << n)
            .map(|bits| (0..n).map(|i| bits >> i & 1 == 1).collect())
            .collect()
    } else {
        let mut s = vec![vec![false; n], vec![true; n]];
        s.extend((0..SAMPLED_PLANS).map(|_| (0..n).map(|_| rng.below(2) == 1).collect()));
        s
    };
    let mut out = Vec::new();
    for keep in subsets {
        let last_write = (0..n)
            .rev()
            .find(|&i| keep[i] && pending[i].kind == "write");
        out.push(CrashPlan {
            keep: keep.clone(),
            tear: None,
        });
        if let Some(i) = last_write {
            let len = pending[i].len;
            for tear in [Tear::Prefix(1), Tear::Prefix(len / 2), Tear::Zeros] {
                out.push(CrashPlan {
                    keep: keep.clone(),
                    tear: Some((i, tear)),
                });
            }
        }
    }
    out
}

/// Runs one seed: the workload crashed after every call count, every plan
/// checked. Returns the crash states checked, or the first failure.
fn sweep(seed: u64, durability: Durability, faults: &[Fault]) -> Result<u64, String> {
    let ops = workload(seed, 14);
    let total = {
        let fs = SimFs::new();
        run(&fs, seed, durability, &ops).calls
    };
    let mut rng = Rng(seed | 1);
    let mut states = 0;
    for cut in 0..=total {
        let fs = SimFs::new();
        for fault in faults {
            fs.inject(fault.clone());
        }
        fs.cut_power_after(cut);
        let model = run(&fs, seed, durability, &ops);
        for plan in plans(&fs, &mut rng) {
            states += 1;
            check(&fs.crash(&plan), &model).map_err(|e| {
                format!("seed {seed} {durability:?}, power cut after {cut} calls, {plan:?}: {e}\nworkload: {ops:?}\npending: {:?}", fs.pending())
            })?;
        }
    }
    Ok(states)
}

const POLICIES: [Durability; 3] = [
    Durability::OnCommit,
    Durability::None,
    Durability::Periodic(Duration::from_secs(3600)),
];

#[test]
fn power_loss_at_every_call_loses_nothing_acknowledged() {
    let seeds: u64 = std::env::var("FELIX_POWER_LOSS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let mut states = 0;
    for durability in POLICIES {
        for seed in 0..seeds {
            states += sweep(seed, durability, &[]).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    println!(
        "power loss: {seeds} seeds x {} policies, {states} crash states checked",
        POLICIES.len()
    );
    assert!(states > 1000, "the sweep checked too little: {states}");
}

/// Makes every sync matching `op` and `path_contains` report success while
/// making nothing durable.
fn skip_syncs(op: FaultOp, path_contains: &str) -> Vec<Fault> {
    (0..10_000)
        .map(|_| Fault {
            op,
            path_contains: path_contains.into(),
            skip: 0,
            effect: FaultEffect::SyncSkipped,
        })
        .collect()
}

/// Each sync the code makes is needed: with it skipped, some crash state
/// breaks a promise, and the sweep says which.
#[test]
fn power_loss_check_catches_each_skipped_sync_site() {
    let sites = [
        ("segment data before an ack", FaultOp::SyncFile, ".log"),
        ("a new file's directory entry", FaultOp::SyncDir, DIR),
        (
            "the epochs temporary before its rename",
            FaultOp::SyncFile,
            "epochs.tmp",
        ),
    ];
    for (site, op, path) in sites {
        let faults = skip_syncs(op, path);
        let caught = (0..16).find_map(|seed| sweep(seed, Durability::OnCommit, &faults).err());
        let Some(failure) = caught else {
            panic!("skipping the sync of {site} went unnoticed")
        };
        println!("skipping the sync of {site}: {failure}");
    }
}
