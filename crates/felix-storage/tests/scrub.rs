//! Scrubbing sealed segments: every damaged record named exactly, nothing
//! modified, counted in the stats; the background scrub and its setting.

use std::path::Path;
use std::time::{Duration, Instant};

use felix_format::{CorruptionKind, FileKind, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN, file_name};
use felix_storage::recovery::ScrubDamage;
use felix_storage::{
    ConfigError, ConfigField, Durability, ReadBound, Record, Shard, StorageError, Store,
    StoreConfig,
};

/// Eight records of 12-byte payloads per segment: a segment of
/// `32 + 8 * 40` bytes.
const PAYLOAD: usize = 12;
const PER_SEGMENT: u64 = 8;
const RECORD: u64 = (RECORD_HEADER_LEN + PAYLOAD) as u64;

fn config() -> StoreConfig {
    StoreConfig {
        segment_size_bytes: SEGMENT_HEADER_LEN as u64 + PER_SEGMENT * RECORD,
        durability: Durability::None,
        ..StoreConfig::default()
    }
}

fn payload(offset: u64) -> Vec<u8> {
    format!("record-{offset:05}").into_bytes()
}

/// A shard of three sealed segments and an active one.
fn shard(dir: &Path) -> Shard {
    let shard = Shard::options(dir).config(config()).open().unwrap();
    for offset in 0..3 * PER_SEGMENT + 2 {
        shard
            .append(&[Record::new(1_000 + offset, payload(offset))])
            .wait()
            .unwrap();
    }
    assert_eq!(shard.segments().len(), 4);
    shard
}

fn flip(path: &Path, position: u64, bit: u8) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[position as usize] ^= 1 << bit;
    std::fs::write(path, bytes).unwrap();
}

/// Flips one bit of each byte of every record of a sealed segment in turn:
/// the scrub names exactly that record (its segment, its position and its
/// offset) every time, with the kind the byte's place implies, and the
/// damage is gone once the bit is flipped back.
#[test]
fn scrub_one_bit_flipped_in_each_record_names_exactly_that_record() {
    let dir = tempfile::tempdir().unwrap();
    let shard = shard(dir.path());
    let segment = shard.segments()[1].extent;
    let path = dir
        .path()
        .join(file_name(segment.id, FileKind::Segment).as_str());
    let mut flips = 0;
    for record in 0..PER_SEGMENT {
        let offset = segment.base_offset + record;
        let start = SEGMENT_HEADER_LEN as u64 + record * RECORD;
        for byte in 0..RECORD {
            let bit = (byte % 8) as u8;
            flip(&path, start + byte, bit);
            let report = shard.scrub().unwrap();
            let damage: Vec<&ScrubDamage> = report.damage().collect();
            assert_eq!(damage.len(), 1, "record {record} byte {byte}: {damage:?}");
            let found = damage[0];
            assert_eq!(
                (found.site.segment, found.site.position, found.offset),
                (segment.id, start, offset),
                "record {record} byte {byte}"
            );
            let scrubbed = &report.segments[1];
            if byte < 24 {
                // Bytes 0..24 are what the header CRC covers and the CRC
                // itself: the length cannot be trusted, the walk stops.
                assert!(
                    matches!(found.kind, CorruptionKind::RecordHeaderChecksum { .. }),
                    "{found:?}"
                );
                assert_eq!(scrubbed.unchecked_from, Some(start));
                assert_eq!(scrubbed.intact_records, record);
            } else {
                assert!(
                    matches!(found.kind, CorruptionKind::RecordChecksum { .. }),
                    "{found:?}"
                );
                assert_eq!(scrubbed.unchecked_from, None);
                assert_eq!(scrubbed.intact_records, PER_SEGMENT - 1);
                assert_eq!(scrubbed.next_offset, segment.next_offset);
            }
            flip(&path, start + byte, bit);
            flips += 1;
        }
    }
    assert_eq!(flips, PER_SEGMENT * RECORD);
    let clean = shard.scrub().unwrap();
    assert!(clean.is_clean() && clean.finished, "{clean:?}");
    assert_eq!(shard.stats().scrub_damaged_records, flips);
}

/// Damaged payloads in two segments are each reported, the walk going on
/// past each; the files are not modified; the stats count bytes and damage.
#[test]
fn scrub_reports_every_damaged_payload_and_modifies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let shard = shard(dir.path());
    let segments = shard.segments();
    let payload_byte = |record: u64| SEGMENT_HEADER_LEN as u64 + record * RECORD + 30;
    let first = dir
        .path()
        .join(file_name(segments[0].extent.id, FileKind::Segment).as_str());
    let third = dir
        .path()
        .join(file_name(segments[2].extent.id, FileKind::Segment).as_str());
    flip(&first, payload_byte(2), 0);
    flip(&first, payload_byte(5), 3);
    flip(&third, payload_byte(7), 7);
    let before: Vec<Vec<u8>> = [&first, &third]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();

    let report = shard.scrub().unwrap();
    let found: Vec<(u64, u64, u64)> = report
        .damage()
        .map(|d| (d.site.segment, d.site.position, d.offset))
        .collect();
    let (a, c) = (segments[0].extent, segments[2].extent);
    assert_eq!(
        found,
        [
            (a.id, payload_byte(2) - 30, a.base_offset + 2),
            (a.id, payload_byte(5) - 30, a.base_offset + 5),
            (c.id, payload_byte(7) - 30, c.base_offset + 7),
        ]
    );
    assert!(report.finished);
    // The sealed segments only: the active one is scanned in full on open.
    assert_eq!(report.segments.len(), 3);
    let sealed_bytes: u64 = segments[..3]
        .iter()
        .map(|s| s.extent.len - SEGMENT_HEADER_LEN as u64)
        .sum();
    assert_eq!(report.bytes(), sealed_bytes);
    let stats = shard.stats();
    assert_eq!(
        (stats.scrubbed_bytes, stats.scrub_damaged_records),
        (sealed_bytes, 3)
    );
    let after: Vec<Vec<u8>> = [&first, &third]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert_eq!(before, after);
    // A read of a rotted record fails exactly there, as the scrub said.
    assert!(matches!(
        shard.read(a.base_offset + 2, 1, ReadBound::Committed),
        Err(StorageError::Segment { .. })
    ));
}

