//! The one error every side file reports: its kind, the defect with the
//! values seen, a stable name and an operator's message. The messages and
//! names predate the shared frame (each file had its own enum) and are
//! kept word for word: the fixtures' notes and directory names and the
//! reports of `felix-store` use them.

use core::fmt;

use super::{SideFileChecksum, SideFileKind};
use crate::key_file::{KeyPart, KeyPartProblem};

/// What is wrong with a side file: a defect of its frame (the same for
/// every kind) or of its body (each kind's own rules), with the values
/// seen.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideFileDefect {
    /// Fewer bytes than the header.
    Short {
        /// Bytes present.
        len: usize,
        /// The header's length.
        header_len: usize,
    },
    /// A fixed-length file that is not one of its versions' lengths (a
    /// torn write, or not ours).
    Length {
        /// Bytes present.
        len: usize,
    },
    /// The file does not start with its magic.
    Magic {
        /// The layout's magic.
        expected: u32,
        /// The four bytes found, big-endian.
        found: u32,
    },
    /// A version this build does not read (in a file of this length, for a
    /// fixed-length file).
    Version {
        /// The version this build reads there (the newest it reads, for a
        /// file whose length does not name one).
        expected: u16,
        /// The version found.
        found: u16,
    },
    /// Flags the version does not define.
    Flags {
        /// The flags found.
        found: u16,
        /// The bits the version defines.
        known: u16,
    },
    /// The body's length in the header is over the layout's bound.
    BodyTooLong {
        /// The length in the header.
        declared: u32,
        /// The longest body the layout allows.
        max: usize,
    },
    /// The bytes after the header are not the body length the header
    /// gives (a torn write).
    LengthMismatch {
        /// The length in the header.
        declared: u32,
        /// Bytes present after the header.
        found: usize,
    },
    /// The count of entries is outside the layout's bounds.
    Count {
        /// The count in the header.
        count: u32,
        /// The fewest entries allowed.
        min: u32,
        /// The most entries allowed.
        max: u32,
    },
    /// The body's length is not `count` whole entries (a torn write).
    CountMismatch {
        /// The count in the header.
        count: u32,
        /// Body bytes `count` implies.
        expected: usize,
        /// Body bytes present.
        found: usize,
    },
    /// The CRC does not match.
    Checksum {
        /// The CRC stored in the file.
        expected: u32,
        /// The CRC computed.
        found: u32,
    },
    /// A clean-shutdown entry contradicts itself or the one before it: ids
    /// not ascending, offsets going backwards or not continuing, or a
    /// length shorter than a segment header.
    SegmentEntry {
        /// Position of the entry in the file.
        entry: usize,
        /// The segment id it names.
        id: u64,
        /// What is wrong.
        problem: crate::clean::CleanEntryProblem,
    },
    /// One part of a key is unusable (a checksummed body that is wrong
    /// inside was written wrong, not damaged after).
    KeyPart {
        /// Which part.
        part: KeyPart,
        /// What is wrong with it.
        problem: KeyPartProblem,
    },
    /// Bytes follow a key's shard number inside its body.
    TrailingBytes {
        /// How many.
        count: usize,
    },
    /// A raft-state file's checksum holds but its flags and fields
    /// disagree: a field whose flag is clear is not zero, a vote's bit is
    /// set without a vote, or the reserved bytes are not zero.
    Inconsistent {
        /// The flags found.
        flags: u16,
    },
    /// A time index's extent cannot be a segment's: its next offset is
    /// below its base, or it is shorter than a segment header plus a
    /// record header per record.
    Extent {
        /// The base offset in the header.
        base_offset: u64,
        /// The next offset in the header.
        next_offset: u64,
        /// The segment length in the header.
        segment_len: u64,
    },
    /// A time index holds more entries than its extent has records, or
    /// none for records.
    EntriesForRecords {
        /// The count in the header.
        count: u32,
        /// Records the extent holds.
        records: u64,
    },
    /// A time index entry is out of order or outside the extent: the
    /// first is not the segment's first record, or one does not ascend
    /// from the one before it in both timestamp and offset, or lies at or
    /// past the next offset.
    TimeEntry {
        /// Its position in the file, from 0.
        entry: u64,
        /// Its timestamp.
        timestamp_micros: u64,
        /// Its offset.
        offset: u64,
    },
    /// A manifest body's layout does not add up: a length inside it runs
    /// past its end, or bytes are left over.
    Body {
        /// Byte of the object where the layout failed.
        at: usize,
    },
    /// The shard key a manifest embeds (in the key file's encoding) is
    /// damaged; [`SideFileError::embedded`] says how.
    EmbeddedKey,
    /// A manifest entry is inconsistent on its own (its offsets run
    /// backwards, its reserved bytes are not zero).
    RemoteEntry {
        /// Index of the entry.
        entry: usize,
    },
    /// Two manifest entries overlap, leave a gap, or are out of order.
    Order {
        /// Index of the later entry.
        entry: usize,
    },
    /// A manifest's `start_offset` lies outside its first segment.
    Start {
        /// The start offset.
        start_offset: u64,
    },
}

