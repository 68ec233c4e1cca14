//! A rebuilt index that cannot be written (a full disk) is left out of the
//! repair's actions and reported as a note; the repair and the open go on.

use std::path::Path;

use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_io::{FileSystem, Vfs};
use felix_recovery::{
    Action, Note, OpenOptions, RepairPolicy, ShardLock, inspect, open_shard, repair,
};
use felix_segment::{Record, SegmentConfig, SegmentWriter};

const DIR: &str = "/shard";

/// Two segments of 5 records on a simulated disk, without their indexes.
fn shard_without_indexes() -> SimFs {
    let sim = SimFs::new();
    let fs = FileSystem::new(sim.clone());
    sim.create_dir_all(Path::new(DIR)).unwrap();
    let config = SegmentConfig {
        index_spacing_bytes: 1,
        preallocate_bytes: None,
    };
    let mut first = SegmentWriter::create(&fs, Path::new(DIR), 0, 0, config, "t".into()).unwrap();
    first.append(&vec![Record::new(1, "a"); 5]).unwrap();
    first.seal().unwrap();
    let mut second = SegmentWriter::create(&fs, Path::new(DIR), 1, 5, config, "t".into()).unwrap();
    second.append(&vec![Record::new(2, "b"); 5]).unwrap();
    second.sync().unwrap();
    for id in [0, 1] {
        sim.remove_file(&Path::new(DIR).join(format!("{id:020}.index")))
            .unwrap();
    }
    sim
}

#[test]
fn repair_on_a_full_disk_reports_the_index_it_could_not_write_and_does_the_rest() {
    let sim = shard_without_indexes();
    sim.inject(Fault {
        op: FaultOp::Write,
        path_contains: "00000000000000000000.index".into(),
        skip: 0,
        effect: FaultEffect::Errno(28),
    });
    let fs = FileSystem::new(sim.clone());
    let inspection = inspect(&fs, Path::new(DIR), "t", &Default::default()).unwrap();
    assert_eq!(inspection.plan.len(), 2, "{:?}", inspection.plan);
    let lock = ShardLock::acquire(&fs, Path::new(DIR)).unwrap();
    let repaired = repair(&fs, &inspection, RepairPolicy::Default, &lock).unwrap();
    assert_eq!(
        repaired.notes,
        [Note::IndexNotWritten {
            segment: 0,
            kind: std::io::ErrorKind::StorageFull,
            not_regular: None,
        }]
    );
    assert!(matches!(
        repaired.actions.as_slice(),
        [Action::RebuildIndex { segment: 1, .. }]
    ));
    assert!(
        sim.read_file(Path::new("/shard/00000000000000000001.index"))
            .unwrap()
            .len()
            > 24
    );
}

#[test]
fn open_on_a_full_disk_opens_and_keeps_the_note() {
    let sim = shard_without_indexes();
    sim.inject(Fault {
        op: FaultOp::Write,
        path_contains: ".index".into(),
        skip: 0,
        effect: FaultEffect::Errno(28),
    });
    let fs = FileSystem::new(sim);
    let lock = ShardLock::acquire(&fs, Path::new(DIR)).unwrap();
    let opened = open_shard(&fs, Path::new(DIR), "t", &OpenOptions::default(), &lock).unwrap();
    assert_eq!(opened.newest.as_ref().map(|n| n.next_offset), Some(10));
    assert!(opened.inspection.notes.contains(&Note::IndexNotWritten {
        segment: 0,
        kind: std::io::ErrorKind::StorageFull,
        not_regular: None,
    }));
}
