//! The clean-shutdown file: written when a shard is closed cleanly, trusted
//! by the next open instead of opening every sealed segment, and removed
//! by that open before anything is written.
//!
//! Why trusting it is safe: sealed segment files never change while their
//! names exist (a segment is sealed durably before the next one is created;
//! retention and truncation remove whole files; repair only ever touches
//! the newest segment), and segment ids only grow. So if the directory
//! holds exactly the segment files the record lists, the sealed ones are
//! the files it describes — however stale the record — and the newest one
//! is scanned in full as after any crash. Any other listing, and any record
//! that does not decode, falls back to inspecting every segment.

use std::io;
use std::path::Path;

use felix_format::SegmentExtent;
use felix_format::clean::{
    CleanShutdownDecodeError, MAX_CLEAN_SHUTDOWN_FILE_LEN, decode_clean_shutdown,
    encode_clean_shutdown,
};
pub use felix_format::{CLEAN_SHUTDOWN_FILE_NAME, CLEAN_SHUTDOWN_TEMP_FILE_NAME};
use felix_io::{FileSystem, FileType, IoError, OpenMode};

use crate::error::RecoveryError;
use crate::inspect::{InspectOptions, Inspection};
use crate::report::Note;

/// Why a clean-shutdown file present in a shard directory was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CleanShutdownUnused {
    /// Its bytes do not decode.
    #[error("it does not decode: {0}")]
    Invalid(CleanShutdownDecodeError),
    /// It is larger than any valid file.
    #[error("it is {len} bytes, larger than any valid one")]
    TooLarge {
        /// Its length.
        len: u64,
    },
    /// It could not be read.
    #[error("it could not be read ({op}: {kind})")]
    Unreadable {
        /// What failed: open, stat or read.
        op: &'static str,
        /// How.
        kind: io::ErrorKind,
    },
    /// The directory's segment files are not the ones it lists: the shard
    /// was written after it.
    #[error("the directory's {found} segment file(s) are not the {listed} it lists")]
    Stale {
        /// Segments it lists.
        listed: usize,
        /// Segment files in the directory.
        found: usize,
    },
    /// Opening was asked to verify every segment.
    #[error("every segment was asked to be verified")]
    FullVerify,
    /// Opening was asked to check every entry of every index
    /// ([`IndexCheck::EveryEntry`](crate::IndexCheck::EveryEntry)), which
    /// needs the sealed segments' records.
    #[error("every index entry was asked to be checked")]
    EveryIndexEntry,
    /// The last segment it lists is an interrupted creation, so the segment
    /// appends would continue in is one it describes without a scan.
    #[error("the last segment it lists is being removed as an interrupted creation")]
    NewestRemoved,
}

/// Writes the clean-shutdown file for `segments` (in id order, the active
/// one last) into `dir`: temporary, `fsync`, rename, directory `fsync`, so
/// a crash leaves either no file or a whole one.
///
/// Returns `Ok(false)`, having written nothing, when the file's name or its
/// temporary's is taken by something that is not a regular file: that is
/// not ours, so it is left alone (a rename would replace a FIFO and fail
/// on a directory), and the next open inspects every segment instead.
///
/// ```
/// use felix_format::SegmentExtent;
/// use felix_io::FileSystem;
/// use felix_recovery::{CLEAN_SHUTDOWN_FILE_NAME, write_clean_shutdown};
///
/// let dir = tempfile::tempdir()?;
/// let segments = [SegmentExtent { id: 0, base_offset: 0, next_offset: 0, len: 32 }];
/// assert!(write_clean_shutdown(&FileSystem::os(), dir.path(), &segments)?);
/// assert!(dir.path().join(CLEAN_SHUTDOWN_FILE_NAME).exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_clean_shutdown(
    fs: &FileSystem,
    dir: &Path,
    segments: &[SegmentExtent],
) -> Result<bool, RecoveryError> {
    let temp_path = dir.join(CLEAN_SHUTDOWN_TEMP_FILE_NAME);
    let path = dir.join(CLEAN_SHUTDOWN_FILE_NAME);
    let io_err =
        |op: &'static str, at: &Path, e: io::Error| RecoveryError::Io(IoError::new(op, at, e));
    for name in [&path, &temp_path] {
        match fs.entry_type(name) {
            Ok(None | Some(FileType::Regular)) => {}
            Ok(Some(file_type)) => {
                tracing::warn!(path = %name.display(), %file_type, "not a regular file, left alone; no clean-shutdown file written");
                return Ok(false);
            }
            Err(e) => return Err(io_err("stat", name, e)),
        }
    }
    let mut bytes = Vec::new();
    // A shard's segments always form a valid list; a refusal here is a
    // broken invariant, reported rather than written.
    encode_clean_shutdown(segments, &mut bytes)
        .map_err(|e| io_err("encode clean-shutdown", &temp_path, io::Error::other(e)))?;
    let temp = fs
        .open(&temp_path, OpenMode::CreateTruncate)
        .map_err(|e| io_err("create", &temp_path, e))?;
    temp.write_all_at(&bytes, 0)
        .map_err(|e| io_err("write", &temp_path, e))?;
    // The data must be durable before the name: otherwise a crash could
    // leave the final name on a partial file (which would only be ignored,
    // but then the work of closing cleanly is lost).
    temp.sync_all()
        .map_err(|e| io_err("fsync", &temp_path, e))?;
    drop(temp);
    fs.rename(&temp_path, &path)
        .map_err(|e| io_err("rename", &temp_path, e))?;
    fs.sync_dir(dir)
        .map_err(|e| io_err("fsync directory", dir, e))?;
    Ok(true)
}

