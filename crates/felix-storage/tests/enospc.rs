//! A full disk: appends fail with a typed "no space" error, nothing partial
//! is readable, nothing acknowledged is lost, and appends work again once
//! space is freed and the shard reopened.
//!
//! The real variant mounts a small tmpfs (CI runs as root). Where mounting
//! is not permitted, the test says so on stderr and runs the simulated
//! variant instead: the same checks, with ENOSPC injected through the
//! simulated file system where a real disk can run out (creating the first
//! segment, inside an append's write, at a roll) and the exact number of
//! records acknowledged before it. That variant also runs on its own.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use felix_format::{RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use felix_io::FileSystem;
use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_storage::{
    Durability, Preallocation, ReadBound, Record, Shard, StorageError, StoreConfig,
};

const TMPFS_BYTES: u64 = 2 * 1024 * 1024;
const ENOSPC: i32 = 28;
const SEGMENT_BYTES: u64 = 256 * 1024;
/// Every append is a batch of this many records of this many bytes.
const BATCH: usize = 4;
const PAYLOAD_BYTES: usize = 500;

fn config() -> StoreConfig {
    StoreConfig {
        segment_size_bytes: SEGMENT_BYTES,
        index_spacing_bytes: 4096,
        preallocate: Preallocation::Stepped,
        durability: Durability::OnCommit,
        ..StoreConfig::default()
    }
}