/// A segment header that no longer decodes is reported at byte 0, the
/// segment otherwise unchecked.
#[test]
fn scrub_damaged_segment_header_is_reported_at_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let shard = shard(dir.path());
    let segment = shard.segments()[0].extent;
    let path = dir
        .path()
        .join(file_name(segment.id, FileKind::Segment).as_str());
    flip(&path, 0, 0);
    let report = shard.scrub().unwrap();
    let scrubbed = &report.segments[0];
    assert_eq!(scrubbed.damage.len(), 1);
    assert!(matches!(
        scrubbed.damage[0].kind,
        CorruptionKind::SegmentMagic { .. }
    ));
    assert_eq!(
        (scrubbed.damage[0].site.position, scrubbed.unchecked_from),
        (0, Some(0))
    );
    assert_eq!(report.damage().count(), 1);
}

/// A sealed segment cut short at a record boundary lost records: the scrub
/// says so where its records end.
#[test]
fn scrub_sealed_segment_cut_at_a_record_boundary_is_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let shard = shard(dir.path());
    let segment = shard.segments()[0].extent;
    let path = dir
        .path()
        .join(file_name(segment.id, FileKind::Segment).as_str());
    let cut = segment.len - 2 * RECORD;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();
    let report = shard.scrub().unwrap();
    let damage: Vec<_> = report.damage().collect();
    assert_eq!(damage.len(), 1);
    assert_eq!(
        damage[0].kind,
        CorruptionKind::Truncated {
            needed: 2 * RECORD,
            available: 0
        }
    );
    assert_eq!(
        (damage[0].site.position, damage[0].offset),
        (cut, segment.next_offset - 2)
    );
}

#[test]
fn scrub_rate_below_the_minimum_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        scrub_bytes_per_second: Some(100),
        ..StoreConfig::default()
    };
    assert_eq!(
        config.validate(),
        Err(ConfigError::SizeOutOfRange {
            field: ConfigField::ScrubBytesPerSecond,
            value: 100,
            min: felix_storage::limits::MIN_SCRUB_BYTES_PER_SECOND,
            max: u64::MAX,
        })
    );
    let err = Shard::options(dir.path())
        .config(config)
        .open()
        .unwrap_err();
    assert!(matches!(
        err,
        StorageError::InvalidConfig(ConfigError::SizeOutOfRange {
            field: ConfigField::ScrubBytesPerSecond,
            ..
        })
    ));
    assert!(!dir.path().join("00000000000000000000.log").exists());
}

/// Waits until `done` holds, at most ten seconds.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The background scrub of a store and of a shard opened alone finds rot
/// on its own, at its rate, and stops at close.
#[test]
fn background_scrub_finds_rot_in_a_store_and_in_a_lone_shard() {
    let root = tempfile::tempdir().unwrap();
    let key = felix_storage::ShardKey::new("acme", "default", "orders", 0);
    let dir = {
        let store = Store::options(root.path()).config(config()).open().unwrap();
        let shard = store.create_shard(&key).unwrap();
        for offset in 0..PER_SEGMENT + 1 {
            shard
                .append(&[Record::new(offset, payload(offset))])
                .wait()
                .unwrap();
        }
        store.close().unwrap();
        root.path().join(key.dir_name())
    };
    let segment = dir.join(file_name(0, FileKind::Segment).as_str());
    flip(&segment, SEGMENT_HEADER_LEN as u64 + RECORD + 29, 1);
    let scrubbing = StoreConfig {
        // A segment's records (320 bytes) take about 80 ms at 4 KiB/s.
        scrub_bytes_per_second: Some(4096),
        ..config()
    };
    let store = Store::options(root.path())
        .config(scrubbing)
        .open()
        .unwrap();
    let shard = store.open_shard(&key).unwrap();
    eventually("the store's scrub", || {
        shard.stats().scrub_damaged_records >= 1
    });
    let closing = Instant::now();
    store.close().unwrap();
    assert!(closing.elapsed() < Duration::from_secs(2));

    let lone = Shard::options(&dir).config(scrubbing).open().unwrap();
    eventually("the shard's own scrub", || {
        lone.stats().scrub_damaged_records >= 1
    });
    assert!(lone.stats().scrubbed_bytes >= PER_SEGMENT * RECORD);
    lone.close().unwrap();
}
