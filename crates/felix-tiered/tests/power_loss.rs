//! Simulated power loss through the local half of an offload: once the
//! manifest listing the uploaded segments is durable in the store, the
//! offload moves the local log start (`delete_records_before`) and deletes
//! the segments below it (`apply_retention`). The power is cut after every
//! file-system call of those steps; every disk state the crash could leave
//! (the crash plans of felix-storage's sweep) is reopened, a second offload
//! pass runs over the same store, and every acknowledged record must be
//! readable locally, remotely or both — never in neither — with one payload
//! per offset wherever it is read. A crash in the middle of a segment's
//! removal may leave its index files without it; the reopen must remove
//! them, so no index is left without its segment.
//!
//! `cargo test -p felix-tiered --test power_loss -- --nocapture` prints the
//! number of crash states checked.

// The crash plans are felix-storage's own, so both sweeps try the same
// disks.
mod common;
#[path = "../../felix-storage/tests/power_loss/plans.rs"]
mod plans;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use felix_format::ShardKey;
use felix_io::FileSystem;
use felix_io::sim::SimFs;
use felix_storage::{ReadBound, Record, Shard};
use felix_tiered::{TierStore, TieredShard, stores};

use common::sim::{DIR, copy_store, open_shard, runtime, shard_config, tier_config};
use plans::{Rng, plans};

const RECORDS: u64 = 60;

fn key() -> ShardKey {
    ShardKey::new("acme", "default", "orders", 7)
}

fn payload(offset: u64) -> Vec<u8> {
    format!("record-{offset:03}-{}", "p".repeat(30)).into_bytes()
}

/// What the run did before the power went out.
#[derive(Debug, Default)]
struct Model {
    /// Acknowledged (durable) records.
    acked: BTreeMap<u64, Vec<u8>>,
    /// Mutating file-system calls when the offload began: every later
    /// call is one of its local steps (the uploads touch only the store).
    calls_before_offload: u64,
    /// Whether the offload returned `Ok`.
    offloaded: bool,
}

/// Appends [`RECORDS`] records, then offloads once over `store`, the power
/// cut after `cut` more file-system calls once the offload begins (the
/// shard's own background work makes the count before it vary a little
/// from run to run, so the cut is counted from the offload).
fn run(fs: &SimFs, store: &TierStore, cut: Option<u64>) -> Model {
    let mut model = Model::default();
    let Ok(shard) = open_shard(fs) else {
        return model;
    };
    for offset in 0..RECORDS {
        if shard
            .append(&[Record::new(offset, payload(offset))])
            .wait()
            .is_err()
        {
            return model;
        }
        model.acked.insert(offset, payload(offset));
    }
    let rt = runtime();
    let tiered = match rt.block_on(TieredShard::open(
        Arc::clone(&shard),
        key(),
        store.clone(),
        tier_config(1200),
    )) {
        Ok(t) => t,
        // The store is healthy and the shard open: only a bad
        // configuration fails here, and the sweep must not pass over it.
        Err(e) => panic!("tier open: {e}"),
    };
    model.calls_before_offload = fs.mutating_calls();
    if let Some(cut) = cut {
        fs.cut_power_after(cut);
    }
    model.offloaded = rt.block_on(tiered.offload()).is_ok();
    model
}

/// Reads `[from, to)` through `tiered` one offset at a time.
async fn read_each(
    tiered: &TieredShard,
    from: u64,
    to: u64,
) -> Result<BTreeMap<u64, Vec<u8>>, String> {
    let mut out = BTreeMap::new();
    for offset in from..to {
        let records = tiered
            .read(offset, 1)
            .await
            .map_err(|e| format!("read {offset}: {e}"))?;
        let first = records
            .first()
            .ok_or_else(|| format!("nothing at {offset}"))?;
        if first.offset != offset {
            return Err(format!("asked for {offset}, got {}", first.offset));
        }
        out.insert(offset, first.payload.to_vec());
    }
    Ok(out)
}

/// How the records of one checked crash state were spread.
#[derive(Debug, Default, Clone, Copy)]
struct Spread {
    /// Records held in both places after the reopen, before the second pass.
    both: u64,
    /// Whether the crash left index files without their segment.
    orphans_before_open: bool,
}

/// The index and time index files in the shard directory with no segment
/// beside them.
fn orphan_indexes(fs: &SimFs) -> Vec<String> {
    use felix_format::ShardFileName;
    use felix_io::Vfs;
    let entries = fs.list_dir(Path::new(DIR)).expect("list the shard");
    let names: Vec<ShardFileName> = entries
        .iter()
        .map(|e| ShardFileName::parse(&e.name.to_string_lossy()))
        .collect();
    let has_log = |id: u64| names.contains(&ShardFileName::Segment(id));
    names
        .iter()
        .filter_map(|n| match *n {
            ShardFileName::Index(id) | ShardFileName::TimeIndex(id) if !has_log(id) => {
                n.file_name().map(|f| f.as_str().to_owned())
            }
            _ => None,
        })
        .collect()
}

