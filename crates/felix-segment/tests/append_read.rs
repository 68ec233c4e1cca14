//! Appending batches and reading them back through the writer and the file.

mod common;

use common::{label, payload_for, record, writer};
use felix_format::{MAX_PAYLOAD_BYTES, SEGMENT_HEADER_LEN, record_encoded_len};
use felix_segment::{Record, SegmentConfig, SegmentError, SegmentFile, SegmentWriter};

#[test]
fn append_batches_of_many_sizes_read_back_identical() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(dir.path(), 1000, 512);
    let mut next = 1000u64;
    let mut lens = Vec::new();
    for (batch, &payload_len) in [1usize, 2, 3, 16, 100]
        .iter()
        .zip(&[0usize, 1, 100, 4096, 70_000])
    {
        let records: Vec<_> = (0..*batch as u64)
            .map(|i| record(next + i, payload_len))
            .collect();
        let appended = w.append(&records).unwrap();
        assert_eq!(appended.first_offset, next);
        assert_eq!(appended.last_offset, next + *batch as u64 - 1);
        lens.extend(std::iter::repeat_n(payload_len, *batch));
        next += *batch as u64;
    }
    assert_eq!(w.next_offset(), next);
    let expected_len: u64 = SEGMENT_HEADER_LEN as u64
        + lens
            .iter()
            .map(|&l| record_encoded_len(l as u32))
            .sum::<u64>();
    assert_eq!(w.len(), expected_len);
    for (i, &len) in lens.iter().enumerate() {
        let offset = 1000 + i as u64;
        let records = w.read(offset, 0).unwrap();
        assert_eq!(
            records.len(),
            1,
            "at least one record even with a zero budget"
        );
        assert_eq!(records[0].offset, offset);
        assert_eq!(records[0].timestamp_micros, offset * 10);
        assert_eq!(records[0].payload, payload_for(offset, len));
    }
}

#[test]
fn append_payloads_up_to_one_mebibyte_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(dir.path(), 0, 4096);
    let sizes = [0usize, 1, 27, 28, 4095, 4096, 4097, 65_536, 1 << 20];
    let records: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| record(i as u64, n))
        .collect();
    w.append(&records).unwrap();
    let all = w.read(0, u64::MAX).unwrap();
    assert_eq!(all.len(), sizes.len());
    for (i, read) in all.iter().enumerate() {
        assert_eq!(read.payload, payload_for(i as u64, sizes[i]));
    }
}

#[test]
fn read_budget_stops_at_whole_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(dir.path(), 0, 4096);
    let records: Vec<_> = (0..10).map(|i| record(i, 72)).collect(); // 100 bytes each
    w.append(&records).unwrap();
    let offsets =
        |v: Vec<felix_segment::ReadRecord>| v.iter().map(|r| r.offset).collect::<Vec<_>>();
    assert_eq!(offsets(w.read(2, 100).unwrap()), [2]);
    assert_eq!(offsets(w.read(2, 299).unwrap()), [2, 3]);
    assert_eq!(offsets(w.read(2, 300).unwrap()), [2, 3, 4]);
    assert_eq!(offsets(w.read(8, 10_000).unwrap()), [8, 9]);
}

#[test]
fn read_outside_the_segment_is_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(dir.path(), 5, 4096);
    w.append(&[record(5, 3)]).unwrap();
    for offset in [4, 6] {
        let err = w.read(offset, 100).unwrap_err();
        assert!(
            matches!(err, SegmentError::OffsetOutOfRange { segment: 0, offset: o, base_offset: 5, next_offset: 6 } if o == offset),
            "{err:?}"
        );
    }
}

#[test]
fn append_record_larger_than_index_spacing_is_indexed_and_readable() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(dir.path(), 0, 64);
    w.append(&[record(0, 10), record(1, 1000), record(2, 10), record(3, 10)])
        .unwrap();
    let positions: Vec<_> = w
        .index_entries()
        .iter()
        .map(|e| (e.offset, e.position))
        .collect();
    // Record 1 starts 38 bytes in (no entry); record 2 starts 1066 bytes past
    // entry 0 (entry); record 3 is only 38 bytes after record 2 (no entry).
    assert_eq!(positions, [(0, 32), (2, 32 + 38 + 1028)]);
    assert_eq!(w.read(1, 1).unwrap()[0].payload, payload_for(1, 1000));
    assert_eq!(w.read(3, 1).unwrap()[0].payload, payload_for(3, 10));
}

