//! Simulated power loss through a shard's delete: a store holding two
//! shards deletes one, creates it again under the same key and closes; the
//! power is cut after every file-system call from the delete on, every
//! disk state the crash could leave (the plans of the main sweep,
//! `power_loss.rs`) is opened as a store, and the deleted shard must be
//! whole (every acknowledged record of the old shard, or of the new one
//! once the delete returned) or gone — never half — while the other shard
//! keeps everything acknowledged, and no tombstone survives the open.

#[path = "power_loss/plans.rs"]
mod plans;

use std::collections::BTreeMap;
use std::path::Path;

use felix_format::{ShardKey, parse_tombstone_name};
use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_io::{FileSystem, Vfs};
use felix_storage::{
    Durability, Preallocation, ReadBound, Record, StorageError, Store, StoreConfig,
};

use plans::{Rng, plans};

const ROOT: &str = "/root";

fn config() -> StoreConfig {
    StoreConfig {
        // A few records a segment, so the doomed shard has several files
        // and losing some of them would show as a gap or a missing head.
        segment_size_bytes: 160,
        index_spacing_bytes: 64,
        preallocate: Preallocation::Off,
        durability: Durability::OnCommit,
        writeback_bytes: None,
        ..StoreConfig::default()
    }
}

fn doomed() -> ShardKey {
    ShardKey::new("acme", "default", "orders", 0)
}

fn kept() -> ShardKey {
    ShardKey::new("acme", "default", "orders", 1)
}

