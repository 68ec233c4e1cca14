//! Building shards on disk for recovery tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use felix_segment::{Record, SegmentConfig, SegmentWriter};

pub(crate) const LABEL: &str = "test-shard";

pub(crate) fn payload(offset: u64) -> Vec<u8> {
    format!("record-{offset}-{}", "x".repeat((offset % 13) as usize)).into_bytes()
}

/// Writes `segments.len()` segments with the given record counts, starting
/// at offset `base`; every segment but the last is sealed.
pub(crate) fn build_shard(dir: &Path, base: u64, segments: &[u64], spacing: u64) -> u64 {
    let config = SegmentConfig { index_spacing_bytes: spacing, preallocate_bytes: None };
    let mut offset = base;
    for (id, &count) in segments.iter().enumerate() {
        let mut w = SegmentWriter::create(dir, id as u64, offset, config, LABEL.into()).unwrap();
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

pub(crate) fn seg_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:020}.log"))
}

/// Every file's bytes, to prove nothing changed.
pub(crate) fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// Copies an interop case so nothing can modify the shared corpus.
pub(crate) fn interop_copy(case: &str) -> tempfile::TempDir {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/interop").join(case);
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
