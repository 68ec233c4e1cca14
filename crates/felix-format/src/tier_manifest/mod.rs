//! Bytes of a tiered shard's remote manifest: which of the shard's sealed
//! segments live in the object store, under which object names, and where
//! the remote log begins.
//!
//! This is an addition of felix storage to format v2 (see
//! `docs/storage-format.md`, "Tiered storage"); nothing in a shard
//! directory refers to it. felix-tiered writes it; this module only says
//! what the bytes are.
//!
//! A manifest is never overwritten. Each version is a new object,
//! `manifest/{seq:020}`, written with put-if-absent (`PutMode::Create`), so
//! a reader never sees a half-written one on any backend (the local file
//! system store has no conditional overwrite) and two writers racing for
//! one sequence number cannot both win. The reader takes the highest
//! sequence number whose object decodes.
//!
//! Layout (big-endian): a 24-byte header — magic `FLTM` (4), version (2),
//! flags (2, zero), `seq` (8), `body_len` (4), `crc` (4): the CRC-32 of the
//! header's first 20 bytes followed by the body — then the body:
//! `key_len` (4) and that many bytes of the shard's exact key in the `key`
//! file's encoding ([`crate::key_file`]), `start_offset` (8), `count` (4),
//! then `count` segment entries of [`MANIFEST_ENTRY_LEN`] bytes each (see
//! [`RemoteSegment`]).
//!
//! Decoding checks, in order: the header's length, magic, version, flags;
//! `body_len` against [`MAX_MANIFEST_BODY_LEN`] and against the bytes
//! present; the CRC; and only then the body: the key (its own checks), the
//! count against the bytes left, every entry's fields, and the entries
//! together — ascending ids, each segment's offsets starting where the
//! previous one's end (one version of each offset, no gaps), and the start
//! offset inside the listed range. No length is acted on before the CRC
//! covering it has been verified. Decoding borrows the input and allocates
//! nothing.

use alloc::vec::Vec;

use crate::bytes_be::{u32_at, u64_at};
use crate::key_file::{KeyFileView, decode_key_file, encode_key_file};
use crate::side_file::{
    SideFileBody, SideFileChecksum, SideFileDefect, SideFileError, SideFileKind, SideFileLayout,
    SideFileVersion,
};
use crate::{SegmentExtent, ShardKey};

mod names;
#[cfg(test)]
mod tests;

pub use names::{
    MANIFEST_DIR, RemoteObjectName, SEGMENTS_DIR, manifest_object_name, parse_manifest_object_name,
    parse_segment_object_name, segment_object_name,
};

/// Magic of a manifest object: ASCII `FLTM`, "Felix Tiered Manifest".
pub const MANIFEST_MAGIC: u32 = u32::from_be_bytes(*b"FLTM");
/// Version of the manifest layout.
pub const MANIFEST_VERSION: u16 = 1;
/// Length of the manifest header.
pub const MANIFEST_HEADER_LEN: usize = 24;
/// Length of one segment entry.
pub const MANIFEST_ENTRY_LEN: usize = 88;
/// The most segments one manifest lists: a shard of a million remote
/// segments (petabytes at the default segment size) is far past any
/// retention; the bound keeps a damaged length from asking for gigabytes.
pub const MAX_MANIFEST_SEGMENTS: usize = 1 << 20;
/// The longest body a decoder accepts.
pub const MAX_MANIFEST_BODY_LEN: usize =
    4 + crate::key_file::MAX_KEY_FILE_LEN + 8 + 4 + MAX_MANIFEST_SEGMENTS * MANIFEST_ENTRY_LEN;

/// `max_timestamp_micros` of an entry whose segment has no timestamp.
const NO_TIMESTAMP: u64 = u64::MAX;

/// One sealed segment in the object store: its extent, the lengths and
/// CRC-32s of its three objects, and the upload id in their names.
///
/// Entry layout (88 bytes): `id`, `base_offset`, `next_offset`, `len`,
/// `index_len`, `time_index_len`, `max_timestamp_micros` (`u64::MAX` for
/// none), `upload` (8 each), `segment_crc`, `index_crc`,
/// `time_index_crc` (4 each), and 12 zero bytes, reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteSegment {
    /// The segment's id, offsets and byte length (the `.log` object's size).
    pub extent: SegmentExtent,
    /// Bytes of its `.index` object.
    pub index_len: u64,
    /// Bytes of its `.timeindex` object.
    pub time_index_len: u64,
    /// Its largest record timestamp (remote retention by age measures it).
    pub max_timestamp_micros: Option<u64>,
    /// The upload id in its object names: every upload of a segment gets a
    /// fresh one, so an upload never overwrites an object a manifest lists
    /// (multipart uploads cannot be conditional).
    pub upload: u64,
    /// CRC-32 of the whole `.log` object.
    pub segment_crc: u32,
    /// CRC-32 of the whole `.index` object.
    pub index_crc: u32,
    /// CRC-32 of the whole `.timeindex` object.
    pub time_index_crc: u32,
}

