//! The one reader of the small checksummed side files a shard directory
//! holds (key, log-start, raft-state, clean-shutdown, epochs, time index;
//! felix-format's [`side_file`] has their shared frame): it opens nothing
//! but a regular file, reads at most the longest valid file of the kind,
//! and decodes it.
//!
//! It sits here, on the file system and below every crate that reads a
//! side file (recovery, the epochs file, a segment's time index, the Raft
//! log's state), so all of them read through it; felix-format stays free
//! of I/O.
//!
//! Every caller gets the same classification: no file; a file too large to
//! be one (never read); a file that does not decode; a name that is not a
//! regular file; a read that failed. The lenient readers (recovery's, the
//! epochs file's) turn each of those into a [`SideFileProblem`], since no
//! side file holds a record, while felix-raft, for which a damaged
//! raft-state file refuses the open, keeps the I/O error itself
//! ([`ReadSideFileError::Io`]).
//!
//! [`side_file`]: felix_format::side_file

use std::io;
use std::path::{Path, PathBuf};

use felix_format::side_file::{SideFileBody, SideFileError, SideFileKind, SideFileUnread};

use crate::{FileSystem, IoError, NotRegularFile, ReadSmallError, read_small_file};

/// Why [`read_side_file`] could not give a side file's value: every way
/// a read can fail, so a caller may match on all three.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReadSideFileError {
    /// Opening, measuring or reading it failed; a name that is not a
    /// regular file fails at `open`
    /// ([`IoError::not_regular_file`](crate::IoError::not_regular_file)).
    #[error(transparent)]
    Io(#[from] IoError),
    /// It is longer than any valid file of its kind: it was not read.
    #[error("{} is {len} bytes, longer than any valid {file}", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The kind of file.
        file: SideFileKind,
        /// Its length.
        len: u64,
    },
    /// Its bytes do not decode.
    #[error("{} does not decode", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: SideFileError,
    },
}

impl ReadSideFileError {
    /// The failure as a problem to report (`file` is the kind of file
    /// that was read).
    pub fn problem(&self, file: SideFileKind) -> SideFileProblem {
        match self {
            Self::Io(err) => SideFileProblem::of_io_error(file, err),
            Self::TooLarge { file, len, .. } => SideFileProblem::TooLarge {
                file: *file,
                len: *len,
            },
            Self::Invalid { source, .. } => SideFileProblem::Invalid(*source),
        }
    }
}

/// Reads the `file` side file at `path` and decodes it with `decode`:
/// `Ok(None)` when there is none. Opens nothing but a regular file, and
/// reads at most the longest valid file of the kind
/// ([`SideFileLayout::max_len`](felix_format::side_file::SideFileLayout::max_len)).
///
/// ```
/// use felix_format::log_start::{LogStart, MovedBy, decode_log_start, encode_log_start};
/// use felix_format::side_file::SideFileKind;
/// use felix_io::FileSystem;
/// use felix_io::side_file::{SideFileProblem, read_side_file};
///
/// let dir = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// let path = dir.path().join("log-start");
/// let read = |fs| read_side_file(fs, &path, SideFileKind::LogStart, decode_log_start);
/// assert!(matches!(read(&fs), Ok(None)));
/// let start = LogStart { start_offset: 7, first_segment_id: 0, moved_by: MovedBy::Deletion };
/// std::fs::write(&path, encode_log_start(&start))?;
/// assert_eq!(read(&fs)?, Some(start));
/// std::fs::write(&path, b"FLLS")?;
/// let problem = read(&fs).unwrap_err().problem(SideFileKind::LogStart);
/// assert_eq!(problem.name(), "LogStartLength");
/// assert!(matches!(problem, SideFileProblem::Invalid(_)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_side_file<T>(
    fs: &FileSystem,
    path: &Path,
    file: SideFileKind,
    decode: impl FnOnce(&[u8]) -> Result<T, SideFileError>,
) -> Result<Option<T>, ReadSideFileError> {
    read_side_file_within(fs, path, file, file.layout().max_len(), decode)
}

