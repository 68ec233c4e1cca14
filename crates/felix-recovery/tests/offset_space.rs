//! The end of the offset space: a segment holds records up to offset
//! `u64::MAX - 1` (so that the offset after the last one can be named), and
//! a crafted record carrying `u64::MAX` is damage the walk reports — it
//! used to wrap the walk's next offset to 0, and panicked a debug build.

mod common;

use common::{LABEL, copy_of, inspect_unchanged, lock, open_refused, seg_path};
use felix_format::{
    CorruptionKind, CorruptionSite, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN, SegmentHeader,
    encode_record_header,
};
use felix_io::FileSystem;
use felix_recovery::{
    Action, DamageLocation, Finding, FindingContext, InspectOptions, OpenOptions, RepairClass,
    RepairPolicy, open_shard,
};

/// One segment from offset `u64::MAX - 1`: the last record a shard can
/// hold, then one claiming `u64::MAX` with both checksums valid.
fn build(dir: &std::path::Path) -> (u64, u64) {
    let mut bytes = SegmentHeader::new(u64::MAX - 1, 1).encode().to_vec();
    for offset in [u64::MAX - 1, u64::MAX] {
        bytes.extend_from_slice(&encode_record_header(offset, 0, b"last").unwrap());
        bytes.extend_from_slice(b"last");
    }
    std::fs::write(seg_path(dir, 0), &bytes).unwrap();
    let crafted = (SEGMENT_HEADER_LEN + RECORD_HEADER_LEN + 4) as u64;
    (crafted, bytes.len() as u64)
}

#[test]
fn inspect_record_at_offset_u64_max_is_offset_overflow_opt_in() {
    let dir = tempfile::tempdir().unwrap();
    let (crafted, len) = build(dir.path());
    let inspection = inspect_unchanged(dir.path(), &InspectOptions::default());
    let finding = Finding {
        kind: CorruptionKind::OffsetOverflow { found: u64::MAX },
        site: CorruptionSite::new(LABEL, 0, crafted),
        // Its header verified: the record is whole on disk, so it may be
        // rot (or a crafted file), never a torn write.
        repair: RepairClass::OptIn,
        context: FindingContext::Record {
            location: DamageLocation::NewestConfined,
            intact_record_at: None,
            tail_all_zero: false,
            tail_bytes: len - crafted,
            unwritten: None,
        },
    };
    assert_eq!(inspection.findings, std::slice::from_ref(&finding));
    // The shard's next offset is the last one there is.
    assert_eq!(inspection.next_offset(), Some(u64::MAX));
    assert_eq!(inspection.records(), Some(1));

    assert_eq!(open_refused(dir.path(), &OpenOptions::default()), [finding]);
    let copy = copy_of(dir.path());
    let options = OpenOptions {
        repair_policy: RepairPolicy::ChecksumTail,
        ..OpenOptions::default()
    };
    let opened = open_shard(
        &FileSystem::os(),
        copy.path(),
        LABEL,
        &options,
        &lock(copy.path()),
    )
    .unwrap();
    assert_eq!(
        opened.actions,
        [
            Action::Truncate {
                segment: 0,
                path: seg_path(copy.path(), 0),
                from_len: len,
                to_len: crafted,
            },
            // No index was written beside the crafted segment.
            Action::RebuildIndex {
                segment: 0,
                path: common::index_path(copy.path(), 0),
                entries: 1,
            },
        ]
    );
    let newest = opened.newest.unwrap();
    assert_eq!((newest.next_offset, newest.len), (u64::MAX, crafted));
}
