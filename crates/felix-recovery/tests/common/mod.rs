//! Building shards on disk for recovery tests, damaging them precisely, and
//! reading them back the way a reader would.
//!
//! Expected byte positions and checksums are computed here from the spec's
//! layout (a model of what `build_shard` wrote), not read back through the
//! code under test.
#![allow(dead_code, reason = "each test binary uses a different subset")]

pub(crate) mod two_segments;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use felix_format::{
    CorruptionKind, CorruptionSite, IndexEntry, LOCK_FILE_NAME, RECORD_HEADER_LEN,
    SEGMENT_HEADER_LEN, SegmentHeader, encode_record_header,
};
use felix_io::FileSystem;
use felix_recovery::{
    Finding, InspectOptions, Inspection, OpenOptions, RecoveredShard, RecoveryError, ShardLock,
    inspect, open_shard,
};
use felix_segment::{
    ReadLimit, ReadRecord, Record, SegmentConfig, SegmentError, SegmentFile, SegmentWriter,
    SparseIndex,
};

pub(crate) const LABEL: &str = "test-shard";

/// The lock of the shard directory `dir` on the real disk, which an open
/// for writing needs. (Taking it creates `dir/lock` for earlier releases.)
pub(crate) fn lock(dir: &Path) -> ShardLock {
    ShardLock::acquire(&FileSystem::os(), dir).expect("lock the shard directory")
}

pub(crate) fn payload(offset: u64) -> Vec<u8> {
    format!("record-{offset}-{}", "x".repeat((offset % 13) as usize)).into_bytes()
}

/// Writes `segments.len()` segments with the given record counts, starting
/// at offset `base`; every segment but the last is sealed. Record `o` has
/// timestamp `o` and payload [`payload`]`(o)`.
pub(crate) fn build_shard(dir: &Path, base: u64, segments: &[u64], spacing: u64) -> u64 {
    let config = SegmentConfig {
        index_spacing_bytes: spacing,
        preallocate_bytes: None,
    };
    let mut offset = base;
    for (id, &count) in segments.iter().enumerate() {
        let mut w = SegmentWriter::create(
            &felix_io::FileSystem::os(),
            dir,
            id as u64,
            offset,
            config,
            LABEL.into(),
        )
        .unwrap();
        for o in offset..offset + count {
            w.append(&[Record::new(o, payload(o))]).unwrap();
        }
        offset += count;
        if id + 1 < segments.len() {
            w.seal().unwrap();
        } else {
            w.sync().unwrap();
        }
    }
    offset
}

/// Writes segment `id` byte for byte with felix-format's encoders and a
/// fixed creation time (no index), so its bytes — header CRC included — are
/// the same on every run. Records follow the [`build_shard`] rule.
pub(crate) fn write_segment(dir: &Path, id: u64, base: u64, count: u64) -> Vec<u8> {
    let mut bytes = SegmentHeader::new(base, 1_700_000_000_000_000)
        .encode()
        .to_vec();
    for o in base..base + count {
        let payload = payload(o);
        bytes.extend_from_slice(&encode_record_header(o, o, &payload).unwrap());
        bytes.extend_from_slice(&payload);
    }
    std::fs::write(seg_path(dir, id), &bytes).unwrap();
    bytes
}

/// Where one record lies in a segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordAt {
    pub(crate) segment: u64,
    pub(crate) offset: u64,
    /// Byte position of its header.
    pub(crate) position: u64,
    /// Bytes on disk, header included.
    pub(crate) len: u64,
}

impl RecordAt {
    pub(crate) fn end(&self) -> u64 {
        self.position + self.len
    }
}

/// The records of segment `id` holding offsets `base..base + count` as the
/// [`build_shard`] rule lays them out: back to back after the 32-byte header.
pub(crate) fn segment_layout(id: u64, base: u64, count: u64) -> Vec<RecordAt> {
    let mut position = SEGMENT_HEADER_LEN as u64;
    (base..base + count)
        .map(|offset| {
            let len = (RECORD_HEADER_LEN + payload(offset).len()) as u64;
            let at = RecordAt {
                segment: id,
                offset,
                position,
                len,
            };
            position += len;
            at
        })
        .collect()
}

/// [`segment_layout`] for every segment of `build_shard(_, base, segments, _)`.
pub(crate) fn shard_layout(base: u64, segments: &[u64]) -> Vec<Vec<RecordAt>> {
    let mut offset = base;
    segments
        .iter()
        .enumerate()
        .map(|(id, &count)| {
            let layout = segment_layout(id as u64, offset, count);
            offset += count;
            layout
        })
        .collect()
}

/// Length of a segment file holding exactly these records.
pub(crate) fn segment_len(records: &[RecordAt]) -> u64 {
    records
        .last()
        .map_or(SEGMENT_HEADER_LEN as u64, RecordAt::end)
}