/// [`read_side_file`] for a kind whose bound is not the layout's alone:
/// reads at most `max_len` bytes (a time index holds at most one entry per
/// record of its segment, so its bound is the segment's).
pub fn read_side_file_within<T>(
    fs: &FileSystem,
    path: &Path,
    file: SideFileKind,
    max_len: usize,
    decode: impl FnOnce(&[u8]) -> Result<T, SideFileError>,
) -> Result<Option<T>, ReadSideFileError> {
    let bytes = match read_small_file(fs, path, max_len) {
        Ok(None) => return Ok(None),
        Ok(Some(bytes)) => bytes,
        Err(ReadSmallError::TooLarge { len, .. }) => {
            return Err(ReadSideFileError::TooLarge {
                path: path.to_path_buf(),
                file,
                len,
            });
        }
        Err(ReadSmallError::Io(e)) => return Err(ReadSideFileError::Io(e)),
    };
    decode(&bytes)
        .map(Some)
        .map_err(|source| ReadSideFileError::Invalid {
            path: path.to_path_buf(),
            source,
        })
}

/// [`read_side_file`], leniently: a file that cannot be used is a
/// [`SideFileProblem`], never a failure.
pub fn read_leniently<T>(
    fs: &FileSystem,
    path: &Path,
    file: SideFileKind,
    decode: impl FnOnce(&[u8]) -> Result<T, SideFileError>,
) -> Result<Option<T>, SideFileProblem> {
    read_side_file(fs, path, file, decode).map_err(|e| e.problem(file))
}

/// Why a side file (the key, log-start, raft-state, clean-shutdown,
/// epochs or a time index file) present in a shard directory could not be
/// used: the one vocabulary of every side file's reader
/// ([`read_side_file`]), naming the file's kind.
///
/// No side file holds a record, so none of these is damage to data; what
/// each costs is for the reader that met it to say (recovery's notes, the
/// epochs file's discard).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SideFileProblem {
    /// Its bytes do not decode (the error names the file's kind).
    #[error("it does not decode ({}: {})", .0.name(), .0)]
    Invalid(SideFileError),
    /// It is longer than any valid file of its kind: it was not read.
    #[error("{}", too_large_text(*file, *len))]
    TooLarge {
        /// The kind of file.
        file: SideFileKind,
        /// Its length.
        len: u64,
    },
    /// Its name is not a regular file: never opened.
    #[error("it is {what}")]
    NotAFile {
        /// The kind of file.
        file: SideFileKind,
        /// What it is.
        what: NotRegularFile,
    },
    /// It could not be read.
    #[error("it could not be read ({op}: {kind})")]
    Unreadable {
        /// The kind of file.
        file: SideFileKind,
        /// What failed: open, stat or read.
        op: &'static str,
        /// How.
        kind: io::ErrorKind,
    },
}

fn too_large_text(file: SideFileKind, len: u64) -> String {
    let layout = file.layout();
    match (file, layout.body) {
        // A time index's bound is its segment's records, not a constant.
        (SideFileKind::TimeIndex, _) => {
            format!("it is {len} bytes, longer than any of its segment")
        }
        (_, SideFileBody::None) => format!("it is {len} bytes, longer than a {}", layout.file),
        _ => format!(
            "it is {len} bytes, longer than the largest valid one ({} bytes)",
            layout.max_len()
        ),
    }
}

impl SideFileProblem {
    /// The kind of file it is about.
    pub fn file(&self) -> SideFileKind {
        match self {
            Self::Invalid(err) => err.kind,
            Self::TooLarge { file, .. }
            | Self::NotAFile { file, .. }
            | Self::Unreadable { file, .. } => *file,
        }
    }

    /// A stable name for the problem, for reports and scripts: the decode
    /// error's name (`KeyFileChecksum`, `LogStartLength`, ...), or the
    /// kind's name followed by `TooLarge`, `NotAFile` or `Unreadable`
    /// (`KeyFileTooLarge`, `RaftStateUnreadable`, ...). Both come from
    /// felix-format's one table of names
    /// ([`SideFileError::name`], [`SideFileKind::unread_name`]).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Invalid(err) => err.name(),
            Self::TooLarge { file, .. } => file.unread_name(SideFileUnread::TooLarge),
            Self::NotAFile { file, .. } => file.unread_name(SideFileUnread::NotAFile),
            Self::Unreadable { file, .. } => file.unread_name(SideFileUnread::Unreadable),
        }
    }

    /// A failure to read a `file` side file, as a problem: a name that is
    /// not a regular file is [`NotAFile`](Self::NotAFile), anything else
    /// [`Unreadable`](Self::Unreadable).
    pub fn of_io_error(file: SideFileKind, err: &IoError) -> Self {
        match err.not_regular_file() {
            Some(what) => Self::NotAFile { file, what },
            None => Self::Unreadable {
                file,
                op: err.op(),
                kind: err.kind(),
            },
        }
    }
}
