//! The invariants felix-io asserts at its boundaries fire, in debug
//! builds, at the call that breaks them, naming the values.
#![cfg(debug_assertions)]

use std::path::Path;

use felix_io::sim::{CrashPlan, SimFs};
use felix_io::{FileSystem, OpenMode, Vfs, replace_file};

fn setup() -> SimFs {
    let fs = SimFs::new();
    fs.create_dir_all(Path::new("/d")).unwrap();
    fs.sync_dir(Path::new("/")).unwrap();
    fs
}

#[test]
#[should_panic(
    expected = "write of 1 bytes at position 18446744073709551615 ends past the largest file position 9223372036854775807"
)]
fn write_past_the_largest_file_position_fails_the_assertion() {
    let fs = setup();
    let f = fs.open(Path::new("/d/a"), OpenMode::CreateNew).unwrap();
    let _ = f.write_all_at(b"x", u64::MAX);
}

#[test]
#[should_panic(
    expected = "set_len of 9223372036854775808 bytes at position 0 ends past the largest file position"
)]
fn set_len_past_the_largest_file_position_fails_the_assertion() {
    let dir = tempfile::tempdir().unwrap();
    let f = FileSystem::os()
        .open(&dir.path().join("a"), OpenMode::CreateNew)
        .unwrap();
    let _ = f.set_len(1 << 63);
}

#[test]
#[should_panic(expected = "crash plan keeps or drops 3 operations, but 2 are pending")]
fn crash_plan_naming_more_operations_than_pending_fails_the_assertion() {
    let fs = setup();
    let f = fs.open(Path::new("/d/a"), OpenMode::CreateNew).unwrap();
    f.write_all_at(b"x", 0).unwrap();
    let _ = fs.crash(&CrashPlan {
        keep: vec![true; 3],
        tear: None,
    });
}

#[test]
#[should_panic(expected = "crash plan tears pending operation Some(0), which is not a kept write")]
fn crash_plan_tearing_a_link_fails_the_assertion() {
    let fs = setup();
    let f = fs.open(Path::new("/d/a"), OpenMode::CreateNew).unwrap();
    f.write_all_at(b"x", 0).unwrap();
    let _ = fs.crash(&CrashPlan {
        keep: vec![true, true],
        tear: Some((0, felix_io::sim::Tear::Zeros)),
    });
}

#[test]
#[should_panic(
    expected = "replace_file of \"f\" through \"f\" in /d: the file and its temporary must be two plain names"
)]
fn replace_file_through_its_own_name_fails_the_assertion() {
    let fs = FileSystem::new(setup());
    let _ = replace_file(&fs, Path::new("/d"), "f", "f", b"new");
}

#[test]
#[should_panic(
    expected = "replace_file of \"f\" through \"../f.tmp\" in /d: the file and its temporary must be two plain names"
)]
fn replace_file_through_another_directory_fails_the_assertion() {
    let fs = FileSystem::new(setup());
    let _ = replace_file(&fs, Path::new("/d"), "f", "../f.tmp", b"new");
}
