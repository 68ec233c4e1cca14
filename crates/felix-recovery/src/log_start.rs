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

use std::io;
use std::path::Path;

use felix_format::log_start::{LOG_START_FILE_LEN, LogStart, decode_log_start, encode_log_start};
use felix_format::{LOG_START_FILE_NAME, LOG_START_TEMP_FILE_NAME};
use felix_io::{FileSystem, FileType, IoError, OpenMode, not_regular_file};

use crate::error::RecoveryError;
use crate::report::LogStartProblem;

/// What a shard directory's log-start file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredLogStart {
    /// There is none: the log begins at its first segment's base offset.
    Missing,
    /// The recorded start.
    Start(LogStart),
    /// A file is there but cannot be used: the log begins at its first
    /// segment's base offset.
    Unusable(LogStartProblem),
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
/// use felix_format::log_start::LogStart;
/// use felix_io::FileSystem;
/// use felix_recovery::{StoredLogStart, read_log_start, write_log_start};
///
/// let dir = tempfile::tempdir()?;
/// let fs = FileSystem::os();
/// assert_eq!(read_log_start(&fs, dir.path()), StoredLogStart::Missing);
/// let start = LogStart { start_offset: 70, first_segment_id: 2 };
/// write_log_start(&fs, dir.path(), &start)?;
/// assert_eq!(read_log_start(&fs, dir.path()), StoredLogStart::Start(start));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_log_start(fs: &FileSystem, dir: &Path) -> StoredLogStart {
    let path = dir.join(LOG_START_FILE_NAME);
    let unreadable = |op, e: &io::Error| match not_regular_file(e) {
        Some(what) => LogStartProblem::NotAFile(what),
        None => LogStartProblem::Unreadable { op, kind: e.kind() },
    };
    let file = match fs.open(&path, OpenMode::Read) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return StoredLogStart::Missing,
        Err(e) => return StoredLogStart::Unusable(unreadable("open", &e)),
    };
    let read = || -> Result<LogStart, LogStartProblem> {
        let len = file.file_len().map_err(|e| unreadable("stat", &e))?;
        // Anything but 28 bytes fails to decode: read no more than one
        // byte past them, to name the length.
        let size = usize::try_from(len.min(LOG_START_FILE_LEN as u64 + 1)).unwrap_or(0);
        let mut bytes = vec![0u8; size];
        file.read_exact_at(&mut bytes, 0)
            .map_err(|e| unreadable("read", &e))?;
        if len > LOG_START_FILE_LEN as u64 {
            return Err(LogStartProblem::TooLarge { len });
        }
        decode_log_start(&bytes).map_err(LogStartProblem::Invalid)
    };
    match read() {
        Ok(start) => StoredLogStart::Start(start),
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
    let temp_path = dir.join(LOG_START_TEMP_FILE_NAME);
    let path = dir.join(LOG_START_FILE_NAME);
    let io_err =
        |op: &'static str, at: &Path, e: io::Error| RecoveryError::Io(IoError::new(op, at, e));
    for name in [&path, &temp_path] {
        match fs.entry_type(name) {
            Ok(None | Some(FileType::Regular)) => {}
            Ok(Some(file_type)) => {
                return Err(RecoveryError::NotRegularFile {
                    path: name.clone(),
                    not_regular: felix_io::NotRegularFile {
                        file_type,
                        via_symlink: false,
                    },
                });
            }
            Err(e) => return Err(io_err("stat", name, e)),
        }
    }
    let temp = fs
        .open(&temp_path, OpenMode::CreateTruncate)
        .map_err(|e| io_err("create", &temp_path, e))?;
    temp.write_all_at(&encode_log_start(start), 0)
        .map_err(|e| io_err("write", &temp_path, e))?;
    // Durable before the name points at it: a crash must never leave
    // `log-start` naming a partial file (which would read as no start at
    // all, bringing deleted records back).
    temp.sync_all()
        .map_err(|e| io_err("fsync", &temp_path, e))?;
    drop(temp);
    fs.rename(&temp_path, &path)
        .map_err(|e| io_err("rename", &temp_path, e))?;
    fs.sync_dir(dir)
        .map_err(|e| io_err("fsync directory", dir, e))?;
    Ok(())
}
