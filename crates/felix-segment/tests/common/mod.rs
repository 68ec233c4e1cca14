//! Helpers shared by the segment tests.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use felix_segment::{Record, SegmentConfig, SegmentWriter};

pub(crate) fn label() -> Arc<str> {
    Arc::from("test-shard")
}

/// The payload the interop corpus uses: a function of the record's offset.
pub(crate) fn interop_payload(offset: u64, len: usize) -> Vec<u8> {
    let mut payload = format!("felix-record-{offset:020}-").into_bytes();
    payload.truncate(len);
    for i in payload.len()..len {
        payload.push(((offset % 251) as usize + i) as u8);
    }
    payload
}

/// A payload whose bytes identify its offset, of a chosen length.
pub(crate) fn payload_for(offset: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (offset as usize).wrapping_mul(31).wrapping_add(i) as u8)
        .collect()
}

pub(crate) fn writer(dir: &Path, base: u64, spacing: u64) -> SegmentWriter {
    let config = SegmentConfig {
        index_spacing_bytes: spacing,
        preallocate_bytes: None,
    };
    SegmentWriter::create(&felix_io::FileSystem::os(), dir, 0, base, config, label()).unwrap()
}

pub(crate) fn record(offset: u64, len: usize) -> Record {
    Record::new(offset * 10, payload_for(offset, len))
}
