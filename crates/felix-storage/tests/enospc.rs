//! A full disk: appends fail with a typed "no space" error, nothing partial
//! is readable, nothing acknowledged is lost, and appends work again once
//! space is freed and the shard reopened.
//!
//! The real variant mounts a small tmpfs (CI runs as root). Where mounting
//! is not permitted, the test says so and runs the same checks with ENOSPC
//! injected through the simulated file system.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use felix_io::FileSystem;
use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_storage::{Durability, Preallocation, Record, Shard, StorageError, StoreConfig};

const TMPFS_BYTES: u64 = 2 * 1024 * 1024;
const ENOSPC: i32 = 28;

fn config() -> StoreConfig {
    StoreConfig {
        segment_size_bytes: 256 * 1024,
        index_spacing_bytes: 4096,
        preallocate: Preallocation::Stepped,
        durability: Durability::OnCommit,
        ..StoreConfig::default()
    }
}

fn payload(offset: u64) -> Vec<u8> {
    let mut p = format!("enospc-{offset}-").into_bytes();
    p.resize(500, (offset % 251) as u8);
    p
}

/// A tmpfs mounted for the life of the value.
struct Mount {
    _dir: tempfile::TempDir,
    point: PathBuf,
}

impl Mount {
    fn new() -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let point = dir.path().to_path_buf();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={TMPFS_BYTES}"), "tmpfs"])
            .arg(&point)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        Ok(Self { _dir: dir, point })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.point).status();
    }
}

/// Appends until the disk is full; returns what was acknowledged and the
/// error that stopped it.
fn fill(shard: &Shard) -> (Vec<(u64, Vec<u8>)>, StorageError) {
    let mut acked = Vec::new();
    loop {
        let next = shard.next_offset();
        let batch: Vec<_> = (next..next + 4).map(|o| (o, payload(o))).collect();
        let records: Vec<_> = batch
            .iter()
            .map(|(o, p)| Record::new(*o, p.clone()))
            .collect();
        match shard.append(&records) {
            Ok(_) => acked.extend(batch),
            Err(err) => return (acked, err),
        }
        assert!(acked.len() < 1_000_000, "the disk never filled");
    }
}

/// The checks shared by both variants: `free` frees space, `fs`/`dir` name
/// the shard.
fn check_full_disk(fs: &FileSystem, dir: &Path, free: impl FnOnce()) -> usize {
    let shard = match Shard::options(dir)
        .file_system(fs.clone())
        .config(config())
        .label("enospc")
        .open()
    {
        Ok(shard) => shard,
        // Too full to create even the first segment: the same typed error,
        // and nothing was acknowledged.
        Err(err) => {
            assert_eq!(
                err.io_kind(),
                Some(std::io::ErrorKind::StorageFull),
                "{err}"
            );
            free();
            let reopened = Shard::options(dir)
                .file_system(fs.clone())
                .config(config())
                .label("enospc")
                .open()
                .unwrap();
            reopened.append(&[Record::new(0, payload(0))]).unwrap();
            return 0;
        }
    };
    let (acked, err) = fill(&shard);
    assert_eq!(
        err.io_kind(),
        Some(std::io::ErrorKind::StorageFull),
        "{err}"
    );
    // The append whose write (or segment creation) ran out of space gets
    // that failure as its own error, not "an earlier failure".
    assert!(matches!(err, StorageError::Segment { .. }), "{err:?}");
    // Nothing partial is readable: exactly the acknowledged records.
    assert_eq!(common::read_all(&shard, shard.base_offset()), acked);
    let later = shard.append(&[Record::new(0, "x")]).unwrap_err();
    assert_eq!(later.io_kind(), Some(std::io::ErrorKind::StorageFull));
    let StorageError::Poisoned { original, .. } = &later else {
        panic!("{later:?}")
    };
    assert_eq!(original.to_string(), err.to_string());
    drop(shard);

    free();
    let reopened = Shard::options(dir)
        .file_system(fs.clone())
        .config(config())
        .label("enospc")
        .open()
        .unwrap();
    let after = common::read_all(&reopened, reopened.base_offset());
    assert!(after.len() >= acked.len());
    assert_eq!(after[..acked.len()], acked[..], "nothing acknowledged lost");
    let next = reopened.next_offset();
    reopened
        .append(&[Record::new(next, payload(next))])
        .unwrap();
    assert_eq!(reopened.read(next, 1).unwrap()[0].payload, payload(next));
    acked.len()
}