/// Reads the clean-shutdown file of `dir`: `None` when there is none.
pub(crate) fn load(
    fs: &FileSystem,
    dir: &Path,
) -> Option<Result<Vec<SegmentExtent>, CleanShutdownUnused>> {
    let path = dir.join(CLEAN_SHUTDOWN_FILE_NAME);
    let file = match fs.open(&path, OpenMode::Read) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => return Some(Err(unreadable("open", &e))),
    };
    let read = || -> Result<Vec<SegmentExtent>, CleanShutdownUnused> {
        let len = file.file_len().map_err(|e| unreadable("stat", &e))?;
        let size = usize::try_from(len)
            .ok()
            .filter(|&n| n <= MAX_CLEAN_SHUTDOWN_FILE_LEN)
            .ok_or(CleanShutdownUnused::TooLarge { len })?;
        let mut bytes = vec![0u8; size];
        file.read_exact_at(&mut bytes, 0)
            .map_err(|e| unreadable("read", &e))?;
        decode_clean_shutdown(&bytes).map_err(CleanShutdownUnused::Invalid)
    };
    Some(read())
}

fn unreadable(op: &'static str, e: &io::Error) -> CleanShutdownUnused {
    CleanShutdownUnused::Unreadable { op, kind: e.kind() }
}

/// Removes the clean-shutdown file (a regular file, as the listing found
/// it) and makes the removal durable: once a shard is open for writing, the
/// record no longer describes it. Its temporary is removed with the other
/// temporaries.
pub(crate) fn remove_in(fs: &FileSystem, dir: &Path) -> Result<(), RecoveryError> {
    let path = dir.join(CLEAN_SHUTDOWN_FILE_NAME);
    match fs.remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(IoError::new("remove", &path, e).into()),
    }
    fs.sync_dir(dir)
        .map_err(|e| IoError::new("fsync directory", dir, e).into())
}

/// The clean-shutdown record's segments when it can be trusted for this
/// listing, noting why not otherwise.
pub(crate) fn trusted_sealed(
    inspection: &mut Inspection,
    ids: &[u64],
    options: &InspectOptions,
) -> Option<Vec<SegmentExtent>> {
    let unused = |inspection: &mut Inspection, reason| {
        inspection.notes.push(Note::CleanShutdownUnused { reason });
        None
    };
    if options.full_verify {
        return unused(inspection, CleanShutdownUnused::FullVerify);
    }
    if options.index_check == crate::IndexCheck::EveryEntry {
        return unused(inspection, CleanShutdownUnused::EveryIndexEntry);
    }
    match crate::clean::load(&inspection.fs, &inspection.dir)? {
        Ok(listed) if listed.iter().map(|s| s.id).eq(ids.iter().copied()) => {
            inspection.notes.push(Note::CleanShutdownUsed {
                sealed: listed.len().saturating_sub(1),
            });
            Some(listed)
        }
        Ok(listed) => unused(
            inspection,
            CleanShutdownUnused::Stale {
                listed: listed.len(),
                found: ids.len(),
            },
        ),
        Err(reason) => unused(inspection, reason),
    }
}