/// Why bytes are not a valid side file (or a value cannot be written as
/// one): which kind of file, and what is wrong with it.
///
/// ```
/// use felix_format::key_file::decode_key_file;
/// use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
///
/// let err = decode_key_file(b"FLSK").unwrap_err();
/// assert_eq!(err, SideFileError::new(SideFileKind::KeyFile, SideFileDefect::Short { len: 4, header_len: 16 }));
/// assert_eq!(err.name(), "KeyFileShort");
/// assert_eq!(err.to_string(), "key file is 4 bytes, shorter than its 16-byte header");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SideFileError {
    /// The kind of file.
    pub kind: SideFileKind,
    /// What is wrong with it.
    pub defect: SideFileDefect,
    /// For [`SideFileDefect::EmbeddedKey`]: what is wrong with the key the
    /// file embeds (also the error's [`source`](core::error::Error::source)).
    pub embedded: Option<EmbeddedError>,
}

/// The failure of a file embedded in another (a manifest's shard key, in
/// the key file's encoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddedError {
    /// The embedded file's kind.
    pub kind: SideFileKind,
    /// What is wrong with it.
    pub defect: SideFileDefect,
}

impl SideFileError {
    /// The error of a `kind` file with `defect`.
    pub const fn new(kind: SideFileKind, defect: SideFileDefect) -> Self {
        Self {
            kind,
            defect,
            embedded: None,
        }
    }

    /// The error of a `kind` file whose embedded file failed with `inner`.
    pub const fn embedding(kind: SideFileKind, inner: SideFileError) -> Self {
        Self {
            kind,
            defect: SideFileDefect::EmbeddedKey,
            embedded: Some(EmbeddedError {
                kind: inner.kind,
                defect: inner.defect,
            }),
        }
    }

    /// A stable name for the kind of damage, for reports and scripts: the
    /// kind's name then the defect's (`KeyFileShort`, `LogStartLength`,
    /// `TimeIndexChecksum`, `ManifestKey`).
    pub const fn name(&self) -> &'static str {
        name(self.kind, &self.defect)
    }
}

impl fmt::Display for SideFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        describe(self.kind, &self.defect, f)
    }
}

impl core::error::Error for SideFileError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        self.embedded
            .as_ref()
            .map(|e| e as &(dyn core::error::Error + 'static))
    }
}

impl EmbeddedError {
    /// Its stable name, as [`SideFileError::name`].
    pub const fn name(&self) -> &'static str {
        name(self.kind, &self.defect)
    }
}

impl fmt::Display for EmbeddedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        describe(self.kind, &self.defect, f)
    }
}

impl core::error::Error for EmbeddedError {}

macro_rules! names {
    ($kind:expr, $suffix:literal) => {
        match $kind {
            SideFileKind::CleanShutdown => concat!("CleanShutdown", $suffix),
            SideFileKind::KeyFile => concat!("KeyFile", $suffix),
            SideFileKind::LogStart => concat!("LogStart", $suffix),
            SideFileKind::RaftState => concat!("RaftState", $suffix),
            SideFileKind::RaftSnapshot => concat!("RaftSnapshot", $suffix),
            SideFileKind::TimeIndex => concat!("TimeIndex", $suffix),
            SideFileKind::Epochs => concat!("Epochs", $suffix),
            SideFileKind::Manifest => concat!("Manifest", $suffix),
        }
    };
}

