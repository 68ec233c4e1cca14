//! An index file that cannot be written never stops a segment's writer:
//! the index stays in memory (readers seek through it) and is written
//! whole when the segment is sealed.

use std::path::Path;

use felix_io::sim::{Fault, FaultEffect, FaultOp, SimFs};
use felix_io::{FileSystem, Vfs};
use felix_segment::{Record, SegmentConfig, SegmentWriter, SparseIndex};

#[test]
fn append_with_an_unwritable_index_keeps_it_in_memory_and_seal_writes_it() {
    let sim = SimFs::new();
    sim.create_dir_all(Path::new("/d")).unwrap();
    let fs = FileSystem::new(sim.clone());
    sim.inject(Fault {
        op: FaultOp::Write,
        path_contains: ".index".into(),
        skip: 0,
        effect: FaultEffect::Errno(28),
    });
    let config = SegmentConfig {
        index_spacing_bytes: 1,
        preallocate_bytes: None,
    };
    let mut writer = SegmentWriter::create(&fs, Path::new("/d"), 0, 0, config, "t".into()).unwrap();
    assert!(!writer.index_persisted());
    let records: Vec<_> = (0..10).map(|i| Record::new(i, format!("r{i}"))).collect();
    writer.append(&records).unwrap();
    writer.sync().unwrap();
    assert_eq!(writer.index_entries().len(), 10, "held in memory");
    assert_eq!(writer.read(7, 1).unwrap()[0].payload, "r7");

    let sealed = writer.seal().unwrap();
    let index_path = sealed.segment.index_path();
    let loaded = SparseIndex::load(&fs, &index_path, 0, sealed.extent.len).unwrap();
    assert_eq!(
        loaded.entries(),
        sealed.index.entries(),
        "written whole at the seal"
    );
}

#[test]
fn flush_of_an_index_that_fails_drops_the_file_and_persist_writes_it_whole() {
    let sim = SimFs::new();
    sim.create_dir_all(Path::new("/d")).unwrap();
    let fs = FileSystem::new(sim.clone());
    let config = SegmentConfig {
        index_spacing_bytes: 1,
        preallocate_bytes: None,
    };
    let mut writer = SegmentWriter::create(&fs, Path::new("/d"), 0, 0, config, "t".into()).unwrap();
    writer
        .append(&[Record::new(1, "a"), Record::new(2, "b")])
        .unwrap();
    sim.inject(Fault {
        op: FaultOp::Write,
        path_contains: ".index".into(),
        skip: 0,
        effect: FaultEffect::Errno(28),
    });
    let err = writer.flush_index().unwrap_err();
    assert_eq!(err.io_kind(), Some(std::io::ErrorKind::StorageFull));
    assert!(!writer.index_persisted());
    assert!(writer.poisoned().is_none(), "the writer goes on");
    writer.append(&[Record::new(3, "c")]).unwrap();
    writer.persist_index().unwrap();
    assert!(writer.index_persisted());
    let index_path = writer.segment().index_path();
    let loaded = SparseIndex::load(&fs, &index_path, 0, writer.len()).unwrap();
    assert_eq!(loaded.entries(), writer.index_entries());
}