fn payload(offset: u64) -> Vec<u8> {
    let mut p = format!("enospc-{offset}-").into_bytes();
    p.resize(PAYLOAD_BYTES, (offset % 251) as u8);
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

/// What filling a shard left: the records acknowledged, the batch whose
/// append failed, and its error.
struct Filled {
    acked: Vec<(u64, Vec<u8>)>,
    refused: Vec<(u64, Vec<u8>)>,
    err: StorageError,
}

/// Appends until the disk is full (a bounded number of appends: the disk
/// holds a few thousand records).
fn fill(shard: &Shard) -> Filled {
    let mut acked = Vec::new();
    loop {
        let next = shard.offsets().written;
        let batch: Vec<_> = (next..next + BATCH as u64)
            .map(|o| (o, payload(o)))
            .collect();
        let records: Vec<_> = batch
            .iter()
            .map(|(o, p)| Record::new(*o, p.clone()))
            .collect();
        match shard.append(&records).wait() {
            Ok(_) => acked.extend(batch),
            Err(err) => {
                return Filled {
                    acked,
                    refused: batch,
                    err,
                };
            }
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
            reopened
                .append(&[Record::new(0, payload(0))])
                .wait()
                .unwrap();
            return 0;
        }
    };
    let Filled {
        acked,
        refused,
        err,
    } = fill(&shard);
    assert_eq!(
        err.io_kind(),
        Some(std::io::ErrorKind::StorageFull),
        "{err}"
    );
    // The append whose write (or segment creation) ran out of space gets
    // that failure as its own error, not "an earlier failure".
    assert!(matches!(err, StorageError::Segment { .. }), "{err:?}");
    // Nothing partial is readable: exactly the acknowledged records.
    assert_eq!(common::read_all(&shard, shard.offsets().base), acked);
    let later = shard.append(&[Record::new(0, "x")]).wait().unwrap_err();
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
    // Every acknowledged record, then at most whole records of the refused
    // batch that reached the disk before the space ran out (its append
    // failed, so keeping them or not are both allowed): nothing else.
    let after = common::read_all(&reopened, reopened.offsets().base);
    assert!(
        after.len() >= acked.len() && after.len() <= acked.len() + refused.len(),
        "{} records after the reopen, {} acknowledged, {} refused",
        after.len(),
        acked.len(),
        refused.len()
    );
    assert_eq!(after[..acked.len()], acked[..], "nothing acknowledged lost");
    assert_eq!(
        after[acked.len()..],
        refused[..after.len() - acked.len()],
        "past the acknowledged records, only the refused batch's own"
    );
    let next = reopened.offsets().written;
    reopened
        .append(&[Record::new(next, payload(next))])
        .wait()
        .unwrap();
    assert_eq!(
        reopened.read(next, 1, ReadBound::Committed).unwrap()[0].payload,
        payload(next)
    );
    acked.len()
}

#[test]
fn append_on_a_full_disk_is_no_space_and_loses_nothing_acknowledged() {
    let mount = match Mount::new() {
        Ok(mount) => mount,
        Err(why) => {
            // The same checks, and the same exact counts as the test that
            // always runs, on a simulated disk: said on stderr, so a run
            // that never touched a real full disk does not pass for one.
            eprintln!(
                "enospc: mounting a tmpfs is not permitted here ({why}); running the injected-ENOSPC variant (SimFs) instead of a real full disk"
            );
            injected_full_disks();
            return;
        }
    };
    eprintln!(
        "enospc: ran on a real {TMPFS_BYTES}-byte tmpfs at {}",
        mount.point.display()
    );
    let mut counts = Vec::new();
    for fill_percent in [0u64, 25, 50, 75, 95] {
        let shard_dir = mount.point.join(format!("shard-{fill_percent}"));
        let filler = mount.point.join("filler");
        // The filler always holds enough that removing it makes room for
        // a new segment, plus the chosen share of the rest.
        let reserve = 2 * config().segment_size_bytes;
        let filler_len = reserve + (TMPFS_BYTES - reserve) * fill_percent / 100;
        std::fs::write(&filler, vec![0xA5u8; filler_len as usize]).unwrap();
        let acked = check_full_disk(&FileSystem::os(), &shard_dir, || {
            std::fs::remove_file(&filler).unwrap();
        });
        counts.push(acked);
        eprintln!(
            "enospc: tmpfs filled to {fill_percent}%: {acked} records acknowledged before ENOSPC"
        );
        std::fs::remove_dir_all(&shard_dir).unwrap();
    }
    // An empty disk takes records, and a fuller one never takes more.
    assert!(counts[0] > 0, "{counts:?}");
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{counts:?}");
}

/// Where the simulated disk runs out of space: the `(skip + 1)`-th write
/// to a file whose path contains `path` (every segment's first write is
/// its header, to `{id}.log.tmp`; the simulated disk names later writes
/// through the same handle so too), after `written` bytes of it.
struct Injected {
    path: &'static str,
    skip: u32,
    written: usize,
    /// Records acknowledged before it, exactly.
    acked: usize,
}

/// The full disks the simulated variant runs, each ending as the real
/// ones can: at the first segment's creation (a disk too full to open
/// on), inside an append's write, and at a roll's new segment.
const INJECTED: [Injected; 5] = [
    Injected {
        path: ".log",
        skip: 0,
        written: 20,
        acked: 0,
    },
    // Appends of four 500-byte records; the first write is the header.
    Injected {
        path: ".log",
        skip: 1,
        written: 700,
        acked: 0,
    },
    Injected {
        path: ".log",
        skip: 4,
        written: 700,
        acked: 12,
    },
    Injected {
        path: ".log",
        skip: 41,
        written: 700,
        acked: 160,
    },
    // The second segment's header, at the roll: the first holds as many
    // whole batches as fit in it.
    Injected {
        path: "00000000000000000001.log",
        skip: 0,
        written: 0,
        acked: BATCH
            * ((SEGMENT_BYTES as usize - SEGMENT_HEADER_LEN)
                / (BATCH * (RECORD_HEADER_LEN + PAYLOAD_BYTES))),
    },
];

/// Runs every simulated full disk through the checks, with exact counts.
fn injected_full_disks() {
    for injected in &INJECTED {
        let acked = injected_enospc(injected);
        eprintln!(
            "enospc: injected ENOSPC at write {} to {}: {acked} records acknowledged",
            injected.skip + 1,
            injected.path
        );
        assert_eq!(
            acked,
            injected.acked,
            "{}th write to {}",
            injected.skip + 1,
            injected.path
        );
    }
}

/// The simulated variant always runs too, so its checks are exercised even
/// where mounting works, and it is exactly what runs where it does not.
#[test]
fn append_with_injected_enospc_is_no_space_and_loses_nothing_acknowledged() {
    injected_full_disks();
}

/// Runs the full-disk checks on the simulated disk with `ENOSPC` injected
/// where `injected` says; returns the records acknowledged before it.
fn injected_enospc(injected: &Injected) -> usize {
    let sim = SimFs::new();
    sim.inject(Fault {
        op: FaultOp::Write,
        path_contains: injected.path.into(),
        skip: injected.skip,
        effect: FaultEffect::ShortWrite {
            written: injected.written,
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
    shard.append(&[Record::new(0, payload(0))]).wait().unwrap();
    let first = shard
        .append(&[Record::new(1, payload(1))])
        .wait()
        .unwrap_err();
    assert!(
        matches!(&first, StorageError::Segment { source: felix_segment::SegmentError::Io(err), .. } if err.op() == "write" && err.raw_os_error() == Some(ENOSPC)),
        "{first:?}"
    );
    let later = shard
        .append(&[Record::new(2, payload(2))])
        .wait()
        .unwrap_err();
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
