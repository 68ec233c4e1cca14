//! Object names under a tiered shard's prefix.
//!
//! A shard's objects live under `{root}/{dir_name}/`, where `dir_name` is
//! [`ShardKey::dir_name`](crate::ShardKey::dir_name) (readable, slash- and
//! dot-free, with a hash of the exact key; the manifest holds the exact key
//! itself, so a collision is detected, never served). Under it:
//!
//! * `manifest/{seq:020}`: manifest versions, each written once.
//! * `segments/{id:020}-{upload:016x}.log`, `.index`, `.timeindex`: a
//!   sealed segment's three files as uploaded, the upload id fresh for each
//!   upload.
//!
//! Anything else under the prefix is not ours and is left alone.

use alloc::format;
use alloc::string::String;

use crate::FileKind;

/// The folder of manifest versions, under a shard's prefix.
pub const MANIFEST_DIR: &str = "manifest";
/// The folder of segment objects, under a shard's prefix.
pub const SEGMENTS_DIR: &str = "segments";

/// The name of manifest version `seq`, relative to the shard's prefix:
/// `manifest/{seq:020}` (zero-padded, so names sort as numbers).
///
/// ```
/// use felix_format::tier_manifest::manifest_object_name;
/// assert_eq!(manifest_object_name(7), "manifest/00000000000000000007");
/// ```
pub fn manifest_object_name(seq: u64) -> String {
    format!("{MANIFEST_DIR}/{seq:020}")
}

/// The name of one of a remote segment's objects, relative to the shard's
/// prefix.
///
/// ```
/// use felix_format::FileKind;
/// use felix_format::tier_manifest::segment_object_name;
/// assert_eq!(
///     segment_object_name(3, 0xab, FileKind::TimeIndex),
///     "segments/00000000000000000003-00000000000000ab.timeindex"
/// );
/// ```
pub fn segment_object_name(id: u64, upload: u64, kind: FileKind) -> String {
    format!("{SEGMENTS_DIR}/{id:020}-{upload:016x}.{}", kind.extension())
}

/// What an object name under a shard's prefix is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteObjectName {
    /// A manifest version.
    Manifest(u64),
    /// One of a segment's objects: id, upload, which file.
    Segment {
        /// The segment id.
        id: u64,
        /// The upload id.
        upload: u64,
        /// Which file.
        kind: FileKind,
    },
    /// Not a name of ours.
    Other,
}

impl RemoteObjectName {
    /// Classifies a name relative to the shard's prefix. Only the exact
    /// shapes written here are ours.
    ///
    /// ```
    /// use felix_format::FileKind;
    /// use felix_format::tier_manifest::RemoteObjectName;
    /// assert_eq!(RemoteObjectName::parse("manifest/00000000000000000002"), RemoteObjectName::Manifest(2));
    /// assert_eq!(RemoteObjectName::parse("manifest/2"), RemoteObjectName::Other);
    /// assert_eq!(
    ///     RemoteObjectName::parse("segments/00000000000000000003-00000000000000ab.log"),
    ///     RemoteObjectName::Segment { id: 3, upload: 0xab, kind: FileKind::Segment }
    /// );
    /// ```
    pub fn parse(name: &str) -> Self {
        if let Some(seq) = parse_manifest_object_name(name) {
            return Self::Manifest(seq);
        }
        match parse_segment_object_name(name) {
            Some((id, upload, kind)) => Self::Segment { id, upload, kind },
            None => Self::Other,
        }
    }
}

fn digits(text: &str, len: usize, radix: u32) -> Option<u64> {
    let ok = text.len() == len
        && text.bytes().all(|b| match radix {
            10 => b.is_ascii_digit(),
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        });
    if !ok {
        return None;
    }
    u64::from_str_radix(text, radix).ok()
}

/// The sequence number of a manifest object name, `manifest/{seq:020}`.
pub fn parse_manifest_object_name(name: &str) -> Option<u64> {
    let seq = name.strip_prefix(MANIFEST_DIR)?.strip_prefix('/')?;
    digits(seq, 20, 10)
}

/// The id, upload id and kind of a segment object name.
pub fn parse_segment_object_name(name: &str) -> Option<(u64, u64, FileKind)> {
    let rest = name.strip_prefix(SEGMENTS_DIR)?.strip_prefix('/')?;
    let (stem, ext) = rest.split_once('.')?;
    let kind = [FileKind::Segment, FileKind::Index, FileKind::TimeIndex]
        .into_iter()
        .find(|k| k.extension() == ext)?;
    let (id, upload) = stem.split_once('-')?;
    Some((digits(id, 20, 10)?, digits(upload, 16, 16)?, kind))
}
