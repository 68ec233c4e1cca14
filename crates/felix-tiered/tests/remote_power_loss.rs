//! A remote fault and a local power loss in one offload: one put of the
//! pass (each in turn, the manifest's last) is applied by the store and
//! then reported failed — or, for the manifest's put-if-absent, followed
//! by `object_store`'s retry — and the power is cut after every
//! file-system call the pass makes locally. Every disk state the crash could leave (felix-storage's crash
//! plans) is reopened over the store, offloaded again and swept; every
//! acknowledged record must then read back exactly once, in order, through
//! the tier, and agree wherever a copy of it is held.
//!
//! `cargo test -p felix-tiered --test remote_power_loss -- --nocapture`
//! prints the number of crash states checked.

mod common;
#[path = "../../felix-storage/tests/power_loss/plans.rs"]
mod plans;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use futures::TryStreamExt;

use felix_format::ShardKey;
use felix_io::FileSystem;
use felix_io::sim::SimFs;
use felix_storage::{ReadBound, Record, Shard};
use felix_tiered::{TierStore, TieredShard, stores};

use common::faults::{FaultStore, Op};
use common::sim::{DIR, copy_store, open_shard, runtime, shard_config, tier_config};
use plans::{Rng, plans};

const RECORDS: u64 = 40;

fn key() -> ShardKey {
    ShardKey::new("acme", "default", "orders", 9)
}

fn payload(offset: u64) -> Vec<u8> {
    format!("record-{offset:03}-{}", "q".repeat(30)).into_bytes()
}

/// What a run did before the power went out.
#[derive(Debug, Default)]
struct Model {
    acked: BTreeMap<u64, Vec<u8>>,
    /// Mutating file-system calls when the offload began.
    calls_before_offload: u64,
    /// Whether the offload returned `Ok`.
    offloaded: bool,
    /// Whether the put fault fired.
    fired: bool,
}

/// Appends [`RECORDS`] records, then offloads once over `store` with put
/// `nth` of the pass (among those on paths containing `fault.1`) faulted
/// by `fault.0`, the power cut after `cut` more file-system calls once the
/// offload begins.
fn run(fs: &SimFs, store: &TierStore, fault: (Op, &str), nth: usize, cut: Option<u64>) -> Model {
    let mut model = Model::default();
    let shard = open_shard(fs).expect("the fresh shard opens");
    for offset in 0..RECORDS {
        shard
            .append(&[Record::new(offset, payload(offset))])
            .wait()
            .expect("power is on while appending");
        model.acked.insert(offset, payload(offset));
    }
    let rt = runtime();
    let faulty = Arc::new(FaultStore::on(Arc::clone(store), fault.0, nth, fault.1));
    let tiered = rt
        .block_on(TieredShard::open(
            Arc::clone(&shard),
            key(),
            faulty.clone(),
            tier_config(1000),
        ))
        .expect("the tier opens over a healthy store");
    model.calls_before_offload = fs.mutating_calls();
    if let Some(cut) = cut {
        fs.cut_power_after(cut);
    }
    model.offloaded = rt.block_on(tiered.offload()).is_ok();
    model.fired = faulty.fired();
    model
}

