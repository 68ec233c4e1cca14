//! `shards-append limit-format`: the fewest system calls a writer of the
//! format makes to append one on-commit record to a shard it does not hold
//! open, and let go of it again; a second reference for `shards-append`
//! beside the one-file limit, to tell the format's cost from ours.
//!
//! Per shard, relative to descriptors (no path walked from the root twice):
//! open the shard's directory and `flock` it (one writer per directory);
//! open and `flock` its `lock` file (a writer of an earlier release locks
//! only that); list the directory (its segments); open the newest segment,
//! `fstat` it and read it whole (an open scans the newest segment: nothing
//! says its tail was whole); `pwrite` one record at its end and
//! `fdatasync`; close the three descriptors. Left out, and done by felix
//! storage: reading the key file (which shard the directory holds), the
//! clean-shutdown file (read at the open, rewritten at the close), opening
//! the segment's index, the `fcntl` that puts each descriptor it reads or
//! writes back to blocking I/O, and reserving space ahead of the write.

use std::os::fd::OwnedFd;
use std::path::PathBuf;

use felix_format::{SEGMENT_HEADER_LEN, record_encoded_len};
use rustix::fs::{Dir, FlockOperation, Mode, OFlags, flock, fstat, openat};
use rustix::io::{pread, pwrite};

use crate::args::Args;
use crate::felix::Result;
use crate::report::Measurement;
use crate::shards::{append_each_from_threads, err, raise_nofile};

/// The segment each floor shard holds, named as felix storage names a
/// shard's first segment.
const SEGMENT: &str = "00000000000000000000.log";

/// The files beside the segment in a floor shard, named as in a felix
/// shard directory, with their sizes there (the lock file is empty).
const OTHER_FILES: [(&str, usize); 4] = [
    ("lock", 0),
    ("key", 42),
    ("clean-shutdown", 48),
    ("00000000000000000000.index", 40),
];

/// The floor's shard directories under `--dir`.
fn floor_dir(args: &Args) -> Result<PathBuf> {
    Ok(args.dir()?.join("format-files"))
}

fn shard_name(i: u64) -> String {
    format!("{i:05}")
}

/// Builds `shards` floor shard directories under `--dir`, each holding the
/// files of a felix shard of one 128-byte record (their contents are not
/// read as records), without syncs.
pub fn prepare(args: &Args, shards: u64) -> Result<()> {
    let root = floor_dir(args)?;
    crate::fresh_dir(&root).map_err(err)?;
    let segment = vec![7u8; SEGMENT_HEADER_LEN + record_encoded_len(128) as usize];
    for i in 0..shards {
        let dir = root.join(shard_name(i));
        std::fs::create_dir(&dir).map_err(err)?;
        std::fs::write(dir.join(SEGMENT), &segment).map_err(err)?;
        for (name, len) in OTHER_FILES {
            std::fs::write(dir.join(name), vec![1u8; len]).map_err(err)?;
        }
    }
    Ok(())
}

/// `shards-append limit-format`: `--threads` threads (64) each take the
/// next of `--shards` floor shards (10,000) in turn and make the calls the
/// module docs list; each timed.
pub fn append(args: &Args) -> Result<Measurement> {
    raise_nofile();
    let root = floor_dir(args)?;
    let root_fd = rustix::fs::open(
        &root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        format!(
            "open {}: {e} (made by prepare-shards felix with the same --dir)",
            root.display()
        )
    })?;
    crate::warm_page_cache(&root).map_err(err)?;
    let record = vec![9u8; record_encoded_len(128) as usize];
    append_each_from_threads(args, "limit-format", record.len(), Vec::new, |i, scan| {
        append_one(&root_fd, &shard_name(i), &record, scan).map_err(|(call, file, e)| {
            let mut at = root.join(shard_name(i));
            if !file.is_empty() {
                at.push(file);
            }
            format!("{call} {}: {e}", at.display())
        })
    })
}

/// A failed call of [`append_one`]: the call, the name in the shard
/// directory it was made on (empty for the directory itself), and what it
/// returned.
type Failed = (&'static str, &'static str, std::io::Error);

/// One shard's calls (see the module docs); `scan` is the reused buffer
/// the segment is read into.
fn append_one(
    root: &OwnedFd,
    name: &str,
    record: &[u8],
    scan: &mut Vec<u8>,
) -> std::result::Result<(), Failed> {
    let at = |call: &'static str, file: &'static str| {
        move |e: rustix::io::Errno| (call, file, std::io::Error::from(e))
    };
    let dir = openat(
        root,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(at("open", ""))?;
    flock(&dir, FlockOperation::NonBlockingLockExclusive).map_err(at("flock", ""))?;
    let lock = openat(
        &dir,
        "lock",
        OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )
    .map_err(at("open", "lock"))?;
    flock(&lock, FlockOperation::NonBlockingLockExclusive).map_err(at("flock", "lock"))?;
    let mut listing = Dir::new(dir).map_err(at("list", ""))?;
    let mut newest_seen = false;
    while let Some(entry) = listing.read() {
        newest_seen |= entry.map_err(at("list", ""))?.file_name().to_bytes() == SEGMENT.as_bytes();
    }
    if !newest_seen {
        let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "not in the listing");
        return Err(("find", SEGMENT, missing));
    }
    let segment = openat(
        listing.fd().map_err(at("list", ""))?,
        SEGMENT,
        OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(at("open", SEGMENT))?;
    let len = fstat(&segment).map_err(at("fstat", SEGMENT))?.st_size as u64;
    scan.resize(len as usize, 0);
    let mut read = 0;
    while read < scan.len() {
        match pread(&segment, &mut scan[read..], read as u64).map_err(at("pread", SEGMENT))? {
            0 => break,
            n => read += n,
        }
    }
    let mut written = 0;
    while written < record.len() {
        match pwrite(&segment, &record[written..], len + written as u64)
            .map_err(at("pwrite", SEGMENT))?
        {
            0 => {
                let none = std::io::Error::from(std::io::ErrorKind::WriteZero);
                return Err(("pwrite", SEGMENT, none));
            }
            n => written += n,
        }
    }
    rustix::fs::fdatasync(&segment).map_err(at("fdatasync", SEGMENT))?;
    drop((segment, lock, listing));
    Ok(())
}
