//! Simulated power loss through a sealed segment's replacement: a shard of
//! three sealed segments has a record of the middle one rot (durably), and
//! the segment is replaced with a verified copy; the power is cut after
//! every file-system call from the replacement on, every disk state the
//! crash could leave (the main sweep's plans, `power_loss.rs`) is opened,
//! and the segment must be the old file or the copy, byte for byte — never
//! a mix — with every other record intact, no copy left behind, and the
//! copy certain once the call returned.

#[path = "power_loss/plans.rs"]
mod plans;

use std::path::Path;

use bytes::Bytes;
use felix_format::{FileKind, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN, ShardFileName, file_name};
use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_io::{FileSystem, OpenMode, Vfs};
use felix_storage::{
    Durability, Preallocation, ReadBound, Record, SegmentCopy, Shard, StorageError, StoreConfig,
};

use plans::{Rng, plans};

const DIR: &str = "/shard";
const PAYLOAD: usize = 12;
const PER_SEGMENT: u64 = 4;
const RECORD: u64 = (RECORD_HEADER_LEN + PAYLOAD) as u64;
/// The segment replaced, and its record that rots.
const SEGMENT: u64 = 1;
const ROTTED: u64 = PER_SEGMENT + 2;

fn config() -> StoreConfig {
    StoreConfig {
        segment_size_bytes: SEGMENT_HEADER_LEN as u64 + PER_SEGMENT * RECORD,
        index_spacing_bytes: 64,
        preallocate: Preallocation::Off,
        durability: Durability::OnCommit,
        writeback_bytes: None,
        ..StoreConfig::default()
    }
}

fn payload(offset: u64) -> Vec<u8> {
    format!("record-{offset:05}").into_bytes()
}

fn segment_path() -> std::path::PathBuf {
    Path::new(DIR).join(file_name(SEGMENT, FileKind::Segment).as_str())
}

fn read_file(fs: &SimFs, path: &Path) -> Vec<u8> {
    let file = fs.open(path, OpenMode::Read).unwrap();
    let mut bytes = vec![0u8; file.file_len().unwrap() as usize];
    file.read_exact_at(&mut bytes, 0).unwrap();
    bytes
}

/// What the workload did.
#[derive(Debug, Default, Clone)]
struct Model {
    /// The segment before the rot, and after it.
    good: Vec<u8>,
    rotted: Vec<u8>,
    /// Whether `replace_sealed_segment` returned `Ok`.
    replaced: bool,
}

/// Builds the shard and rots the record durably.
fn prepare(fs: &SimFs) -> (Shard, Model) {
    let handle = FileSystem::new(fs.clone());
    let shard = Shard::options(DIR)
        .file_system(handle)
        .config(config())
        .open()
        .unwrap();
    for offset in 0..3 * PER_SEGMENT + 1 {
        shard
            .append(&[Record::new(offset, payload(offset))])
            .wait()
            .unwrap();
    }
    assert_eq!(shard.segments().len(), 4);
    let good = read_file(fs, &segment_path());
    let mut rotted = good.clone();
    let at = SEGMENT_HEADER_LEN as u64 + (ROTTED - PER_SEGMENT) * RECORD + 30;
    rotted[at as usize] ^= 0x20;
    let file = fs.open(&segment_path(), OpenMode::ReadWrite).unwrap();
    file.write_all_at(&rotted[at as usize..=at as usize], at)
        .unwrap();
    file.sync_data().unwrap();
    let model = Model {
        good,
        rotted,
        replaced: false,
    };
    (shard, model)
}

fn run(fs: &SimFs, cut_after: Option<u64>) -> Model {
    let (shard, mut model) = prepare(fs);
    // Counted from here: `cut` more mutating calls succeed.
    if let Some(cut) = cut_after {
        fs.cut_power_after(cut);
    }
    model.replaced = shard
        .replace_sealed_segment(
            SEGMENT,
            &SegmentCopy::Bytes(Bytes::from(model.good.clone())),
        )
        .is_ok();
    let _ = shard.close();
    model
}

