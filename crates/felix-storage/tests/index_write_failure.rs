//! A full disk when a rebuilt index is written does not stop a shard from
//! opening: indexes only speed reads up. The index is served from memory,
//! the failure is counted in `ShardStats` and reported, and the active
//! segment's index is written again at the next roll or close.

use std::path::Path;

use felix_format::{FileKind, file_name};
use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_io::{FileSystem, Vfs};
use felix_recovery::Action;
use felix_storage::{Durability, Preallocation, ReadBound, Record, Shard, StoreConfig};

const DIR: &str = "/shard";
const ENOSPC: i32 = 28;

fn config() -> StoreConfig {
    StoreConfig {
        durability: Durability::OnCommit,
        segment_size_bytes: 2048,
        index_spacing_bytes: 128,
        preallocate: Preallocation::Off,
        ..StoreConfig::default()
    }
}

fn payload(offset: u64) -> String {
    format!("record-{offset}-{}", "y".repeat(50))
}

fn open(sim: &SimFs) -> Shard {
    Shard::options(Path::new(DIR))
        .file_system(FileSystem::new(sim.clone()))
        .config(config())
        .label("full")
        .open()
        .unwrap()
}

fn append(shard: &Shard, n: u64) {
    for _ in 0..n {
        let o = shard.offsets().written;
        shard.append(&[Record::new(o, payload(o))]).wait().unwrap();
    }
}

fn check_all(shard: &Shard, next: u64) {
    for offset in 0..next {
        let records = shard.read(offset, 1, ReadBound::Committed).unwrap();
        assert_eq!(records[0].offset, offset);
        assert_eq!(records[0].payload, payload(offset));
    }
    assert_eq!(shard.offsets().written, next);
}

fn index_path(id: u64) -> std::path::PathBuf {
    Path::new(DIR).join(file_name(id, FileKind::Index).as_str())
}

/// A shard of several segments left without a clean close, with the index
/// of segment `missing` removed.
fn shard_without_index(missing: impl Fn(&Shard) -> u64) -> (SimFs, u64, u64) {
    let sim = SimFs::new();
    let shard = open(&sim);
    append(&shard, 100);
    assert!(shard.segments().len() >= 3);
    let id = missing(&shard);
    let next = shard.offsets().written;
    drop(shard);
    sim.remove_file(&index_path(id)).unwrap();
    (sim, id, next)
}

/// The next `times` writes to `path` fail with `ENOSPC`.
fn no_space_on(sim: &SimFs, path: &Path, times: usize) {
    for _ in 0..times {
        sim.inject(Fault {
            op: FaultOp::Write,
            path_contains: path.to_string_lossy().into_owned(),
            skip: 0,
            effect: FaultEffect::Errno(ENOSPC),
        });
    }
}

#[test]
fn shard_open_on_a_full_disk_serves_a_sealed_segment_whose_index_cannot_be_written() {
    let (sim, id, next) = shard_without_index(|s| s.segments()[1].extent.id);
    no_space_on(&sim, &index_path(id), 1);
    let shard = open(&sim);
    let stats = shard.stats();
    assert_eq!(stats.index_write_failures, 1);
    assert!(
        !stats
            .recovery_actions
            .iter()
            .any(|a| matches!(a, Action::RebuildIndex { segment, .. } if *segment == id)),
        "{:?}",
        stats.recovery_actions
    );
    assert!(
        sim.read_file(&index_path(id))
            .unwrap_or_default()
            .is_empty()
    );
    check_all(&shard, next);
    // The read rebuilt it in memory and, the disk no longer full, wrote it.
    assert!(sim.read_file(&index_path(id)).unwrap().len() > 24);
    append(&shard, 1);
}

#[test]
fn shard_open_on_a_full_disk_serves_the_active_index_from_memory_and_writes_it_at_the_roll() {
    let (sim, id, next) = shard_without_index(|s| s.segments().last().unwrap().extent.id);
    // Both writes an open makes of it: the repair's, then the writer's.
    no_space_on(&sim, &index_path(id), 2);
    let shard = open(&sim);
    assert_eq!(shard.stats().index_write_failures, 2);
    assert!(
        sim.read_file(&index_path(id))
            .unwrap_or_default()
            .is_empty()
    );
    check_all(&shard, next);
    let rolls = shard.stats().rolls;
    while shard.stats().rolls == rolls {
        append(&shard, 1);
    }
    // Sealing wrote the index whole, from memory.
    let written = sim.read_file(&index_path(id)).unwrap();
    assert!(written.len() > 24, "{} bytes", written.len());
    assert_eq!(shard.stats().index_write_failures, 2, "the retry succeeded");
    let next = shard.offsets().written;
    drop(shard);
    let reopened = open(&sim);
    assert!(
        reopened.stats().recovery_actions.is_empty(),
        "{:?}",
        reopened.stats().recovery_actions
    );
    check_all(&reopened, next);
}

#[test]
fn shard_close_retries_the_active_index_and_a_second_failure_is_counted_not_fatal() {
    let (sim, id, next) = shard_without_index(|s| s.segments().last().unwrap().extent.id);
    no_space_on(&sim, &index_path(id), 2);
    let shard = open(&sim);
    no_space_on(&sim, &index_path(id), 1);
    shard.close().unwrap();
    assert!(shard.poisoned().is_none());
    assert_eq!(shard.stats().index_write_failures, 3);
    assert!(
        sim.read_file(&index_path(id))
            .unwrap_or_default()
            .is_empty()
    );
    drop(shard);
    // The next close, with space, writes it.
    let shard = open(&sim);
    assert_eq!(shard.stats().index_write_failures, 0);
    check_all(&shard, next);
    shard.close().unwrap();
    assert!(sim.read_file(&index_path(id)).unwrap().len() > 24);
}