/// Reopens the crashed disk over `store`, offloads again and sweeps, then
/// holds every copy of every record to the model.
fn check(crashed: &SimFs, store: &TierStore, model: &Model) -> Result<(), String> {
    let rt = runtime();
    let shard = open_shard(crashed).map_err(|e| format!("shard open: {e}"))?;
    let tiered = rt
        .block_on(TieredShard::open(
            Arc::clone(&shard),
            key(),
            store.clone(),
            tier_config(1000),
        ))
        .map_err(|e| format!("tier open: {e}"))?;
    rt.block_on(tiered.offload())
        .map_err(|e| format!("second offload: {e}"))?;
    rt.block_on(tiered.sweep())
        .map_err(|e| format!("sweep: {e}"))?;
    let manifest = tiered.manifest();
    let segment_objects = rt
        .block_on(
            store
                .list(None)
                .try_filter(|m| futures::future::ready(m.location.as_ref().contains("/segments/")))
                .try_collect::<Vec<_>>(),
        )
        .map_err(|e| format!("list: {e}"))?
        .len();
    if segment_objects != 3 * manifest.segments.len() {
        return Err(format!(
            "{segment_objects} segment objects after the sweep, the manifest lists {} segments",
            manifest.segments.len()
        ));
    }
    let local = shard.offsets().base..shard.offsets().written;
    let remote = tiered.remote_range();
    // Each copy held agrees with what was acknowledged.
    for offset in local.clone() {
        let records = shard
            .read(offset, 1, ReadBound::Committed)
            .map_err(|e| format!("local read {offset}: {e}"))?;
        let r = records
            .first()
            .ok_or_else(|| format!("nothing local at {offset}"))?;
        if model
            .acked
            .get(&offset)
            .is_some_and(|a| *a != r.payload[..])
        {
            return Err(format!("local copy of {offset} differs"));
        }
    }
    // Remotely: a tier over an empty shard that starts where the remote
    // copy ends, so each read of the remote range is served by the store.
    let beyond = Arc::new(
        Shard::options(Path::new(DIR))
            .file_system(FileSystem::new(SimFs::new()))
            .config(shard_config())
            .initial_offset(remote.end)
            .open()
            .map_err(|e| format!("empty shard: {e}"))?,
    );
    let remote_only = rt
        .block_on(TieredShard::open(
            beyond,
            key(),
            store.clone(),
            tier_config(1000),
        ))
        .map_err(|e| format!("remote-only open: {e}"))?;
    let mut at = remote.start;
    while at < remote.end {
        let records = rt
            .block_on(remote_only.read(at, 1 << 16))
            .map_err(|e| format!("remote read {at}: {e}"))?;
        if records.is_empty() {
            return Err(format!("nothing remote at {at}"));
        }
        for r in records.iter().take_while(|r| r.offset < remote.end) {
            if r.offset != at || model.acked.get(&at).is_some_and(|a| *a != r.payload[..]) {
                return Err(format!("remote copy at {at}: offset {}", r.offset));
            }
            at += 1;
        }
    }
    // Through the tier, from the first offset: each record once, in order.
    let mut at = 0;
    while at < local.end {
        let records = rt
            .block_on(tiered.read(at, 1 << 16))
            .map_err(|e| format!("read {at}: {e}"))?;
        if records.is_empty() {
            return Err(format!("nothing at {at}"));
        }
        for r in records {
            if r.offset != at {
                return Err(format!("asked for {at} onwards, got {}", r.offset));
            }
            if model.acked.get(&at).is_some_and(|a| *a != r.payload[..]) {
                return Err(format!("the tier's read of {at} differs"));
            }
            at += 1;
        }
    }
    if at < RECORDS {
        return Err(format!("acknowledged offsets {at}..{RECORDS} are gone"));
    }
    Ok(())
}

/// What one sweep checked.
#[derive(Debug, Default)]
struct Counts {
    /// Puts of the pass faulted in turn.
    puts: usize,
    states: u64,
    /// Whether the uncut pass succeeded, by the put faulted.
    offloaded: Vec<bool>,
}

/// Faults each put of an offload pass on a path containing `on` with `op`
/// in turn, cuts the power after each local file-system call of the pass,
/// and checks every state.
fn sweep(op: Op, on: &str, rng: &mut Rng) -> Counts {
    let mut counts = Counts::default();
    for nth in 0.. {
        let uncut_fs = SimFs::new();
        let uncut = run(&uncut_fs, &stores::in_memory(), (op, on), nth, None);
        if !uncut.fired {
            break;
        }
        counts.puts += 1;
        let local_calls = uncut_fs.mutating_calls() - uncut.calls_before_offload;
        counts.offloaded.push(uncut.offloaded);
        for cut in 0..=local_calls {
            let fs = SimFs::new();
            let store = stores::in_memory();
            let model = run(&fs, &store, (op, on), nth, Some(cut));
            for plan in plans(&fs, rng) {
                counts.states += 1;
                let crashed = fs.crash(&plan);
                check(&crashed, &copy_store(&store), &model).unwrap_or_else(|e| {
                    panic!(
                        "{op:?} on put #{nth}, power cut after {cut} calls of the offload, {plan:?}: {e}"
                    )
                });
            }
        }
    }
    counts
}

#[test]
fn offload_put_applied_then_failed_and_power_loss_lose_no_record() {
    let mut rng = Rng(0x35A1);
    let counts = sweep(Op::AppliedPut, "", &mut rng);
    println!("applied-then-failed puts: {counts:?}");
    // Three puts a segment, then the manifest's. A segment put reported
    // failed fails the pass (its upload is an orphan the sweep removes);
    // the manifest's is read back as this writer's own, and the pass goes
    // on to delete locally.
    assert!(counts.puts >= 4 && counts.puts % 3 == 1, "{counts:?}");
    let mut expected = vec![false; counts.puts - 1];
    expected.push(true);
    assert_eq!(counts.offloaded, expected);
    assert!(counts.states > 7_000, "{counts:?}");
}

#[test]
fn offload_put_applied_then_retried_and_power_loss_lose_no_record() {
    let mut rng = Rng(0x35A2);
    // The manifest's put only: a retried plain put of a segment is a
    // plain success, the same pass as an unfaulted one (faults.rs sweeps
    // it over every put).
    let counts = sweep(Op::RetriedPut, "/manifest/", &mut rng);
    println!("applied-then-retried manifest put: {counts:?}");
    // The retried put-if-absent finds this writer's own bytes: success,
    // and the pass goes on to delete locally.
    assert_eq!(counts.offloaded, vec![true]);
    assert!(counts.states > 4_500, "{counts:?}");
}