#[test]
fn append_payload_of_exactly_the_limit_is_accepted_and_one_more_rejected_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(dir.path(), 0, 4096);
    let max = vec![7u8; MAX_PAYLOAD_BYTES as usize];
    let over = vec![7u8; MAX_PAYLOAD_BYTES as usize + 1];
    let len_before = std::fs::metadata(w.segment().path()).unwrap().len();
    let err = w
        .append(&[Record::new(0, "ok"), Record::new(0, over)])
        .unwrap_err();
    assert!(
        matches!(err, SegmentError::PayloadTooLarge { index_in_batch: 1, len, max: MAX_PAYLOAD_BYTES } if len == MAX_PAYLOAD_BYTES as usize + 1),
        "{err:?}"
    );
    assert_eq!(
        std::fs::metadata(w.segment().path()).unwrap().len(),
        len_before
    );
    assert_eq!(w.next_offset(), 0);
    w.append(&[Record::new(0, max.clone())]).unwrap();
    let read = w.read(0, 1).unwrap();
    assert_eq!(read[0].payload.len(), max.len());
    assert!(read[0].payload.iter().all(|&b| b == 7));
}

#[test]
fn append_empty_batch_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(dir.path(), 0, 4096);
    assert!(matches!(w.append(&[]), Err(SegmentError::EmptyBatch)));
}

#[test]
fn create_refuses_to_overwrite_an_existing_segment() {
    let dir = tempfile::tempdir().unwrap();
    let _w = writer(dir.path(), 0, 4096);
    let err = SegmentWriter::create(
        &felix_io::FileSystem::os(),
        dir.path(),
        0,
        0,
        SegmentConfig::default(),
        label(),
    )
    .unwrap_err();
    match err {
        SegmentError::Io(err) if err.op() == "create" => {
            assert_eq!(err.path(), dir.path().join("00000000000000000000.log"));
            assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn create_base_offset_is_independent_of_id() {
    let dir = tempfile::tempdir().unwrap();
    let config = SegmentConfig::default();
    let mut w = SegmentWriter::create(
        &felix_io::FileSystem::os(),
        dir.path(),
        7,
        511,
        config,
        label(),
    )
    .unwrap();
    w.append(&[record(511, 4)]).unwrap();
    w.sync().unwrap();
    let (file, len) = SegmentFile::open(
        &felix_io::FileSystem::os(),
        dir.path(),
        7,
        label(),
        felix_io::OpenMode::ReadWrite,
    )
    .unwrap();
    assert_eq!(file.base_offset(), 511);
    assert_eq!(file.id(), 7);
    assert_eq!(len, 32 + 32);
    assert!(dir.path().join("00000000000000000007.index").exists());
}

#[test]
fn seal_trims_preallocation_so_file_length_equals_records() {
    let dir = tempfile::tempdir().unwrap();
    let config = SegmentConfig {
        index_spacing_bytes: 100,
        preallocate_bytes: Some(8 << 20),
    };
    let mut w = SegmentWriter::create(
        &felix_io::FileSystem::os(),
        dir.path(),
        0,
        0,
        config,
        label(),
    )
    .unwrap();
    let records: Vec<_> = (0..50).map(|i| record(i, 200)).collect();
    w.append(&records).unwrap();
    let path = w.segment().path().to_path_buf();
    // KEEP_SIZE preallocation never changes the visible length.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), w.len());
    let sealed = w.seal().unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.len(), 32 + 50 * 228);
    assert_eq!(sealed.extent.len, meta.len());
    assert_eq!(sealed.extent.next_offset, 50);
    // Blocks beyond the records were released (st_blocks counts 512-byte units).
    use std::os::unix::fs::MetadataExt;
    assert!(
        meta.blocks() * 512 < 1 << 20,
        "{} blocks still allocated",
        meta.blocks()
    );
}

#[test]
fn append_past_the_last_offset_is_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(dir.path(), u64::MAX - 2, 512);
    w.append(&[record(0, 3)]).unwrap();
    let len = w.len();
    let err = w.append(&[record(1, 3), record(2, 3)]).unwrap_err();
    assert!(
        matches!(
            err,
            SegmentError::OffsetSpaceExhausted { segment: 0, next_offset, records: 2 }
                if next_offset == u64::MAX - 1
        ),
        "{err:?}"
    );
    assert_eq!(w.len(), len, "nothing written");
    assert!(w.poisoned().is_none());
    let last = w.append(&[record(1, 3)]).unwrap();
    assert_eq!(
        (last.last_offset, w.next_offset()),
        (u64::MAX - 1, u64::MAX)
    );
}
