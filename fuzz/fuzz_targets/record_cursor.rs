//! The record cursor on arbitrary bytes, taken as a segment file (its
//! records from byte 32, the base offset from bytes 8..16 whatever the
//! header's checks say): never panics — its debug assertions included —
//! gives the same verdict fed the whole file or a few bytes at a time, and
//! every record it yields has a verified header where it says (and, read
//! in full, decodes with `decode_record`), the next one beginning where it
//! ends.
#![no_main]

use felix_format::{
    CursorStep, Damage, RecordCursor, SEGMENT_HEADER_LEN, ScanDepth, SliceRecords, decode_record,
    decode_record_header,
};
use libfuzzer_sys::fuzz_target;

type Verdict = (Vec<(u64, u64)>, Option<Damage>, u64, u64);

fn whole(file: &[u8], cursor: RecordCursor) -> Verdict {
    let mut walk = SliceRecords::new(file, cursor);
    let mut records = Vec::new();
    let mut damage = None;
    for step in walk.by_ref() {
        match step {
            Ok(record) => records.push((record.header.offset, record.position)),
            Err(d) => damage = Some(d),
        }
    }
    let c = walk.cursor();
    (records, damage, c.next_offset(), c.position())
}

fn chunked(file: &[u8], mut cursor: RecordCursor, chunk: usize) -> Verdict {
    let mut records = Vec::new();
    let mut buffered = 0usize;
    let damage = loop {
        let at = cursor.position() as usize;
        let available = (file.len() - at).min(buffered);
        match cursor.step(&file[at..at + available]) {
            CursorStep::NeedBytes { needed } => {
                assert!(at + needed as usize <= file.len());
                buffered = (needed as usize).max(available + chunk);
            }
            CursorStep::Record(record) => {
                records.push((record.header.offset, record.position));
                buffered = available.saturating_sub(record.encoded_len() as usize);
            }
            CursorStep::End => break None,
            CursorStep::Damage(d) => break Some(d),
            CursorStep::Declined { .. } => unreachable!(),
        }
    };
    (records, damage, cursor.next_offset(), cursor.position())
}

fuzz_target!(|file: &[u8]| {
    let start = file.len().min(SEGMENT_HEADER_LEN);
    let base = file
        .get(8..16)
        .map_or(0, |b| u64::from_be_bytes(b.try_into().unwrap()));
    let chunk = usize::from(file.first().copied().unwrap_or(1)).max(1);
    for depth in [ScanDepth::Headers, ScanDepth::Full] {
        let cursor = RecordCursor::new(start as u64, base, file.len() as u64, depth);
        let verdict = whole(file, cursor);
        assert_eq!(chunked(file, cursor, chunk), verdict);
        let (records, damage, next_offset, position) = &verdict;
        let mut expected = (base, start as u64);
        for &(offset, at) in records {
            assert_eq!((offset, at), expected);
            let bytes = &file[at as usize..];
            let header = decode_record_header(bytes).expect("a record's header verifies");
            assert_eq!(header.offset, offset);
            assert!(at + header.encoded_len() <= file.len() as u64);
            if depth == ScanDepth::Full {
                decode_record(bytes, Some(offset)).expect("a record read in full decodes");
            }
            expected = (offset + 1, at + header.encoded_len());
        }
        assert_eq!((*next_offset, *position), expected);
        if let Some(d) = damage {
            assert_eq!(d.position, *position);
        } else {
            assert_eq!(*position, file.len() as u64);
        }
    }
});