/// What keeps a reader from decoding a side file at all: facts about the
/// file, not its bytes (those are a [`SideFileDefect`]). Named here, beside
/// the defects, so every stable name of what can be wrong with a side file
/// comes from one table ([`SideFileKind::unread_name`]).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideFileUnread {
    /// It is longer than any valid file of its kind: not read.
    TooLarge,
    /// Its name is not a regular file: never opened.
    NotAFile,
    /// Opening, measuring or reading it failed.
    Unreadable,
}

impl SideFileKind {
    /// A stable name for what kept a reader from decoding a file of this
    /// kind, for reports and scripts: the kind's name then the finding's
    /// (`KeyFileTooLarge`, `RaftStateNotAFile`, `LogStartUnreadable`), as
    /// [`SideFileError::name`] names a defect of its bytes.
    pub const fn unread_name(self, unread: SideFileUnread) -> &'static str {
        match unread {
            SideFileUnread::TooLarge => names!(self, "TooLarge"),
            SideFileUnread::NotAFile => names!(self, "NotAFile"),
            SideFileUnread::Unreadable => names!(self, "Unreadable"),
        }
    }
}

const fn name(kind: SideFileKind, defect: &SideFileDefect) -> &'static str {
    use SideFileDefect as D;
    match defect {
        D::Short { .. } => names!(kind, "Short"),
        D::Length { .. } => names!(kind, "Length"),
        D::Magic { .. } => names!(kind, "Magic"),
        D::Version { .. } => names!(kind, "Version"),
        D::Flags { .. } => names!(kind, "Flags"),
        // The manifest's one name for either failure of its body length
        // predates the shared frame; fixtures and scripts use it.
        D::BodyTooLong { .. } | D::LengthMismatch { .. }
            if matches!(kind, SideFileKind::Manifest) =>
        {
            "ManifestBodyLength"
        }
        D::BodyTooLong { .. } => names!(kind, "BodyTooLong"),
        D::LengthMismatch { .. } => names!(kind, "LengthMismatch"),
        D::Count { .. } | D::EntriesForRecords { .. } => names!(kind, "Count"),
        D::CountMismatch { .. } => names!(kind, "CountMismatch"),
        D::Checksum { .. } => names!(kind, "Checksum"),
        D::SegmentEntry { .. } | D::TimeEntry { .. } | D::RemoteEntry { .. } => {
            names!(kind, "Entry")
        }
        D::KeyPart { .. } => names!(kind, "Part"),
        D::TrailingBytes { .. } => names!(kind, "TrailingBytes"),
        D::Inconsistent { .. } => names!(kind, "Inconsistent"),
        D::Extent { .. } => names!(kind, "Extent"),
        D::Body { .. } => names!(kind, "Body"),
        D::EmbeddedKey => names!(kind, "Key"),
        D::Order { .. } => names!(kind, "Order"),
        D::Start { .. } => names!(kind, "Start"),
    }
}

/// The four bytes of a magic as text, for messages.
fn ascii(magic: u32) -> impl fmt::Display {
    struct Ascii([u8; 4]);
    impl fmt::Display for Ascii {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            for &b in &self.0 {
                let c = if b.is_ascii_graphic() { b as char } else { '.' };
                fmt::Write::write_char(f, c)?;
            }
            Ok(())
        }
    }
    Ascii(magic.to_be_bytes())
}

/// The flag bits of `mask` as words: `bit 0`, `bits 0 and 3`.
fn bits(mask: u16, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let set = (0..16u16).filter(|b| mask & (1 << b) != 0);
    let n = set.clone().count();
    f.write_str(if n == 1 { "bit " } else { "bits " })?;
    for (i, b) in set.enumerate() {
        if i > 0 {
            f.write_str(if i + 1 == n { " and " } else { ", " })?;
        }
        write!(f, "{b}")?;
    }
    Ok(())
}