/// Opens the crashed disk over the same store, runs a second offload
/// pass, and holds every copy of every record to the model.
fn check(crashed: &SimFs, store: &TierStore, model: &Model) -> Result<Spread, String> {
    let rt = runtime();
    let orphans_before_open = !orphan_indexes(crashed).is_empty();
    let shard = open_shard(crashed).map_err(|e| format!("shard open: {e}"))?;
    // The open finished the removal the crash cut short.
    let orphans = orphan_indexes(crashed);
    if !orphans.is_empty() {
        return Err(format!(
            "index files without their segment after the open: {orphans:?}"
        ));
    }
    let tiered = rt
        .block_on(TieredShard::open(
            Arc::clone(&shard),
            key(),
            store.clone(),
            tier_config(1200),
        ))
        .map_err(|e| format!("tier open: {e}"))?;
    let remote = tiered.remote_range();
    let local = shard.offsets().base..shard.offsets().written;
    let spread = Spread {
        both: remote
            .end
            .min(local.end)
            .saturating_sub(remote.start.max(local.start)),
        orphans_before_open,
    };
    let second = rt
        .block_on(tiered.offload())
        .map_err(|e| format!("second offload: {e}"))?;
    let local = shard.offsets().base..shard.offsets().written;
    let remote = tiered.remote_range();
    if model.offloaded && local.start < remote.end.min(local.end) && !second.uploaded.is_empty() {
        return Err(format!("uploaded again: {second:?}"));
    }
    // Locally: the shard's own reads.
    let mut seen: BTreeMap<u64, Vec<Vec<u8>>> = BTreeMap::new();
    for offset in local.clone() {
        let records = shard
            .read(offset, 1, ReadBound::Committed)
            .map_err(|e| format!("local read {offset}: {e}"))?;
        let r = records
            .first()
            .ok_or_else(|| format!("nothing local at {offset}"))?;
        seen.entry(offset).or_default().push(r.payload.to_vec());
    }
    // Remotely: a tier over an empty shard that starts where the remote
    // copy ends (a later start would be records held nowhere, which a
    // tier refuses to open over), so each read of the remote range is
    // served by the store.
    let empty = SimFs::new();
    let beyond = Arc::new(
        Shard::options(Path::new(DIR))
            .file_system(FileSystem::new(empty))
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
            tier_config(1200),
        ))
        .map_err(|e| format!("remote-only open: {e}"))?;
    for (offset, p) in rt.block_on(read_each(&remote_only, remote.start, remote.end))? {
        seen.entry(offset).or_default().push(p);
    }
    // And through the tier itself, as a reader sees it.
    let through = rt.block_on(read_each(&tiered, remote.start.min(local.start), local.end))?;
    for (offset, acked) in &model.acked {
        let copies = seen.get(offset).map(Vec::as_slice).unwrap_or_default();
        if copies.is_empty() {
            return Err(format!(
                "acknowledged offset {offset} is neither local ({local:?}) nor remote ({remote:?})"
            ));
        }
        if let Some(other) = copies.iter().find(|c| *c != acked) {
            return Err(format!(
                "offset {offset} has a second version: {:?}",
                String::from_utf8_lossy(other)
            ));
        }
        if through.get(offset) != Some(acked) {
            return Err(format!("the tier's read of {offset} differs"));
        }
    }
    Ok(spread)
}

#[test]
fn power_loss_through_an_offloads_local_steps_loses_no_record() {
    let uncut_store = stores::in_memory();
    let uncut_fs = SimFs::new();
    let uncut = run(&uncut_fs, &uncut_store, None);
    assert!(uncut.offloaded, "the uncut offload failed");
    assert_eq!(uncut.acked.len() as u64, RECORDS);
    let local_calls = uncut_fs.mutating_calls() - uncut.calls_before_offload;
    assert!(local_calls > 0, "the offload deleted nothing locally");
    let mut rng = Rng(0x7133D);
    let (mut states, mut in_both, mut failed_offloads) = (0u64, 0u64, 0u64);
    let mut with_orphans = 0u64;
    for cut in 0..=local_calls {
        let fs = SimFs::new();
        // The store is not on the disk that loses power: it keeps what the
        // run put there.
        let store = stores::in_memory();
        let model = run(&fs, &store, Some(cut));
        assert_eq!(model.acked.len() as u64, RECORDS);
        failed_offloads += u64::from(!model.offloaded);
        for plan in plans(&fs, &mut rng) {
            states += 1;
            let crashed = fs.crash(&plan);
            // Each state gets its own copy of the store, since the second
            // pass changes it.
            let copy = copy_store(&store);
            let spread = check(&crashed, &copy, &model).unwrap_or_else(|e| {
                panic!(
                    "power cut after {cut} calls of the offload, {plan:?}: {e}\npending: {:?}",
                    fs.pending()
                )
            });
            in_both += u64::from(spread.both > 0);
            with_orphans += u64::from(spread.orphans_before_open);
        }
    }
    println!(
        "power loss through an offload's local steps: {local_calls} file-system calls, \
         {states} crash states checked, {in_both} with records both local and remote at the \
         reopen, {with_orphans} with index files left without their segment, the offload \
         failed in {failed_offloads} of {} cuts",
        local_calls + 1,
    );
    assert!(states > 100, "the sweep checked too little: {states}");
    assert!(
        in_both > 0,
        "no crash state left records in both places: the sweep missed the window"
    );
    assert!(
        with_orphans > 0,
        "no crash state left an index without its segment: the sweep missed the removals"
    );
}
