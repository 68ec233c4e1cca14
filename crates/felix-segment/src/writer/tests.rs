use super::*;

/// Swaps the writer's descriptor for a read-only one, so the next write
/// fails with a real `EBADF` from the kernel.
fn break_writes(writer: &mut SegmentWriter) {
    let seg = &writer.segment;
    let read_only = seg.fs().open(seg.path(), OpenMode::Read).unwrap();
    writer.segment = Arc::new(SegmentFile::from_parts(
        seg.fs(),
        seg.id(),
        *seg.header(),
        seg.path().to_path_buf(),
        read_only,
        Arc::clone(seg.shard()),
    ));
}

#[test]
fn append_after_write_failure_refuses_with_the_original_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = SegmentWriter::create(
        &felix_io::FileSystem::os(),
        dir.path(),
        0,
        0,
        SegmentConfig::default(),
        "t".into(),
    )
    .unwrap();
    writer.append(&[Record::new(1, "kept")]).unwrap();
    break_writes(&mut writer);

    // The append whose write failed gets that failure, not "an earlier
    // one"; the writer keeps a copy as the reason it stopped.
    let first = writer.append(&[Record::new(2, "lost")]).unwrap_err();
    assert!(
        matches!(&first, SegmentError::Io(err) if err.op() == "write" && err.path() == writer.segment.path() && err.raw_os_error() == Some(9)),
        "{first:?}"
    );
    let original = Arc::clone(writer.poisoned().unwrap());
    assert_eq!(original.to_string(), first.to_string());
    // The failed batch was never counted.
    assert_eq!(writer.next_offset(), 1);
    assert_eq!(writer.len(), 32 + 28 + 4);

    for err in [
        writer.append(&[Record::new(3, "x")]).unwrap_err(),
        writer.sync().unwrap_err(),
        writer.sync_handle().sync_data().unwrap_err(),
    ] {
        let SegmentError::Poisoned {
            original: again, ..
        } = &err
        else {
            panic!("{err:?}")
        };
        assert!(
            Arc::ptr_eq(&original, again),
            "the same original failure every time"
        );
    }
    // What was written before the failure is still readable.
    assert_eq!(writer.read(0, 100).unwrap()[0].payload, "kept");
    assert!(matches!(writer.seal(), Err(SegmentError::Poisoned { .. })));
}