/// Opens a crashed disk and holds it to the model.
fn check(crashed: &SimFs, model: &Model) -> Result<(), String> {
    let shard = Shard::options(DIR)
        .file_system(FileSystem::new(crashed.clone()))
        .config(config())
        .open()
        .map_err(|e| format!("open: {e}"))?;
    let copy = ShardFileName::SegmentCopy(SEGMENT).file_name().unwrap();
    if crashed
        .entry_type(&Path::new(DIR).join(copy.as_str()))
        .map_err(|e| e.to_string())?
        .is_some()
    {
        return Err("the copy survived the open".into());
    }
    let bytes = read_file(crashed, &segment_path());
    let new = bytes == model.good;
    if !new && bytes != model.rotted {
        return Err(format!(
            "segment {SEGMENT} is neither the old file nor the copy"
        ));
    }
    if model.replaced && !new {
        return Err("the replacement returned, but the old segment came back".into());
    }
    for offset in 0..3 * PER_SEGMENT + 1 {
        match shard.read(offset, 1, ReadBound::Committed) {
            Ok(records)
                if records.first().is_some_and(|r| {
                    r.offset == offset && r.payload[..] == payload(offset)[..]
                }) => {}
            Err(StorageError::Segment { .. }) if offset == ROTTED && !new => {}
            other => return Err(format!("offset {offset}: {other:?} (new: {new})")),
        }
    }
    Ok(())
}

/// What a sweep checked: crash states, and in how many the copy was in
/// place; or the first failure.
fn sweep(faults: &[Fault]) -> Result<(u64, u64, u64), String> {
    let fresh = || {
        let fs = SimFs::new();
        for fault in faults {
            fs.inject(fault.clone());
        }
        fs
    };
    let uncut_fs = fresh();
    assert!(run(&uncut_fs, None).replaced);
    let total = uncut_fs.mutating_calls();
    let mut rng = Rng(0x5EED);
    let (mut states, mut became_new, mut cuts_after_return) = (0u64, 0u64, 0);
    let mut cut = 0;
    // From a cut before the replacement's first call to a few past its
    // return (into the close).
    while cuts_after_return < 4 {
        // Past every call of the uncut run, the power is never cut.
        assert!(
            cut <= total,
            "the replacement never returned within the {total} calls of the uncut run"
        );
        let fs = fresh();
        let model = run(&fs, Some(cut));
        cut += 1;
        if model.replaced {
            cuts_after_return += 1;
        }
        for plan in plans(&fs, &mut rng) {
            states += 1;
            let crashed = fs.crash(&plan);
            check(&crashed, &model).map_err(|e| {
                format!(
                    "power cut after {} calls, {plan:?}: {e}\npending: {:?}",
                    cut - 1,
                    fs.pending()
                )
            })?;
            if read_file(&crashed, &segment_path()) == model.good {
                became_new += 1;
            }
        }
    }
    Ok((cut, states, became_new))
}

#[test]
fn power_loss_through_a_replacement_leaves_the_old_segment_or_the_copy() {
    let (cuts, states, became_new) = sweep(&[]).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "power loss through a replacement: cut after 0..{cuts} calls, {states} crash states, the copy in place in {became_new}"
    );
    // About 5% below the 882 states (the copy in place in 354) it checked
    // when this was set, so a sweep whose runs end early falls short.
    assert!(states >= 840, "the sweep checked too little: {states}");
    assert!(
        became_new > 0 && became_new < states,
        "both outcomes must occur: {became_new} of {states}"
    );
}

/// The copy's sync before its rename is what keeps a crash from leaving
/// half a copy under the segment's name: with it skipped (reporting
/// success, making nothing durable), some crash state leaves an empty file
/// there, which no open accepts.
#[test]
fn power_loss_check_catches_a_skipped_sync_of_the_copy_before_its_rename() {
    let fault = Fault {
        op: FaultOp::SyncFile,
        path_contains: ".log.copy".into(),
        skip: 0,
        effect: FaultEffect::SyncSkipped,
    };
    let Err(failure) = sweep(&[fault]) else {
        panic!("skipping the copy's sync went unnoticed");
    };
    assert!(
        failure.contains("neither the old file nor the copy")
            || failure.contains("segment header damage"),
        "{failure}"
    );
}