/// The index entries a writer with `spacing` emits for these records: the
/// first record, then each record at least `spacing` bytes past the last
/// entry (the spec's rule).
pub(crate) fn index_entries(records: &[RecordAt], spacing: u64) -> Vec<IndexEntry> {
    let mut entries: Vec<IndexEntry> = Vec::new();
    for r in records {
        if entries
            .last()
            .is_none_or(|last| r.position >= last.position + spacing)
        {
            entries.push(IndexEntry {
                offset: r.offset,
                position: r.position,
            });
        }
    }
    entries
}

/// CRC-32 (IEEE) of the concatenated parts, computed bit by bit so the
/// expected checksums in these tests do not come from the code under test.
pub(crate) fn crc32(parts: &[&[u8]]) -> u32 {
    let mut crc = !0u32;
    for part in parts {
        for &byte in *part {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
    }
    !crc
}

pub(crate) fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(bytes[at..at + 2].try_into().unwrap())
}

pub(crate) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap())
}

pub(crate) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// What a reader must report for the record at `r` in segment bytes
/// `bytes`, given the damage lies inside it: a bad header CRC when any of
/// bytes 0..24 changed, otherwise a bad record checksum.
pub(crate) fn expected_record_kind(
    bytes: &[u8],
    r: &RecordAt,
    damaged_byte: u64,
) -> CorruptionKind {
    let p = r.position as usize;
    let end = r.end() as usize;
    if damaged_byte - r.position < 24 {
        CorruptionKind::RecordHeaderChecksum {
            expected: u32_at(bytes, p + 20),
            found: crc32(&[&bytes[p..p + 20]]),
        }
    } else {
        CorruptionKind::RecordChecksum {
            expected: u32_at(bytes, p + 24),
            found: crc32(&[&bytes[p..p + 24], &bytes[p + 28..end]]),
        }
    }
}

pub(crate) fn seg_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:020}.log"))
}

pub(crate) fn index_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:020}.index"))
}

pub(crate) fn seg_name(id: u64) -> String {
    format!("{id:020}.log")
}

pub(crate) fn index_name(id: u64) -> String {
    format!("{id:020}.index")
}

/// Flips one bit of a file in place.
pub(crate) fn flip_bit(path: &Path, byte: u64, bit: u8) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[byte as usize] ^= 1 << bit;
    std::fs::write(path, bytes).unwrap();
}

/// Overwrites bytes of a file in place.
pub(crate) fn write_at(path: &Path, at: u64, new: &[u8]) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize..at as usize + new.len()].copy_from_slice(new);
    std::fs::write(path, bytes).unwrap();
}

/// Cuts (or extends with zeros) a file to `len` bytes.
pub(crate) fn set_len(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

/// Every file's bytes, to prove nothing changed.
pub(crate) fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        // The empty lock file taking the shard's lock creates (for earlier
        // releases) is the caller's, not shard content an open changed.
        .filter(|(name, bytes)| !(name == LOCK_FILE_NAME && bytes.is_empty()))
        .collect()
}

/// Writes `files` into a fresh temporary directory.
pub(crate) fn materialise(files: &BTreeMap<String, Vec<u8>>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    dir
}

/// Inspects `dir`, asserting that not a byte of it changed.
pub(crate) fn inspect_unchanged(dir: &Path, options: &InspectOptions) -> Inspection {
    let before = snapshot(dir);
    let inspection = inspect(&felix_io::FileSystem::os(), dir, LABEL, options).unwrap();
    assert_eq!(snapshot(dir), before, "inspect modified {}", dir.display());
    inspection
}

/// Opens `dir` expecting a refusal; asserts the error names the directory
/// and the policy and that nothing was modified. Returns the blocking
/// findings.
pub(crate) fn open_refused(dir: &Path, options: &OpenOptions) -> Vec<Finding> {
    // Taken first: the lock file it creates is the caller's, not the open's.
    let lock = lock(dir);
    let before = snapshot(dir);
    let err = open_shard(&FileSystem::os(), dir, LABEL, options, &lock).unwrap_err();
    assert_eq!(
        snapshot(dir),
        before,
        "a refused open modified {}",
        dir.display()
    );
    match err {
        RecoveryError::Unrepairable {
            dir: err_dir,
            blocking,
            policy,
        } => {
            assert_eq!(err_dir, dir);
            assert_eq!(policy, options.repair_policy);
            blocking
        }
        other => panic!("expected Unrepairable, got {other}"),
    }
}

/// A copy of `dir`'s files in a fresh directory, for opens that repair.
pub(crate) fn copy_of(dir: &Path) -> tempfile::TempDir {
    materialise(&snapshot(dir))
}