fn describe(
    kind: SideFileKind,
    defect: &SideFileDefect,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    use SideFileDefect as D;
    let layout = kind.layout();
    let (file, field) = (layout.file, layout.field);
    match *defect {
        D::Short { len, header_len } => {
            write!(
                f,
                "{file} is {len} bytes, shorter than its {header_len}-byte header"
            )
        }
        D::Length { len } => {
            write!(f, "{file} is {len} bytes, ")?;
            match layout.versions {
                [one] => write!(f, "not {}", one.header_len),
                versions => {
                    for (i, v) in versions.iter().enumerate() {
                        let word = match i {
                            0 => "neither",
                            _ => " nor",
                        };
                        write!(f, "{word} {} (version {})", v.header_len, v.version)?;
                    }
                    Ok(())
                }
            }
        }
        D::Magic { expected, found } => write!(
            f,
            "{field} magic is {found:#010x}, expected {expected:#010x} ({})",
            ascii(expected)
        ),
        D::Version { found, .. } => {
            write!(f, "{file} version {found} is not supported ")?;
            match layout.versions {
                [one] => write!(f, "(this build reads version {})", one.version),
                versions => {
                    f.write_str("in a file of its length (this build reads ")?;
                    for (i, v) in versions.iter().enumerate() {
                        if i > 0 {
                            f.write_str(if i + 1 == versions.len() {
                                " and "
                            } else {
                                ", "
                            })?;
                        }
                        write!(f, "version {} in ", v.version)?;
                        if i == 0 {
                            write!(f, "{} bytes", v.header_len)?;
                        } else {
                            write!(f, "{}", v.header_len)?;
                        }
                    }
                    f.write_str(")")
                }
            }
        }
        D::Flags { found, known } => {
            write!(f, "{field} flags are {found:#06x}")?;
            if layout.versions.len() > 1 {
                f.write_str("; a bit its version does not define is set")
            } else if known == 0 {
                f.write_str(", expected 0")
            } else {
                f.write_str("; this build knows only ")?;
                bits(known, f)?;
                write!(f, " ({known:#06x})")
            }
        }
        D::BodyTooLong { declared, max } => write!(
            f,
            "{file} claims a {declared}-byte body; at most {max} bytes are valid"
        ),
        D::LengthMismatch { declared, found } if matches!(kind, SideFileKind::Manifest) => write!(
            f,
            "{file} body_len is {declared}, but {found} bytes follow the header"
        ),
        D::LengthMismatch { declared, found } => write!(
            f,
            "{file} claims a {declared}-byte body but holds {found} bytes after its header"
        ),
        D::Count { count, min, max } => {
            let entries = layout.entries;
            if min == 0 {
                write!(
                    f,
                    "{file} claims {count} {entries}, more than the limit of {max}"
                )
            } else {
                write!(
                    f,
                    "{file} claims {count} {entries}; between {min} and {max} are valid"
                )
            }
        }
        D::CountMismatch {
            count,
            expected,
            found,
        } => write!(
            f,
            "{file} claims {count} {} ({expected} bytes) but holds {found} bytes of entries",
            layout.entries
        ),
        D::Checksum { expected, found } => {
            let what = match layout.checksum {
                SideFileChecksum::HeaderAndBody => "checksum",
                SideFileChecksum::Body => "body checksum",
            };
            write!(
                f,
                "{field} {what} mismatch: stored {expected:#010x}, computed {found:#010x}"
            )
        }
        D::SegmentEntry { entry, id, problem } => write!(
            f,
            "{field} entry {entry} (segment {id}) is inconsistent: {problem}"
        ),
        D::KeyPart { part, problem } => write!(f, "{file} {part}: {problem}"),
        D::TrailingBytes { count } => {
            write!(f, "{file} body has {count} byte(s) after the shard number")
        }
        D::Inconsistent { flags } => {
            write!(f, "{field} flags {flags:#06x} disagree with its fields")
        }
        D::Extent {
            base_offset,
            next_offset,
            segment_len,
        } => write!(
            f,
            "{file} describes offsets {base_offset}..{next_offset} in {segment_len} bytes, which no segment holds"
        ),
        D::EntriesForRecords { count, records } => write!(
            f,
            "{file} claims {count} {} for a segment of {records} records",
            layout.entries
        ),
        D::TimeEntry {
            entry,
            timestamp_micros,
            offset,
        } => write!(
            f,
            "{file} entry {entry} (timestamp {timestamp_micros}, offset {offset}) is out of order or outside the segment"
        ),
        D::Body { at } => write!(f, "{file} body is malformed at byte {at}"),
        D::EmbeddedKey => write!(f, "{file} shard key is invalid"),
        D::RemoteEntry { entry } => write!(f, "{file} entry {entry} is invalid"),
        D::Order { entry } => write!(
            f,
            "{file} entry {entry} does not follow entry {}",
            entry.saturating_sub(1)
        ),
        D::Start { start_offset } => write!(
            f,
            "{file} start offset {start_offset} is outside its first segment"
        ),
    }
}
