//! The disk a power cut during an unacknowledged batch leaves, built from a
//! real segment at page granularity.
//!
//! The segment is the one `felix-store write --records 300 --payload-bytes
//! 100 --batch 100 --no-preallocate` writes: three batches of 100 records
//! (128 bytes each on disk), each synced before the next is written. File
//! systems persist a batch's 4 KiB pages in any order and may persist the
//! file's size before its data, so a page of the last batch that did not
//! reach the disk reads as it was at the last sync: the earlier batch's
//! bytes where it holds them, zeros where the last batch's bytes would be.
//! Every such state is one only unacknowledged writes produced, and a
//! default open repairs it, keeping every acknowledged record.
//!
//! Around those: a zero block wholly inside one payload (opt-in unless it
//! reaches the end of the file, never when an intact record follows), a
//! rotted acknowledged record in front of never-written blocks (opt-in, not
//! never), and the rule's one documented limit.

mod common;

use std::path::Path;

use common::{
    LABEL, RecordAt, copy_of, crc32, expected_record_kind, inspect_unchanged, interop_payload,
    open_refused, seg_path, try_read_back,
};
use felix_format::{CorruptionKind, CorruptionSite, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use felix_recovery::{
    BLOCK_BYTES, DamageLocation, Finding, FindingContext, InspectOptions, OpenOptions, RepairClass,
    RepairPolicy, UnwrittenBlocks, open_shard,
};
use felix_segment::{Record, SegmentConfig, SegmentWriter};

/// A shard written batch by batch with the real writer, each batch synced.
struct Written {
    dir: tempfile::TempDir,
    /// The segment's bytes after the last batch was written.
    bytes: Vec<u8>,
    records: Vec<RecordAt>,
    /// Payload of each offset.
    payloads: Vec<Vec<u8>>,
    /// Where the last batch begins: every byte before it was synced.
    durable_len: u64,
}

impl Written {
    /// `batches[i]` holds the payloads of batch `i`; record `o` gets
    /// timestamp `o`.
    fn new(batches: &[Vec<Vec<u8>>]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = SegmentConfig {
            index_spacing_bytes: 4096,
            preallocate_bytes: None,
        };
        let mut writer = SegmentWriter::create(
            &felix_io::FileSystem::os(),
            dir.path(),
            0,
            0,
            config,
            LABEL.into(),
        )
        .unwrap();
        let mut payloads = Vec::new();
        let mut records = Vec::new();
        let mut position = SEGMENT_HEADER_LEN as u64;
        let mut durable_len = position;
        for batch in batches {
            durable_len = position;
            let base = payloads.len() as u64;
            let batch_records: Vec<Record> = batch
                .iter()
                .enumerate()
                .map(|(i, p)| Record::new(base + i as u64, p.clone()))
                .collect();
            writer.append(&batch_records).unwrap();
            writer.sync().unwrap();
            for p in batch {
                let len = (RECORD_HEADER_LEN + p.len()) as u64;
                records.push(RecordAt {
                    segment: 0,
                    offset: payloads.len() as u64,
                    position,
                    len,
                });
                position += len;
                payloads.push(p.clone());
            }
        }
        drop(writer);
        let bytes = std::fs::read(seg_path(dir.path(), 0)).unwrap();
        assert_eq!(bytes.len() as u64, position);
        Self {
            dir,
            bytes,
            records,
            payloads,
            durable_len,
        }
    }

    /// The segment `felix-store write --records 300 --payload-bytes 100
    /// --batch 100` writes.
    fn cli() -> Self {
        let batches: Vec<Vec<Vec<u8>>> = (0..3)
            .map(|b| {
                (b * 100..b * 100 + 100)
                    .map(|o| interop_payload(o, 100))
                    .collect()
            })
            .collect();
        let written = Self::new(&batches);
        assert_eq!(written.durable_len, 25_632);
        assert_eq!(written.bytes.len(), 38_432);
        written
    }

    /// The 4 KiB pages holding bytes of the last batch.
    fn last_batch_pages(&self) -> std::ops::RangeInclusive<u64> {
        self.durable_len / BLOCK_BYTES..=(self.bytes.len() as u64 - 1) / BLOCK_BYTES
    }

    /// The segment after a power cut in which `lost` pages of the last
    /// batch did not reach the disk, the file's size having gone ahead.
    fn lose_pages(&self, lost: &[u64]) -> Vec<u8> {
        let mut bytes = self.bytes.clone();
        for &page in lost {
            let from = (page * BLOCK_BYTES).max(self.durable_len) as usize;
            let to = ((page + 1) * BLOCK_BYTES).min(bytes.len() as u64) as usize;
            bytes[from..to].fill(0);
        }
        bytes
    }

    /// A copy of the shard with the segment replaced by `segment`.
    fn crashed(&self, segment: &[u8]) -> tempfile::TempDir {
        let dir = copy_of(self.dir.path());
        std::fs::write(seg_path(dir.path(), 0), segment).unwrap();
        dir
    }

    /// The record holding byte `position`.
    fn record_at(&self, position: u64) -> RecordAt {
        *self
            .records
            .iter()
            .find(|r| r.position <= position && position < r.end())
            .unwrap()
    }
}

fn inspect_options() -> InspectOptions {
    InspectOptions {
        index_spacing_bytes: 4096,
        full_verify: false,
        ..InspectOptions::default()
    }
}

/// The one finding of `dir`'s inspection.
fn only_finding(dir: &Path) -> Finding {
    let mut findings = inspect_unchanged(dir, &inspect_options()).findings;
    assert_eq!(findings.len(), 1, "{findings:?}");
    findings.remove(0)
}

/// Opens `dir` under `policy`, expecting
/// the newest segment cut back to the record at `keep_before` and every
/// earlier record read back intact.
fn assert_opens_keeping(dir: &Path, w: &Written, keep_before: &RecordAt, policy: RepairPolicy) {
    let options = OpenOptions {
        inspect: inspect_options(),
        repair_policy: policy,
        use_clean_shutdown: false,
        keep_clean_shutdown: false,
    };
    let shard = open_shard(
        &felix_io::FileSystem::os(),
        dir,
        LABEL,
        &options,
        &common::lock(dir),
    )
    .unwrap();
    let newest = shard.newest.as_ref().unwrap();
    assert_eq!(
        (newest.next_offset, newest.len),
        (keep_before.offset, keep_before.position)
    );
    let got: Vec<(u64, Vec<u8>)> = try_read_back(dir, &shard)
        .into_iter()
        .map(|(o, r)| (o, r.unwrap()))
        .collect();
    let want: Vec<(u64, Vec<u8>)> = (0..keep_before.offset)
        .map(|o| (o, w.payloads[o as usize].clone()))
        .collect();
    assert_eq!(got, want);
}

/// What recovery must report for the crash state `bytes` in which the
/// last batch's pages `lost` did not persist, worked out from the shape:
/// the damage is the record holding the first lost byte; when that byte
/// is a header, the damage is a zero header, otherwise a bad checksum; the
/// never-written blocks are the consecutive lost pages from the first.
fn expected_for_lost_pages(w: &Written, bytes: &[u8], lost: &[u64]) -> Finding {
    let first_page = *lost.iter().min().unwrap();
    let first_lost = (first_page * BLOCK_BYTES).max(w.durable_len);
    let r = w.record_at(first_lost);
    let file_len = bytes.len() as u64;
    let kind = if first_lost == r.position {
        CorruptionKind::RecordHeaderChecksum {
            expected: 0,
            found: crc32(&[&[0u8; 20]]),
        }
    } else {
        expected_record_kind(bytes, &r, first_lost)
    };
    let pages_in_file = w.last_batch_pages();
    let lost_to_end = (first_page..=*pages_in_file.end()).all(|p| lost.contains(&p));
    let blocks = (first_page..=*pages_in_file.end())
        .take_while(|p| lost.contains(p))
        .count() as u64;
    // The first record after the damage lying wholly in persisted pages.
    let intact_record_at = w
        .records
        .iter()
        .filter(|x| x.position > r.position)
        .find(|x| {
            (x.position / BLOCK_BYTES..=(x.end() - 1) / BLOCK_BYTES).all(|p| !lost.contains(&p))
        })
        .map(|x| x.position);
    let (location, unwritten) = if first_lost == r.position && lost_to_end {
        // Zeros from a header to the end of the file: the rule as it was.
        (DamageLocation::NewestUnwritten, None)
    } else {
        (
            DamageLocation::NewestUnwrittenBlocks,
            Some(UnwrittenBlocks {
                from: first_lost,
                blocks,
                first_record: r.position,
            }),
        )
    };
    Finding {
        kind,
        site: CorruptionSite::new(LABEL, 0, r.position),
        repair: RepairClass::Default,
        context: FindingContext::Record {
            location,
            intact_record_at,
            tail_all_zero: bytes[r.position as usize..].iter().all(|&b| b == 0),
            tail_bytes: file_len - r.position,
            unwritten,
        },
    }
}

/// Checks one crash state of the CLI segment end to end: the exact finding,
/// a default open that keeps every record before it (all 200 acknowledged
/// ones among them), and the finding's text.
fn check_lost_pages(w: &Written, lost: &[u64]) -> String {
    let bytes = w.lose_pages(lost);
    let dir = w.crashed(&bytes);
    let expected = expected_for_lost_pages(w, &bytes, lost);
    assert_eq!(only_finding(dir.path()), expected, "pages {lost:?} lost");
    let keep_before = w.record_at(expected.site.position);
    assert!(keep_before.offset >= 200, "an acknowledged record would go");
    assert_opens_keeping(dir.path(), w, &keep_before, RepairPolicy::Default);
    format!("pages {lost:?} lost:\n  {expected}\n")
}

/// Prefix pages persisted and the rest zeros (the size went ahead): the
/// first lost page decides, and every state opens by default. Before
/// blocks counted, three of these four were refused as `RecordChecksum`
/// `[opt_in]`: the page boundary falls inside a record's payload.
#[test]
fn open_prefix_pages_persisted_rest_zeros_repairs_by_default() {
    let w = Written::cli();
    let pages = w.last_batch_pages();
    assert_eq!(pages, 6..=9);
    for first_lost in pages.clone() {
        let lost: Vec<u64> = (first_lost..=*pages.end()).collect();
        check_lost_pages(&w, &lost);
    }
}

/// The same prefixes with the size not ahead: the file ends at the page
/// boundary, inside a record, which is the plain torn write.
#[test]
fn open_prefix_pages_persisted_with_size_at_the_boundary_is_truncated() {
    let w = Written::cli();
    for first_lost in 7..=9u64 {
        let cut = first_lost * BLOCK_BYTES;
        let dir = w.crashed(&w.bytes[..cut as usize]);
        let r = w.record_at(cut);
        let finding = only_finding(dir.path());
        assert_eq!(
            finding.kind,
            CorruptionKind::Truncated {
                needed: r.len,
                available: cut - r.position
            }
        );
        assert_eq!(finding.repair, RepairClass::Default);
        assert_opens_keeping(dir.path(), &w, &r, RepairPolicy::Default);
    }
}

/// One middle page of the batch lost, the pages around it persisted: the
/// record running into it has a verified header, and the page holds the
/// whole header the walk expects next, so nothing from that record on was
/// synced, although intact records follow. Before, `[never]`.
#[test]
fn open_one_middle_page_lost_repairs_by_default_when_it_covers_a_header_position() {
    let w = Written::cli();
    for page in [7, 8] {
        check_lost_pages(&w, &[page]);
    }
    let bytes = w.lose_pages(&[7]);
    let finding = expected_for_lost_pages(&w, &bytes, &[7]);
    assert!(matches!(
        finding.context,
        FindingContext::Record {
            location: DamageLocation::NewestUnwrittenBlocks,
            intact_record_at: Some(32_800),
            unwritten: Some(UnwrittenBlocks {
                from: 28_672,
                blocks: 1,
                first_record: 28_576
            }),
            ..
        }
    ));
}

/// Every subset of the last batch's pages lost (the issue sampled some at
/// random; there are only 15): each opens by default, cut at the first
/// record the first lost page holds bytes of.
#[test]
fn open_any_subset_of_lost_pages_repairs_by_default_at_the_first_lost_record() {
    let w = Written::cli();
    let pages: Vec<u64> = w.last_batch_pages().collect();
    let mut text = String::new();
    for mask in 1..1u32 << pages.len() {
        let lost: Vec<u64> = (0..pages.len())
            .filter(|i| mask >> i & 1 == 1)
            .map(|i| pages[i])
            .collect();
        text.push_str(&check_lost_pages(&w, &lost));
    }
    insta::assert_snapshot!(text);
}

/// A segment whose last batch is one record with a 13,000-byte payload
/// (blocks 1 and 2 lie wholly inside it), after ten synced records;
/// `after` adds a small record to the same batch.
fn big_record(after: bool) -> Written {
    let first: Vec<Vec<u8>> = (0..10).map(|o| interop_payload(o, 100)).collect();
    let mut last = vec![interop_payload(10, 13_000)];
    if after {
        last.push(interop_payload(11, 100));
    }
    Written::new(&[first, last])
}

/// A zero block wholly inside one payload says nothing about what was
/// synced: a payload may hold zeros, and the record may be an acknowledged
/// one that rotted elsewhere. Not reaching the end of the file, it stays
/// opt-in; with an intact record after it, never; reaching the end of the
/// file (the size ahead of the data), it is repaired by default.
#[test]
fn inspect_zero_block_wholly_inside_one_payload_is_opt_in_unless_it_reaches_the_end() {
    let w = big_record(false);
    let big = w.records[10];
    assert_eq!((big.position, big.end()), (1312, 14_340));
    let mut text = String::new();

    let bytes = w.lose_pages(&[1]);
    let dir = w.crashed(&bytes);
    let finding = only_finding(dir.path());
    assert_eq!(finding.kind, expected_record_kind(&bytes, &big, 4096));
    assert_eq!(finding.repair, RepairClass::OptIn);
    assert_eq!(
        finding.context,
        FindingContext::Record {
            location: DamageLocation::NewestConfined,
            intact_record_at: None,
            tail_all_zero: false,
            tail_bytes: 14_340 - 1312,
            unwritten: None,
        }
    );
    let options = OpenOptions {
        inspect: inspect_options(),
        ..OpenOptions::default()
    };
    assert_eq!(
        open_refused(dir.path(), &options),
        std::slice::from_ref(&finding)
    );
    assert_opens_keeping(
        copy_of(dir.path()).path(),
        &w,
        &big,
        RepairPolicy::ChecksumTail,
    );
    text.push_str(&format!("block 1 inside the payload lost:\n  {finding}\n"));

    let bytes = w.lose_pages(&[3]);
    let dir = w.crashed(&bytes);
    let finding = only_finding(dir.path());
    assert_eq!(finding.kind, expected_record_kind(&bytes, &big, 12_288));
    assert_eq!(finding.repair, RepairClass::Default);
    assert_eq!(
        finding.context,
        FindingContext::Record {
            location: DamageLocation::NewestUnwrittenBlocks,
            intact_record_at: None,
            tail_all_zero: false,
            tail_bytes: 14_340 - 1312,
            unwritten: Some(UnwrittenBlocks {
                from: 12_288,
                blocks: 1,
                first_record: 1312
            }),
        }
    );
    assert_opens_keeping(dir.path(), &w, &big, RepairPolicy::Default);
    text.push_str(&format!("block 3, the payload's end, lost:\n  {finding}\n"));

    let w = big_record(true);
    let bytes = w.lose_pages(&[1]);
    let dir = w.crashed(&bytes);
    let finding = only_finding(dir.path());
    assert_eq!(finding.repair, RepairClass::Never);
    assert!(matches!(
        finding.context,
        FindingContext::Record {
            location: DamageLocation::NewestFollowedByIntact,
            intact_record_at: Some(14_340),
            unwritten: None,
            ..
        }
    ));
    text.push_str(&format!(
        "block 1 inside the payload lost, a record after it:\n  {finding}\n"
    ));
    insta::assert_snapshot!(text);
}

/// An acknowledged record that rotted (a flipped payload bit), then a power
/// cut that lost the next batch's first page: the zeros from the next
/// header to the page's end prove the next batch unsynced, so the intact
/// records after them prove nothing and the rot is judged alone — opt-in,
/// where before it was never. The rotted record's own bytes in that page
/// persisted, so the zeros do not explain its damage: no default repair.
#[test]
fn inspect_rotted_record_before_a_never_written_page_is_opt_in_not_never() {
    let w = Written::cli();
    let rotted = w.records[199];
    let mut bytes = w.lose_pages(&[6]);
    bytes[rotted.position as usize + 50] ^= 4;
    let dir = w.crashed(&bytes);
    let finding = only_finding(dir.path());
    assert_eq!(
        finding.kind,
        expected_record_kind(&bytes, &rotted, rotted.position + 50)
    );
    assert_eq!(finding.repair, RepairClass::OptIn);
    assert_eq!(
        finding.context,
        FindingContext::Record {
            location: DamageLocation::NewestConfined,
            intact_record_at: Some(28_704),
            tail_all_zero: false,
            tail_bytes: 38_432 - rotted.position,
            unwritten: Some(UnwrittenBlocks {
                from: 25_632,
                blocks: 1,
                first_record: 25_632
            }),
        }
    );
    let options = OpenOptions {
        inspect: inspect_options(),
        ..OpenOptions::default()
    };
    assert_eq!(
        open_refused(dir.path(), &options),
        std::slice::from_ref(&finding)
    );
    assert_opens_keeping(dir.path(), &w, &rotted, RepairPolicy::ChecksumTail);
    insta::assert_snapshot!(format!("{finding}\n"));
}

/// The rule's one limit, as docs/storage-format.md states it: an
/// acknowledged record whose payload legitimately ends in zeros from a
/// block boundary, that rotted elsewhere, followed by a power cut that lost
/// the next batch's first page, reads exactly like a record the power cut
/// tore, and is repaired by default. Changing this outcome is changing the
/// documented rule.
#[test]
fn open_acknowledged_record_ending_in_zeros_that_rotted_before_a_power_cut_is_repaired_by_default()
{
    // 31 records of 100 bytes end at 4000; record 31 spans 4000..4128, its
    // last 32 bytes (all zero) in block 1. The next batch starts at 4128.
    let mut first: Vec<Vec<u8>> = (0..32).map(|o| interop_payload(o, 100)).collect();
    first[31][68..].fill(0);
    let second: Vec<Vec<u8>> = (32..100).map(|o| interop_payload(o, 100)).collect();
    let w = Written::new(&[first, second]);
    let acked = w.records[31];
    assert_eq!(
        (acked.position, acked.end(), w.durable_len),
        (4000, 4128, 4128)
    );
    let mut bytes = w.lose_pages(&[1]);
    bytes[acked.position as usize + 40] ^= 1;
    let dir = w.crashed(&bytes);
    let finding = only_finding(dir.path());
    assert_eq!(finding.repair, RepairClass::Default);
    assert!(matches!(
        finding.context,
        FindingContext::Record {
            location: DamageLocation::NewestUnwrittenBlocks,
            unwritten: Some(UnwrittenBlocks {
                from: 4096,
                blocks: 1,
                first_record: 4000
            }),
            ..
        }
    ));
    assert_opens_keeping(dir.path(), &w, &acked, RepairPolicy::Default);
}