/// One segment of a recovered shard and the index a reader would use.
#[derive(Debug)]
pub(crate) struct Readable {
    pub(crate) id: u64,
    pub(crate) base_offset: u64,
    pub(crate) next_offset: u64,
    pub(crate) len: u64,
    pub(crate) index: SparseIndex,
}

/// The segments of a recovered shard: sealed ones with the index loaded
/// from disk (as a reader after recovery loads it), the newest with the
/// index recovery handed the writer.
pub(crate) fn readable(dir: &Path, shard: &RecoveredShard) -> Vec<Readable> {
    let mut out: Vec<Readable> = shard
        .sealed
        .iter()
        .map(|s| Readable {
            id: s.id,
            base_offset: s.base_offset,
            next_offset: s.next_offset,
            len: s.len,
            index: SparseIndex::load(
                &felix_io::FileSystem::os(),
                &index_path(dir, s.id),
                s.base_offset,
                s.len,
            )
            .unwrap_or_else(|e| {
                panic!(
                    "index of sealed segment {} does not load after recovery: {e}",
                    s.id
                )
            }),
        })
        .collect();
    if let Some(newest) = &shard.newest {
        out.push(Readable {
            id: newest.file.id(),
            base_offset: newest.file.base_offset(),
            next_offset: newest.next_offset,
            len: newest.len,
            index: newest.index.clone(),
        });
    }
    out
}

/// Reads the one record at `offset`, starting where the index says, as a
/// reader serving a fetch for that offset would.
pub(crate) fn read_at(
    dir: &Path,
    segment: &Readable,
    offset: u64,
) -> Result<ReadRecord, SegmentError> {
    let (file, _) = SegmentFile::open(
        &felix_io::FileSystem::os(),
        dir,
        segment.id,
        LABEL.into(),
        felix_io::OpenMode::Read,
    )
    .unwrap();
    let limit = ReadLimit {
        end_position: segment.len,
        next_offset: segment.next_offset,
    };
    let mut records = file.read(segment.index.seek(offset), offset, limit, 1)?;
    assert!(!records.is_empty(), "a read returns at least one record");
    let record = records.swap_remove(0);
    assert_eq!(record.offset, offset, "a read returns the record asked for");
    Ok(record)
}

/// Every offset of a recovered shard and what reading it returned.
pub(crate) fn try_read_back(
    dir: &Path,
    shard: &RecoveredShard,
) -> Vec<(u64, Result<Vec<u8>, SegmentError>)> {
    let mut out = Vec::new();
    for segment in readable(dir, shard) {
        for offset in segment.base_offset..segment.next_offset {
            out.push((
                offset,
                read_at(dir, &segment, offset).map(|r| r.payload.to_vec()),
            ));
        }
    }
    out
}

/// Reads every record of a recovered shard, each from the index entry a
/// reader would seek to, and checks offsets `first..next` all came back with
/// [`payload`]`(offset)`.
pub(crate) fn assert_reads_back(dir: &Path, shard: &RecoveredShard, first: u64, next: u64) {
    let got: Vec<(u64, Vec<u8>)> = try_read_back(dir, shard)
        .into_iter()
        .map(|(offset, r)| {
            (
                offset,
                r.unwrap_or_else(|e| panic!("offset {offset} does not read back: {e}")),
            )
        })
        .collect();
    let want: Vec<(u64, Vec<u8>)> = (first..next).map(|o| (o, payload(o))).collect();
    assert_eq!(got, want);
}

/// The site of damage a read reported, whether it blamed the data
/// (`Corrupt`) or the index entry it started from (`StaleIndex`).
pub(crate) fn read_damage(err: &SegmentError) -> Option<(&CorruptionSite, CorruptionKind)> {
    match err {
        SegmentError::Corrupt { site, kind } | SegmentError::StaleIndex { site, kind, .. } => {
            Some((site, *kind))
        }
        _ => None,
    }
}

/// Copies an interop case so nothing can modify the in-repository corpus (`fixtures/interop/`).
pub(crate) fn interop_copy(case: &str) -> tempfile::TempDir {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/interop")
        .join(case);
    let dst = tempfile::tempdir().unwrap();
    copy_dir(&src, dst.path());
    dst
}

pub(crate) fn copy_dir(src: &Path, dst: &Path) {
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir(&to).unwrap();
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), to).unwrap();
        }
    }
}

/// The interop corpus payload for `offset`.
pub(crate) fn interop_payload(offset: u64, len: usize) -> Vec<u8> {
    let mut payload = format!("felix-record-{offset:020}-").into_bytes();
    payload.truncate(len);
    for i in payload.len()..len {
        payload.push(((offset % 251) as usize + i) as u8);
    }
    payload
}
