//! A shard directory named by a relative path of one component (`shard`),
//! which does not exist yet: its parent is the current directory. This file
//! holds one test because it changes the process's working directory.

use std::path::Path;

use felix_storage::{Durability, ReadBound, Record, Shard, StoreConfig};

#[test]
fn shard_open_relative_single_component_dir_creates_it_in_the_current_directory() {
    let cwd = tempfile::tempdir().unwrap();
    std::env::set_current_dir(cwd.path()).unwrap();
    let config = StoreConfig {
        durability: Durability::OnCommit,
        ..StoreConfig::default()
    };
    let shard = Shard::options(Path::new("shard"))
        .config(config)
        .label("shard")
        .open()
        .unwrap();
    shard.append(&[Record::new(1, "here")]).wait().unwrap();
    drop(shard);
    assert!(cwd.path().join("shard/00000000000000000000.log").is_file());
    let shard = Shard::options(Path::new("shard"))
        .config(config)
        .label("shard")
        .open()
        .unwrap();
    assert_eq!(
        shard.read(0, 1 << 20, ReadBound::Committed).unwrap()[0].payload,
        "here"
    );
}
