//! The frame every small checksummed side file shares, and the one error
//! they all report.
//!
//! The files felix storage adds beside a shard's segments (`clean-shutdown`,
//! `key`, `log-start`, `raft-state`, `raft-snapshot`, `*.timeindex`), the `epochs` file and
//! a tiered shard's manifest object are all a header then (for most) a
//! body. The header begins with a `u32` magic and a `u16` version, then
//! (in all but the epochs file) `u16` flags, then fields of the file's own,
//! and ends with the CRC-32 that covers the file. What differs is described
//! by a [`SideFileLayout`], not by code: which versions are read and how
//! long each one's header is, which flag bits each defines, how the body's
//! length is given (none: a fixed-length file; a byte length; a count of
//! entries), and what the CRC covers (the header before it and the body, or
//! the body alone).
//!
//! So the checks every such file needs are written once, in one order:
//! the length (for a fixed-length file: exactly one of its versions'
//! lengths, which also names the version), magic, version, flags; then,
//! after any check of the file's own header fields
//! ([`SideFileHeader::verify`] is a separate step for that), the body's
//! length against its bound and against the bytes present, and the CRC.
//! No length read from the bytes is acted on before it is range-checked,
//! and nothing is read from a body before its CRC holds. Each file's module
//! keeps only its own fields and body.
//!
//! Every failure is a [`SideFileError`]: the file's [`SideFileKind`] and
//! the [`SideFileDefect`] with the values seen. Its text and its
//! [`name`](SideFileError::name) (`KeyFileChecksum`, `LogStartLength`, ...)
//! are stable: the fixtures' directory names and reports use them.

use alloc::vec::Vec;
use core::fmt;

use crate::bytes_be::{u16_at, u32_at};
use crate::checksum::{crc32, crc32_continue};

/// Which side file a layout or an error is about.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SideFileKind {
    /// The `clean-shutdown` file ([`crate::clean`]).
    CleanShutdown,
    /// The `key` file ([`crate::key_file`]).
    KeyFile,
    /// The `log-start` file ([`crate::log_start`]).
    LogStart,
    /// The `raft-state` file ([`crate::raft_state`]).
    RaftState,
    /// The `raft-snapshot` file ([`crate::raft_snapshot`]).
    RaftSnapshot,
    /// A `*.timeindex` file ([`crate::time_index`]).
    TimeIndex,
    /// The `epochs` file ([`crate::epochs`]).
    Epochs,
    /// A tiered shard's manifest object ([`crate::tier_manifest`]).
    Manifest,
}

impl SideFileKind {
    /// The layout of this kind of file.
    pub const fn layout(self) -> &'static SideFileLayout {
        match self {
            Self::CleanShutdown => &crate::clean::CLEAN_SHUTDOWN_LAYOUT,
            Self::KeyFile => &crate::key_file::KEY_FILE_LAYOUT,
            Self::LogStart => &crate::log_start::LOG_START_LAYOUT,
            Self::RaftState => &crate::raft_state::RAFT_STATE_LAYOUT,
            Self::RaftSnapshot => &crate::raft_snapshot::RAFT_SNAPSHOT_LAYOUT,
            Self::TimeIndex => &crate::time_index::TIME_INDEX_LAYOUT,
            Self::Epochs => &crate::epochs::EPOCHS_LAYOUT,
            Self::Manifest => &crate::tier_manifest::MANIFEST_LAYOUT,
        }
    }

    /// The kind's name, the prefix of every [`SideFileError::name`]:
    /// `CleanShutdown`, `KeyFile`, `LogStart`, `RaftState`, `RaftSnapshot`,
    /// `TimeIndex`,
    /// `Epochs`, `Manifest`.
    pub const fn name(self) -> &'static str {
        self.layout().name
    }
}

impl fmt::Display for SideFileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.layout().file)
    }
}