#[test]
fn append_on_a_full_disk_is_no_space_and_loses_nothing_acknowledged() {
    match Mount::new() {
        Ok(mount) => {
            for fill_percent in [0u64, 25, 50, 75, 95] {
                let shard_dir = mount.point.join(format!("shard-{fill_percent}"));
                let filler = mount.point.join("filler");
                // The filler always holds enough that removing it makes room
                // for a new segment, plus the chosen share of the rest.
                let reserve = 2 * config().segment_size_bytes;
                let filler_len = reserve + (TMPFS_BYTES - reserve) * fill_percent / 100;
                std::fs::write(&filler, vec![0xA5u8; filler_len as usize]).unwrap();
                let acked = check_full_disk(&FileSystem::os(), &shard_dir, || {
                    std::fs::remove_file(&filler).unwrap();
                });
                println!(
                    "tmpfs of {TMPFS_BYTES} bytes filled to {fill_percent}%: {acked} records acknowledged before ENOSPC"
                );
                std::fs::remove_dir_all(&shard_dir).unwrap();
            }
        }
        Err(why) => {
            println!(
                "mounting a tmpfs is not permitted here ({why}); running the injected-ENOSPC variant"
            );
            for skip in [0u32, 3, 40] {
                let acked = injected_enospc_after(skip);
                println!("injected ENOSPC after {skip} appends: {acked} records acknowledged");
                assert_eq!(acked, 4 * skip as usize);
            }
        }
    }
}

/// The simulated variant always runs too, so the checks are exercised even
/// where mounting works.
#[test]
fn append_with_injected_enospc_is_no_space_and_loses_nothing_acknowledged() {
    for skip in [0u32, 5] {
        assert_eq!(injected_enospc_after(skip), 4 * skip as usize);
    }
}

/// Runs the full-disk checks on the simulated disk with `ENOSPC` (after 700
/// bytes of the write) injected into the `(skip + 1)`-th append; returns the
/// records acknowledged before it.
fn injected_enospc_after(skip: u32) -> usize {
    let sim = SimFs::new();
    sim.inject(Fault {
        op: FaultOp::Write,
        path_contains: ".log".into(),
        // The first write to a segment is its header.
        skip: skip + 1,
        effect: FaultEffect::ShortWrite {
            written: 700,
            errno: ENOSPC,
        },
    });
    check_full_disk(&FileSystem::new(sim), Path::new("/shard"), || {})
}

/// What an operator reads: the append that hit the full disk names that
/// failure; every call after it says the shard stopped and names it.
#[test]
fn append_whose_write_hits_enospc_reports_it_and_later_calls_name_it() {
    let sim = SimFs::new();
    sim.inject(Fault {
        op: FaultOp::Write,
        path_contains: ".log".into(),
        skip: 2,
        effect: FaultEffect::ShortWrite {
            written: 100,
            errno: ENOSPC,
        },
    });
    let shard = Shard::options(Path::new("/shard"))
        .file_system(FileSystem::new(sim))
        .config(config())
        .label("enospc")
        .open()
        .unwrap();
    shard.append(&[Record::new(0, payload(0))]).unwrap();
    let first = shard.append(&[Record::new(1, payload(1))]).unwrap_err();
    assert!(
        matches!(&first, StorageError::Segment { source: felix_segment::SegmentError::Io(err), .. } if err.op() == "write" && err.raw_os_error() == Some(ENOSPC)),
        "{first:?}"
    );
    let later = shard.append(&[Record::new(2, payload(2))]).unwrap_err();
    let sync = shard.sync().unwrap_err();
    for err in [&later, &sync] {
        assert!(
            matches!(err, StorageError::Poisoned { original, .. } if original.to_string() == first.to_string()),
            "{err:?}"
        );
    }
    let text = format!("first append: {first}\nnext append:  {later}\nsync:         {sync}\n");
    insta::assert_snapshot!(text);
}