/// What the workload got acknowledged, for the check.
#[derive(Debug, Default, Clone)]
struct Model {
    /// Acknowledged records of the kept shard, by offset.
    kept: BTreeMap<u64, Vec<u8>>,
    /// Of the doomed shard before its delete.
    old: BTreeMap<u64, Vec<u8>>,
    /// Of the shard created again under its key.
    new: BTreeMap<u64, Vec<u8>>,
    /// Everything ever appended, acknowledged or not, by shard name.
    appended: BTreeMap<(&'static str, u64), Vec<u8>>,
    /// Whether `delete_shard` was called, and whether it returned `Ok`.
    delete_called: bool,
    deleted: bool,
    /// Whether the second `create_shard` returned `Ok`.
    recreated: bool,
    /// Mutating calls before the delete began.
    calls_before_delete: u64,
}

fn payload(which: &str, offset: u64) -> Vec<u8> {
    format!("{which}-{offset}-{}", "x".repeat(20)).into_bytes()
}

/// Appends `count` records one batch each, noting what was acknowledged.
fn append(
    shard: &felix_storage::Shard,
    which: &'static str,
    count: u64,
    appended: &mut BTreeMap<(&'static str, u64), Vec<u8>>,
    acked: &mut BTreeMap<u64, Vec<u8>>,
) -> bool {
    for _ in 0..count {
        let offset = shard.offsets().written;
        let p = payload(which, offset);
        appended.insert((which, offset), p.clone());
        if shard
            .append(&[Record::new(offset, p.clone())])
            .wait()
            .is_err()
        {
            return false;
        }
        acked.insert(offset, p);
    }
    true
}

/// Runs the workload until it ends or the power does.
fn run(fs: &SimFs) -> Model {
    let mut model = Model::default();
    let handle = FileSystem::new(fs.clone());
    let Ok(store) = Store::options(Path::new(ROOT))
        .config(config())
        .file_system(handle.clone())
        .open()
    else {
        return model;
    };
    let (Ok(old), Ok(kept)) = (store.create_shard(&doomed()), store.create_shard(&kept())) else {
        return model;
    };
    if !append(&old, "old", 8, &mut model.appended, &mut model.old)
        || !append(&kept, "kept", 3, &mut model.appended, &mut model.kept)
    {
        return model;
    }
    model.calls_before_delete = fs.mutating_calls();
    model.delete_called = true;
    if store.delete_shard(&doomed()).is_err() {
        return model;
    }
    model.deleted = true;
    let Ok(new) = store.create_shard(&doomed()) else {
        return model;
    };
    model.recreated = true;
    if !append(&new, "new", 2, &mut model.appended, &mut model.new) {
        return model;
    }
    let _ = store.close();
    model
}

/// Reads every record of `shard` as (offset, payload): offsets contiguous
/// from the log start to its end, every read returning a record (so at
/// most one read a record).
fn records(shard: &felix_storage::Shard) -> Result<BTreeMap<u64, Vec<u8>>, String> {
    let mut out = BTreeMap::new();
    let mut next = shard.offsets().base;
    let end = shard.offsets().written;
    while next < end {
        let batch = shard
            .read(next, 1 << 20, ReadBound::Committed)
            .map_err(|e| format!("read: {e}"))?;
        if batch.is_empty() {
            return Err(format!(
                "a read at {next} returned nothing, below the end {end}"
            ));
        }
        for r in batch {
            if r.offset != next || next >= end {
                return Err(format!(
                    "offsets not contiguous: a read returned {} where {next} was next (the log ends before {end})",
                    r.offset
                ));
            }
            next += 1;
            out.insert(r.offset, r.payload.to_vec());
        }
    }
    Ok(out)
}

/// Whether `found` holds every acknowledged record, from offset 0, and
/// nothing that was never appended to that shard.
fn whole(
    found: &BTreeMap<u64, Vec<u8>>,
    base: u64,
    acked: &BTreeMap<u64, Vec<u8>>,
    which: &str,
    appended: &BTreeMap<(&'static str, u64), Vec<u8>>,
) -> Result<(), String> {
    if base != 0 {
        return Err(format!("{which}: the log begins at {base}, not 0"));
    }
    for (offset, payload) in acked {
        if found.get(offset) != Some(payload) {
            return Err(format!("{which}: acknowledged offset {offset} is missing"));
        }
    }
    for (offset, payload) in found {
        if appended
            .iter()
            .all(|((w, o), p)| (*w, o, p) != (which, offset, payload))
        {
            return Err(format!(
                "{which}: offset {offset} holds a record never appended"
            ));
        }
    }
    Ok(())
}

/// Opens a crashed disk as a store and holds it to the model.
fn check(crashed: &SimFs, model: &Model) -> Result<(), String> {
    let store = Store::options(Path::new(ROOT))
        .config(config())
        .file_system(FileSystem::new(crashed.clone()))
        .open()
        .map_err(|e| format!("store open: {e}"))?;
    let leftovers: Vec<String> = crashed
        .list_dir(Path::new(ROOT))
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter_map(|e| e.name.into_string().ok())
        .filter(|n| parse_tombstone_name(n).is_some())
        .collect();
    if !leftovers.is_empty() {
        return Err(format!("tombstones survived the open: {leftovers:?}"));
    }
    let kept = store
        .open_shard(&kept())
        .map_err(|e| format!("kept shard: {e}"))?;
    whole(
        &records(&kept)?,
        kept.offsets().base,
        &model.kept,
        "kept",
        &model.appended,
    )?;
    match store.open_shard(&doomed()) {
        Err(StorageError::ShardNotFound { .. }) if model.delete_called && !model.recreated => {
            Ok(())
        }
        Err(err) => Err(format!("doomed shard: {err}")),
        Ok(shard) => {
            let found = records(&shard)?;
            let base = shard.offsets().base;
            let as_old =
                (!model.deleted).then(|| whole(&found, base, &model.old, "old", &model.appended));
            let as_new = model
                .delete_called
                .then(|| whole(&found, base, &model.new, "new", &model.appended));
            match (as_old, as_new) {
                (Some(Ok(())), _) | (_, Some(Ok(()))) => Ok(()),
                (old, new) => Err(format!(
                    "the doomed shard is half there: {} records; as the old shard: {old:?}; as the new one: {new:?}",
                    found.len()
                )),
            }
        }
    }
}

/// What a sweep checked: crash states, and in how many the shard was gone.
struct Swept {
    states: u64,
    gone: u64,
    calls: (u64, u64),
}

/// Cuts the power after every call from the delete on, with `faults`
/// injected, and checks every crash state; the first failure is returned.
fn sweep(faults: &[Fault]) -> Result<Swept, String> {
    let fresh = || {
        let fs = SimFs::new();
        for fault in faults {
            fs.inject(fault.clone());
        }
        fs
    };
    let uncut_fs = fresh();
    let uncut = run(&uncut_fs);
    assert!(uncut.recreated && uncut.new.len() == 2, "{uncut:?}");
    let total = uncut_fs.mutating_calls();
    let mut rng = Rng(0x5EED);
    let mut swept = Swept {
        states: 0,
        gone: 0,
        calls: (uncut.calls_before_delete, total),
    };
    for cut in uncut.calls_before_delete..=total {
        let fs = fresh();
        fs.cut_power_after(cut);
        let model = run(&fs);
        for plan in plans(&fs, &mut rng) {
            swept.states += 1;
            let crashed = fs.crash(&plan);
            check(&crashed, &model).map_err(|e| {
                format!(
                    "power cut after {cut} calls, {plan:?}: {e}\npending: {:?}",
                    fs.pending()
                )
            })?;
            let handle = FileSystem::new(crashed);
            if let Ok(store) = Store::options(Path::new(ROOT))
                .config(config())
                .file_system(handle.clone())
                .open()
                && matches!(
                    store.open_shard(&doomed()),
                    Err(StorageError::ShardNotFound { .. })
                )
            {
                swept.gone += 1;
            }
        }
    }
    Ok(swept)
}

#[test]
fn power_loss_through_a_delete_leaves_the_shard_whole_or_gone() {
    let swept = sweep(&[]).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "power loss through a delete: calls {}..={}, {} crash states checked, the shard gone in {}",
        swept.calls.0, swept.calls.1, swept.states, swept.gone
    );
    // About 5% below the 5,478 states (the shard gone in 3,003) it checked
    // when this was set, so a sweep whose runs end early falls short.
    assert!(
        swept.states >= 5_200,
        "the sweep checked too little: {}",
        swept.states
    );
    assert!(
        swept.gone > 0 && swept.gone < swept.states,
        "both outcomes must occur: {} of {}",
        swept.gone,
        swept.states
    );
}

/// The root's sync between the rename and the first removal is what makes
/// the delete atomic: with it skipped (reporting success, making nothing
/// durable), some crash state leaves half a shard under its own name.
#[test]
fn power_loss_check_catches_a_skipped_root_sync_after_the_tombstone_rename() {
    let fs = SimFs::new();
    run(&fs);
    let log = fs.log();
    let rename = log
        .iter()
        .position(|e| e.op == "rename" && e.path.to_string_lossy().ends_with(".deleting"))
        .expect("the delete renames to a tombstone");
    assert_eq!(
        (log[rename + 1].op, log[rename + 1].path.as_path()),
        ("sync_dir", Path::new(ROOT))
    );
    // The (skip + 1)-th directory sync under the root is that one.
    let skip = log[..=rename]
        .iter()
        .filter(|e| e.op == "sync_dir" && e.path.starts_with(ROOT))
        .count() as u32;
    let fault = Fault {
        op: FaultOp::SyncDir,
        path_contains: ROOT.into(),
        skip,
        effect: FaultEffect::SyncSkipped,
    };
    let Err(failure) = sweep(&[fault]) else {
        panic!("skipping the root's sync after the rename went unnoticed");
    };
    assert!(failure.contains("half there"), "{failure}");
    println!("skipping the root's sync after the rename: {failure}");
}