/// One version a layout reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SideFileVersion {
    /// The version number.
    pub version: u16,
    /// Length of its header, whose last four bytes are the CRC; for a
    /// fixed-length file ([`SideFileBody::None`]) the whole file.
    pub header_len: usize,
    /// The flag bits it defines; any other bit set is refused. Zero for a
    /// layout without flags.
    pub known_flags: u16,
}

/// How a file's body length is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideFileBody {
    /// No body: the file is exactly one of its versions' header lengths,
    /// and its length names its version.
    None,
    /// A big-endian `u32` at byte `len_at` of the header is the body's
    /// length in bytes, at most `max`.
    Bytes {
        /// Where the length sits in the header.
        len_at: usize,
        /// The longest body a reader accepts.
        max: usize,
    },
    /// A big-endian count at byte `count_at` (`count_width` bytes: 2 or 4)
    /// of the header is the number of `entry_len`-byte entries that make up
    /// the body, from `min` to `max`.
    Entries {
        /// Where the count sits in the header.
        count_at: usize,
        /// Its width in bytes: 2 or 4.
        count_width: usize,
        /// Length of one entry.
        entry_len: usize,
        /// The fewest entries a file holds.
        min: u32,
        /// The most entries a file holds.
        max: u32,
    },
}

/// What a file's CRC-32 covers. It always sits in the header's last four
/// bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideFileChecksum {
    /// The header's bytes before the CRC, then the body.
    HeaderAndBody,
    /// The body alone (the epochs file: its header is checked field by
    /// field).
    Body,
}

/// The layout of one kind of side file: everything its frame checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SideFileLayout {
    /// The kind it describes.
    pub kind: SideFileKind,
    /// The kind's name, the prefix of its errors' names.
    pub name: &'static str,
    /// How its messages name the file (`key file`, `time index`).
    pub file: &'static str,
    /// How its messages name its fields (`key file magic`, `log-start
    /// magic`).
    pub field: &'static str,
    /// How its messages name its entries, for a layout with entries.
    pub entries: &'static str,
    /// Its first four bytes.
    pub magic: u32,
    /// The versions it reads, oldest first (more than one only for a
    /// fixed-length layout, whose length names the version).
    pub versions: &'static [SideFileVersion],
    /// Whether bytes 6..8 are flags (the epochs file has its count there).
    pub has_flags: bool,
    /// How the body's length is given.
    pub body: SideFileBody,
    /// What the CRC covers.
    pub checksum: SideFileChecksum,
}

/// A header whose length, magic, version and flags hold; its body's length
/// and its CRC are not checked yet ([`verify`](Self::verify)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SideFileHeader<'a> {
    kind: SideFileKind,
    /// The version found, one the layout reads.
    pub version: u16,
    /// The flags found (0 for a layout without flags).
    pub flags: u16,
    /// The header's bytes, CRC included.
    pub header: &'a [u8],
    body: &'a [u8],
}

/// A file whose frame holds: the length, magic, version, flags, the body's
/// length and the CRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SideFileFrame<'a> {
    /// The version found.
    pub version: u16,
    /// The flags found (0 for a layout without flags).
    pub flags: u16,
    /// The header's bytes, CRC included.
    pub header: &'a [u8],
    /// The body's bytes (empty for a fixed-length file).
    pub body: &'a [u8],
}

impl SideFileLayout {
    fn error(&self, defect: SideFileDefect) -> SideFileError {
        SideFileError::new(self.kind, defect)
    }

    /// The longest valid file of this layout: what a reader reads at most.
    pub fn max_len(&self) -> usize {
        let header_len = self
            .versions
            .iter()
            .map(|v| v.header_len)
            .max()
            .unwrap_or(0);
        let body = match self.body {
            SideFileBody::None => 0,
            SideFileBody::Bytes { max, .. } => max,
            SideFileBody::Entries { entry_len, max, .. } => usize::try_from(max)
                .unwrap_or(usize::MAX)
                .saturating_mul(entry_len),
        };
        header_len.saturating_add(body)
    }

