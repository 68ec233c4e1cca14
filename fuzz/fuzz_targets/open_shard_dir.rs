//! Opening a shard directory made from fuzz input: inspection and recovery
//! never panic, and every record a successful open leaves readable passes
//! its checksums.
//!
//! Input layout: byte 0 picks options (bit 0: prepend a valid segment header
//! to segment 0 so the fuzzer reaches records quickly; bit 1: a second
//! segment; bit 2: an index file for segment 0; bit 3: repair_checksum_tail;
//! bit 4: a clean-shutdown file, trusted on open, whose claims about segment
//! 0 come from bits 5..8 — true or not), bytes 1..3 split the rest between
//! the files.
#![no_main]

use std::sync::Arc;

use felix_format::SegmentExtent;
use felix_format::{FileKind, SegmentHeader, file_name};
use felix_io::FileSystem;
use felix_recovery::{
    IndexCheck, InspectOptions, OpenOptions, RepairPolicy, ShardLock, inspect, open_shard,
};
use felix_segment::{ReadLimit, SegmentFile};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Some((split, rest)) = rest.split_first_chunk::<2>() else {
        return;
    };
    let split = (u16::from_be_bytes(*split) as usize).min(rest.len());
    let (first, second) = rest.split_at(split);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut seg0 = Vec::new();
    if flags & 1 != 0 {
        seg0.extend_from_slice(&SegmentHeader::new(0, 0).encode());
    }
    let (seg0_body, other) = if flags & 4 != 0 {
        first.split_at(first.len() / 2)
    } else {
        (first, &[][..])
    };
    seg0.extend_from_slice(seg0_body);
    std::fs::write(
        dir.path().join(file_name(0, FileKind::Segment).as_str()),
        &seg0,
    )
    .expect("write");
    if flags & 4 != 0 {
        std::fs::write(
            dir.path().join(file_name(0, FileKind::Index).as_str()),
            other,
        )
        .expect("write");
    }
    if flags & 2 != 0 {
        std::fs::write(
            dir.path().join(file_name(1, FileKind::Segment).as_str()),
            second,
        )
        .expect("write");
    }
    if flags & 16 != 0 {
        let next0 = u64::from(flags >> 5);
        let mut segments = vec![SegmentExtent {
            id: 0,
            base_offset: 0,
            next_offset: next0,
            len: (seg0.len() as u64).max(32),
        }];
        if flags & 2 != 0 {
            segments.push(SegmentExtent {
                id: 1,
                base_offset: next0,
                next_offset: next0,
                len: (second.len() as u64).max(32),
            });
        }
        felix_recovery::write_clean_shutdown(&FileSystem::os(), dir.path(), &segments)
            .expect("write clean-shutdown");
    }
    let _ = inspect(
        &FileSystem::os(),
        dir.path(),
        "fuzz",
        &InspectOptions {
            index_spacing_bytes: 64,
            full_verify: true,
            index_check: IndexCheck::EveryEntry,
        },
    );
    let options = OpenOptions {
        inspect: InspectOptions {
            index_spacing_bytes: 64,
            full_verify: false,
            index_check: IndexCheck::LastEntry,
        },
        repair_policy: if flags & 8 != 0 {
            RepairPolicy::ChecksumTail
        } else {
            RepairPolicy::Default
        },
        use_clean_shutdown: true,
        keep_clean_shutdown: false,
    };
    let fs = FileSystem::os();
    let lock = ShardLock::acquire(&fs, dir.path()).expect("lock the shard directory");
    let Ok(shard) = open_shard(&fs, dir.path(), "fuzz", &options, &lock) else {
        return;
    };
    if let Some(newest) = shard.newest {
        let limit = ReadLimit {
            end_position: newest.len,
            next_offset: newest.next_offset,
        };
        let base = newest.file.base_offset();
        if base < newest.next_offset {
            let records = newest
                .file
                .read(newest.index.seek(base), base, limit, u64::MAX)
                .expect("a recovered newest segment reads back in full");
            assert_eq!(records.len() as u64, newest.next_offset - base);
        }
    }
    for sealed in shard.sealed {
        // A sealed segment taken from a trusted clean-shutdown record was not
        // opened by recovery, so a lie in the record surfaces here, as an
        // error: never as data.
        let Ok((file, _)) = SegmentFile::open(
            &FileSystem::os(),
            dir.path(),
            sealed.id,
            Arc::from("fuzz"),
            felix_io::OpenMode::Read,
        ) else {
            assert!(flags & 16 != 0, "an inspected sealed segment opens");
            continue;
        };
        if sealed.base_offset < sealed.next_offset {
            let limit = ReadLimit {
                end_position: sealed.len,
                next_offset: sealed.next_offset,
            };
            let start = felix_recovery::ScanStart::first_record(&file);
            let entry = felix_format::IndexEntry {
                offset: start.offset,
                position: start.position,
            };
            // A sealed segment is only tail-checked on open, so damage in its
            // middle may surface here as an error: never as wrong data.
            if let Ok(records) = file.read(entry, sealed.base_offset, limit, u64::MAX) {
                assert_eq!(
                    records.len() as u64,
                    sealed.next_offset - sealed.base_offset
                );
            }
        }
    }
});