/// A manifest to encode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Its sequence number, the number in its object name.
    pub seq: u64,
    /// The shard's exact key.
    pub key: ShardKey,
    /// The first offset readable from the remote store (reads below it are
    /// trimmed); inside the first segment or, with none, any offset.
    pub start_offset: u64,
    /// The remote segments, oldest first.
    pub segments: Vec<RemoteSegment>,
}

impl Manifest {
    /// One past the last remote offset: the last segment's end, or the
    /// start with none.
    pub fn next_offset(&self) -> u64 {
        self.segments
            .last()
            .map_or(self.start_offset, |s| s.extent.next_offset)
    }
}

/// The manifest's frame: a 24-byte header with flags (none defined),
/// `seq` at byte 8, `body_len` at 16 (at most [`MAX_MANIFEST_BODY_LEN`]),
/// the CRC at 20 over the header's first 20 bytes and the body.
pub const MANIFEST_LAYOUT: SideFileLayout = SideFileLayout {
    kind: SideFileKind::Manifest,
    name: "Manifest",
    file: "manifest",
    field: "manifest",
    entries: "segments",
    magic: MANIFEST_MAGIC,
    versions: &[SideFileVersion {
        version: MANIFEST_VERSION,
        header_len: MANIFEST_HEADER_LEN,
        known_flags: 0,
    }],
    has_flags: true,
    body: SideFileBody::Bytes {
        len_at: 16,
        max: MAX_MANIFEST_BODY_LEN,
    },
    checksum: SideFileChecksum::HeaderAndBody,
};

const fn error(defect: SideFileDefect) -> SideFileError {
    SideFileError::new(SideFileKind::Manifest, defect)
}

/// Why a manifest cannot be encoded.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ManifestEncodeError {
    /// The key has a part too long for the key encoding.
    #[error("manifest shard key cannot be encoded")]
    Key(#[source] SideFileError),
    /// More segments than [`MAX_MANIFEST_SEGMENTS`].
    #[error("manifest lists {count} segments, more than {MAX_MANIFEST_SEGMENTS}")]
    TooManySegments {
        /// Segments given.
        count: usize,
    },
}

/// Encodes `manifest`, appending its bytes to `out`. The encoder does not
/// check the entries' order: the decoder does, and felix-tiered builds
/// manifests only by appending at the end and removing from the front.
///
/// ```
/// use felix_format::ShardKey;
/// use felix_format::tier_manifest::{Manifest, decode_manifest, encode_manifest};
///
/// let manifest = Manifest { seq: 1, key: ShardKey::new("t", "n", "s", 0), start_offset: 0, segments: vec![] };
/// let mut bytes = Vec::new();
/// encode_manifest(&manifest, &mut bytes)?;
/// assert_eq!(&bytes[..4], b"FLTM");
/// assert_eq!(decode_manifest(&bytes)?.to_manifest(), manifest);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn encode_manifest(manifest: &Manifest, out: &mut Vec<u8>) -> Result<(), ManifestEncodeError> {
    if manifest.segments.len() > MAX_MANIFEST_SEGMENTS {
        return Err(ManifestEncodeError::TooManySegments {
            count: manifest.segments.len(),
        });
    }
    let mut key = Vec::new();
    encode_key_file(&manifest.key, &mut key).map_err(ManifestEncodeError::Key)?;
    let body_len = 4 + key.len() + 8 + 4 + manifest.segments.len() * MANIFEST_ENTRY_LEN;
    out.reserve(MANIFEST_HEADER_LEN + body_len);
    let start = MANIFEST_LAYOUT.begin(MANIFEST_VERSION, 0, out);
    if let Some(slot) = out.get_mut(start + 8..start + 16) {
        slot.copy_from_slice(&manifest.seq.to_be_bytes());
    }
    // Bounded by MAX_MANIFEST_BODY_LEN (checked above), which fits a u32.
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(&key);
    out.extend_from_slice(&manifest.start_offset.to_be_bytes());
    out.extend_from_slice(&(manifest.segments.len() as u32).to_be_bytes());
    for s in &manifest.segments {
        encode_entry(s, out);
    }
    MANIFEST_LAYOUT.seal(out.get_mut(start..).unwrap_or_default());
    Ok(())
}

fn encode_entry(s: &RemoteSegment, out: &mut Vec<u8>) {
    for v in [
        s.extent.id,
        s.extent.base_offset,
        s.extent.next_offset,
        s.extent.len,
        s.index_len,
        s.time_index_len,
        s.max_timestamp_micros.unwrap_or(NO_TIMESTAMP),
        s.upload,
    ] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    for v in [s.segment_crc, s.index_crc, s.time_index_crc] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out.extend_from_slice(&[0; 12]);
}