    fn version_of(&self, version: u16) -> Option<&'static SideFileVersion> {
        self.versions.iter().find(|v| v.version == version)
    }

    /// Checks the header of `bytes`: the length (a fixed-length file's
    /// exactly; else at least the header), magic, version and flags.
    pub fn open<'a>(&self, bytes: &'a [u8]) -> Result<SideFileHeader<'a>, SideFileError> {
        let len = bytes.len();
        let by_length = match self.body {
            SideFileBody::None => match self.versions.iter().find(|v| v.header_len == len) {
                Some(v) => Some(v),
                None => return Err(self.error(SideFileDefect::Length { len })),
            },
            _ => None,
        };
        let shortest = self
            .versions
            .iter()
            .map(|v| v.header_len)
            .min()
            .unwrap_or(0);
        if len < shortest {
            return Err(self.error(SideFileDefect::Short {
                len,
                header_len: shortest,
            }));
        }
        let magic = u32_at(bytes, 0);
        if magic != self.magic {
            return Err(self.error(SideFileDefect::Magic {
                expected: self.magic,
                found: magic,
            }));
        }
        let found = u16_at(bytes, 4);
        let version = match by_length {
            Some(v) if v.version == found => v,
            Some(v) => {
                return Err(self.error(SideFileDefect::Version {
                    expected: v.version,
                    found,
                }));
            }
            None => match self.version_of(found) {
                Some(v) => v,
                None => {
                    let expected = self.versions.last().map_or(0, |v| v.version);
                    return Err(self.error(SideFileDefect::Version { expected, found }));
                }
            },
        };
        let (header, body) = bytes.split_at_checked(version.header_len).ok_or_else(|| {
            self.error(SideFileDefect::Short {
                len,
                header_len: version.header_len,
            })
        })?;
        let flags = if self.has_flags { u16_at(bytes, 6) } else { 0 };
        if flags & !version.known_flags != 0 {
            return Err(self.error(SideFileDefect::Flags {
                found: flags,
                known: version.known_flags,
            }));
        }
        Ok(SideFileHeader {
            kind: self.kind,
            version: version.version,
            flags,
            header,
            body,
        })
    }

    /// Checks the whole frame of `bytes`: [`open`](Self::open), then
    /// [`verify`](SideFileHeader::verify).
    pub fn decode<'a>(&self, bytes: &'a [u8]) -> Result<SideFileFrame<'a>, SideFileError> {
        self.open(bytes)?.verify()
    }

    /// Appends a header of `version` to `out` — magic, version, flags, and
    /// zeros for the caller's fields and the CRC — and returns where the
    /// file starts in `out`. The body is appended after it, then
    /// [`seal`](Self::seal) completes the file.
    pub fn begin(&self, version: u16, flags: u16, out: &mut Vec<u8>) -> usize {
        debug_assert!(
            self.version_of(version).is_some(),
            "{} version {version} is not one its layout reads",
            self.file
        );
        let start = out.len();
        let header_len = self.version_of(version).map_or(8, |v| v.header_len);
        out.resize(start + header_len, 0);
        self.write_preamble(version, flags, out.get_mut(start..).unwrap_or_default());
        start
    }

    /// Writes magic, version and flags into the first 8 bytes of `header`
    /// (flags only where the layout has them).
    pub fn write_preamble(&self, version: u16, flags: u16, header: &mut [u8]) {
        put(header, 0, &self.magic.to_be_bytes());
        put(header, 4, &version.to_be_bytes());
        if self.has_flags {
            put(header, 6, &flags.to_be_bytes());
        }
    }

    /// Completes `file`, whose preamble ([`write_preamble`]) and other
    /// fields are written and whose body follows its header: writes the
    /// body's length (or its count of entries) and then the CRC.
    ///
    /// The caller has bounded the body; a length that does not fit its
    /// field is not written.
    ///
    /// [`write_preamble`]: Self::write_preamble
    pub fn seal(&self, file: &mut [u8]) {
        let header_len = match self.body {
            SideFileBody::None => file.len(),
            _ => self.version_of(u16_at(file, 4)).map_or(0, |v| v.header_len),
        };
        let body_len = file.len().saturating_sub(header_len);
        match self.body {
            SideFileBody::None => {}
            SideFileBody::Bytes { len_at, .. } => {
                if let Ok(len) = u32::try_from(body_len) {
                    put(file, len_at, &len.to_be_bytes());
                }
            }
            SideFileBody::Entries {
                count_at,
                count_width,
                entry_len,
                ..
            } => {
                let count = body_len / entry_len.max(1);
                if count_width == 2 {
                    if let Ok(count) = u16::try_from(count) {
                        put(file, count_at, &count.to_be_bytes());
                    }
                } else if let Ok(count) = u32::try_from(count) {
                    put(file, count_at, &count.to_be_bytes());
                }
            }
        }
        let (header, body) = file.split_at(header_len.min(file.len()));
        let crc = checksum(self.checksum, header, body);
        put(file, header_len.saturating_sub(4), &crc.to_be_bytes());
        // What this writes, the frame's reader accepts: the pair of every
        // side file's write and read.
        debug_assert_eq!(
            self.decode(file).err(),
            None,
            "a sealed {} must decode",
            self.file
        );
    }
}

