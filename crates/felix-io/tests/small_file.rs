//! `replace_file` is atomic and durable, and `read_small_file` reads what
//! it left: the power is cut after every call of a replacement, and every
//! disk the crash could leave (each subset of the pending operations, the
//! kept write torn or zeroed) holds the old bytes (or none) or the whole
//! new ones; once the call returned, the new ones. Names that are not
//! regular files are never replaced.

use std::path::Path;

use felix_io::sim::{CrashPlan, SimFs, Tear};
use felix_io::{
    FileSystem, FileType, ReadSmallError, ReplaceError, Vfs, read_small_file, replace_file,
};

const OLD: &[u8] = b"the old small file";
const NEW: &[u8] = b"the new small file, longer than the old one";

/// Every plan for `pending` operations: each subset, and each with its
/// last kept write torn after one byte, in the middle, or zeroed.
fn plans(fs: &SimFs) -> Vec<CrashPlan> {
    let pending = fs.pending();
    let n = pending.len();
    assert!(n <= 10, "{pending:?}");
    let mut out = Vec::new();
    for bits in 0..1u64 << n {
        let keep: Vec<bool> = (0..n).map(|i| bits >> i & 1 == 1).collect();
        out.push(CrashPlan {
            keep: keep.clone(),
            tear: None,
        });
        if let Some(i) = (0..n)
            .rev()
            .find(|&i| keep[i] && pending[i].kind == "write")
        {
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

/// A directory `/d` (durable), with the old file in it when `old`.
fn setup(old: bool) -> SimFs {
    let sim = SimFs::new();
    sim.create_dir_all(Path::new("/d")).unwrap();
    sim.sync_dir(Path::new("/")).unwrap();
    if old {
        let fs = FileSystem::new(sim.clone());
        replace_file(&fs, Path::new("/d"), "f", "f.tmp", OLD).unwrap();
    }
    sim
}

/// Crash states checked, and how many of them held the new bytes.
fn sweep(old: bool) -> (u64, u64) {
    let before = setup(old).mutating_calls();
    let total = {
        let sim = setup(old);
        replace_file(
            &FileSystem::new(sim.clone()),
            Path::new("/d"),
            "f",
            "f.tmp",
            NEW,
        )
        .unwrap();
        sim.mutating_calls()
    };
    let (mut states, mut new) = (0, 0);
    for cut in 0..=total - before {
        let sim = setup(old);
        sim.cut_power_after(cut);
        let returned = replace_file(
            &FileSystem::new(sim.clone()),
            Path::new("/d"),
            "f",
            "f.tmp",
            NEW,
        )
        .is_ok();
        for plan in plans(&sim) {
            states += 1;
            let crashed = FileSystem::new(sim.crash(&plan));
            let found = read_small_file(&crashed, Path::new("/d/f"), 1024).unwrap();
            let old_state = if old { Some(OLD.to_vec()) } else { None };
            assert!(
                found == Some(NEW.to_vec()) || (!returned && found == old_state),
                "cut after {cut} calls (returned: {returned}), {plan:?}: {found:?}"
            );
            new += u64::from(found.as_deref() == Some(NEW));
        }
    }
    (states, new)
}

#[test]
fn power_loss_through_a_replacement_leaves_the_old_file_or_the_new_one() {
    let (states, new) = sweep(true);
    // Both outcomes occur: the sweep reaches past the rename and before it.
    assert!(states >= 20 && new > 0 && new < states, "{new} of {states}");
}

#[test]
fn power_loss_through_a_first_write_leaves_no_file_or_the_new_one() {
    let (states, new) = sweep(false);
    assert!(states >= 20 && new > 0 && new < states, "{new} of {states}");
}

#[test]
fn replace_file_refuses_a_name_that_is_not_a_regular_file() {
    let sim = setup(false);
    sim.create_dir_all(Path::new("/d/f")).unwrap();
    let fs = FileSystem::new(sim.clone());
    let err = replace_file(&fs, Path::new("/d"), "f", "f.tmp", NEW).unwrap_err();
    assert!(
        matches!(
            &err,
            ReplaceError::NotRegular { path, not_regular }
                if path == Path::new("/d/f") && not_regular.file_type == FileType::Directory
        ),
        "{err:?}"
    );
    // Nothing written, not even the temporary.
    assert_eq!(sim.entry_type(Path::new("/d/f.tmp")).unwrap(), None);
}

#[test]
fn read_small_file_refuses_a_file_longer_than_its_bound_without_reading_it() {
    let sim = setup(true);
    let fs = FileSystem::new(sim.clone());
    let reads = sim.reads();
    let err = read_small_file(&fs, Path::new("/d/f"), OLD.len() - 1).unwrap_err();
    assert!(
        matches!(&err, ReadSmallError::TooLarge { len, max, .. } if *len == OLD.len() as u64 && *max == OLD.len() - 1),
        "{err:?}"
    );
    assert_eq!(sim.reads(), reads, "a byte was read");
    assert_eq!(
        read_small_file(&fs, Path::new("/d/f"), OLD.len())
            .unwrap()
            .as_deref(),
        Some(OLD)
    );
}

#[test]
fn read_small_file_of_a_directory_is_an_open_error_naming_it_not_a_file() {
    let sim = setup(false);
    sim.create_dir_all(Path::new("/d/f")).unwrap();
    let err = read_small_file(&FileSystem::new(sim), Path::new("/d/f"), 64).unwrap_err();
    let ReadSmallError::Io(io) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(io.op(), "open");
    assert!(
        matches!(io.not_regular_file(), Some(n) if n.file_type == FileType::Directory),
        "{err:?}"
    );
}