/// A decoded manifest, borrowing its bytes.
#[derive(Debug, Clone, Copy)]
pub struct ManifestView<'a> {
    /// Its sequence number.
    pub seq: u64,
    /// The shard key it belongs to.
    pub key: KeyFileView<'a>,
    /// The first offset readable remotely.
    pub start_offset: u64,
    entries: &'a [u8],
}

impl<'a> ManifestView<'a> {
    /// Segments listed.
    pub fn len(&self) -> usize {
        self.entries.len() / MANIFEST_ENTRY_LEN
    }

    /// Whether it lists no segment.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `i`th segment, oldest first.
    pub fn get(&self, i: usize) -> Option<RemoteSegment> {
        let at = i.checked_mul(MANIFEST_ENTRY_LEN)?;
        let raw = self.entries.get(at..at + MANIFEST_ENTRY_LEN)?;
        parse_entry(raw.try_into().ok()?)
    }

    /// The segments, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = RemoteSegment> + 'a {
        self.entries
            .chunks_exact(MANIFEST_ENTRY_LEN)
            .filter_map(|raw| parse_entry(raw.try_into().ok()?))
    }

    /// An owned copy.
    pub fn to_manifest(&self) -> Manifest {
        Manifest {
            seq: self.seq,
            key: self.key.to_key(),
            start_offset: self.start_offset,
            segments: self.iter().collect(),
        }
    }
}

/// An entry's fields; `None` if it is inconsistent on its own.
fn parse_entry(raw: &[u8; MANIFEST_ENTRY_LEN]) -> Option<RemoteSegment> {
    let extent = SegmentExtent {
        id: u64_at(raw, 0),
        base_offset: u64_at(raw, 8),
        next_offset: u64_at(raw, 16),
        len: u64_at(raw, 24),
    };
    let reserved_zero = raw.get(76..).is_some_and(|r| r.iter().all(|&b| b == 0));
    if extent.next_offset <= extent.base_offset || extent.len == 0 || !reserved_zero {
        return None;
    }
    let ts = u64_at(raw, 48);
    Some(RemoteSegment {
        extent,
        index_len: u64_at(raw, 32),
        time_index_len: u64_at(raw, 40),
        max_timestamp_micros: (ts != NO_TIMESTAMP).then_some(ts),
        upload: u64_at(raw, 56),
        segment_crc: u32_at(raw, 64),
        index_crc: u32_at(raw, 68),
        time_index_crc: u32_at(raw, 72),
    })
}

/// Decodes a manifest object (see the module docs for the checks, in
/// order).
///
/// ```
/// use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
/// use felix_format::tier_manifest::decode_manifest;
///
/// let short = SideFileDefect::Short { len: 4, header_len: 24 };
/// assert_eq!(decode_manifest(b"FLTM").unwrap_err(), SideFileError::new(SideFileKind::Manifest, short));
/// ```
pub fn decode_manifest(bytes: &[u8]) -> Result<ManifestView<'_>, SideFileError> {
    let frame = MANIFEST_LAYOUT.decode(bytes)?;
    let (header, body) = (frame.header, frame.body);
    let seq = u64_at(header, 8);
    let at = |rel: usize| MANIFEST_HEADER_LEN + rel;
    let key_len = u32_at(body, 0) as usize;
    let Some(key_bytes) = body.get(4..4usize.saturating_add(key_len)) else {
        return Err(error(SideFileDefect::Body { at: at(0) }));
    };
    let key = decode_key_file(key_bytes)
        .map_err(|e| SideFileError::embedding(SideFileKind::Manifest, e))?;
    let rest_at = 4 + key_len;
    let Some(fixed) = body.get(rest_at..rest_at + 12) else {
        return Err(error(SideFileDefect::Body { at: at(rest_at) }));
    };
    let start_offset = u64_at(fixed, 0);
    let count = u32_at(fixed, 8) as usize;
    let entries_at = rest_at + 12;
    let entries = body.get(entries_at..).unwrap_or_default();
    if count > MAX_MANIFEST_SEGMENTS || Some(entries.len()) != count.checked_mul(MANIFEST_ENTRY_LEN)
    {
        return Err(error(SideFileDefect::Body {
            at: at(rest_at + 8),
        }));
    }
    let view = ManifestView {
        seq,
        key,
        start_offset,
        entries,
    };
    let mut previous: Option<RemoteSegment> = None;
    for (i, raw) in entries.chunks_exact(MANIFEST_ENTRY_LEN).enumerate() {
        let entry = raw
            .try_into()
            .ok()
            .and_then(parse_entry)
            .ok_or(error(SideFileDefect::RemoteEntry { entry: i }))?;
        if let Some(p) = previous {
            if entry.extent.id <= p.extent.id || entry.extent.base_offset != p.extent.next_offset {
                return Err(error(SideFileDefect::Order { entry: i }));
            }
        } else if !entry.extent.contains(start_offset) {
            return Err(error(SideFileDefect::Start { start_offset }));
        }
        previous = Some(entry);
    }
    Ok(view)
}