/// The CRC-32 of a file split into its header (whose last four bytes are
/// the stored CRC, never covered) and its body.
fn checksum(coverage: SideFileChecksum, header: &[u8], body: &[u8]) -> u32 {
    match coverage {
        SideFileChecksum::Body => crc32(body),
        SideFileChecksum::HeaderAndBody => crc32_continue(
            crc32(
                header
                    .get(..header.len().saturating_sub(4))
                    .unwrap_or_default(),
            ),
            &[body],
        ),
    }
}

impl<'a> SideFileHeader<'a> {
    /// Checks the body's length against its bound and against the bytes
    /// present, then the CRC.
    pub fn verify(self) -> Result<SideFileFrame<'a>, SideFileError> {
        let layout = self.kind.layout();
        let found = self.body.len();
        match layout.body {
            SideFileBody::None => {}
            SideFileBody::Bytes { len_at, max } => {
                let declared = u32_at(self.header, len_at);
                if usize::try_from(declared).map_or(true, |n| n > max) {
                    return Err(layout.error(SideFileDefect::BodyTooLong { declared, max }));
                }
                if usize::try_from(declared) != Ok(found) {
                    return Err(layout.error(SideFileDefect::LengthMismatch { declared, found }));
                }
            }
            SideFileBody::Entries {
                count_at,
                count_width,
                entry_len,
                min,
                max,
            } => {
                let count = if count_width == 2 {
                    u32::from(u16_at(self.header, count_at))
                } else {
                    u32_at(self.header, count_at)
                };
                if count < min || count > max {
                    return Err(layout.error(SideFileDefect::Count { count, min, max }));
                }
                let expected = usize::try_from(count)
                    .unwrap_or(usize::MAX)
                    .saturating_mul(entry_len);
                if found != expected {
                    return Err(layout.error(SideFileDefect::CountMismatch {
                        count,
                        expected,
                        found,
                    }));
                }
            }
        }
        let expected = u32_at(self.header, self.header.len().saturating_sub(4));
        let computed = checksum(layout.checksum, self.header, self.body);
        if expected != computed {
            return Err(layout.error(SideFileDefect::Checksum {
                expected,
                found: computed,
            }));
        }
        Ok(SideFileFrame {
            version: self.version,
            flags: self.flags,
            header: self.header,
            body: self.body,
        })
    }
}

fn put(out: &mut [u8], at: usize, value: &[u8]) {
    if let Some(dst) = out.get_mut(at..at + value.len()) {
        dst.copy_from_slice(value);
    }
}

mod error;
#[cfg(test)]
mod tests;

pub use error::{EmbeddedError, SideFileDefect, SideFileError, SideFileUnread};
