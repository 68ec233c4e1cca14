//! The `log-start` file: where a shard's log begins when that is inside a
//! segment or after a reset (felix-format's [`log_start`] has the bytes).
//! Written atomically by the shard ([`write_log_start`]) before a call that
//! moves the start returns; read by every inspection ([`read_log_start`]).
//!
//! Losing it never loses a record: an unusable file is a value (and a
//! note), and the log then begins at its first segment's base offset, so
//! records deleted before the start reappear and none vanish.
//!
//! [`log_start`]: felix_format::log_start

use std::path::Path;

use felix_format::log_start::{LogStart, decode_log_start, encode_log_start};
use felix_format::side_file::SideFileKind;
use felix_format::{LOG_START_FILE_NAME, LOG_START_TEMP_FILE_NAME};
use felix_io::{FileSystem, ReplaceError, replace_file};

use crate::error::RecoveryError;
use crate::report::SideFileProblem;
use felix_io::side_file::read_leniently;

/// What a shard directory's log-start file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredLogStart {
    /// There is none: the log begins at its first segment's base offset.
    Missing,
    /// The recorded start.
    Start(LogStart),
    /// A file is there but cannot be used: the log begins at its first
    /// segment's base offset.
    Unusable(SideFileProblem),
}

impl StoredLogStart {
    /// The recorded start, when the file is usable.
    pub fn start(&self) -> Option<LogStart> {
        match self {
            Self::Start(start) => Some(*start),
            Self::Missing | Self::Unusable(_) => None,
        }
    }
}

/// Reads the log-start file of the shard directory `dir`. Never fails: a
/// file that cannot be used is [`StoredLogStart::Unusable`], saying why.
/// Opens nothing but a regular file and reads at most its 28 bytes.
///
/// ```
/// use felix_format::log_start::{LogStart, MovedBy};
/// use felix_io::FileSystem;
/// use felix_recovery::{StoredLogStart, read_log_start, write_log_start};
///
/// let dir = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// assert_eq!(read_log_start(&fs, dir.path()), StoredLogStart::Missing);
/// let start = LogStart { start_offset: 70, first_segment_id: 2, moved_by: MovedBy::Deletion };
/// write_log_start(&fs, dir.path(), &start)?;
/// assert_eq!(read_log_start(&fs, dir.path()), StoredLogStart::Start(start));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_log_start(fs: &FileSystem, dir: &Path) -> StoredLogStart {
    let path = dir.join(LOG_START_FILE_NAME);
    match read_leniently(fs, &path, SideFileKind::LogStart, decode_log_start) {
        Ok(None) => StoredLogStart::Missing,
        Ok(Some(start)) => StoredLogStart::Start(start),
        Err(problem) => StoredLogStart::Unusable(problem),
    }
}

/// Writes `start` as the log-start file of the shard directory `dir`:
/// temporary, `fsync`, rename over any old file, directory `fsync`, so a
/// crash leaves the old record or the new one, and the new one is durable
/// when this returns.
///
/// Fails, having changed nothing, when the file's name or its temporary's is
/// taken by something that is not a regular file: a start that cannot be
/// recorded must not be reported as moved.
pub fn write_log_start(fs: &FileSystem, dir: &Path, start: &LogStart) -> Result<(), RecoveryError> {
    // Durable before it is relied on: a crash must never leave `log-start`
    // naming a partial file (which would read as no start at all, bringing
    // deleted records back).
    replace_file(
        fs,
        dir,
        LOG_START_FILE_NAME,
        LOG_START_TEMP_FILE_NAME,
        &encode_log_start(start),
    )
    .map_err(|e| match e {
        ReplaceError::NotRegular { path, not_regular } => {
            RecoveryError::NotRegularFile { path, not_regular }
        }
        ReplaceError::Io(e) => RecoveryError::Io(e),
    })
}
