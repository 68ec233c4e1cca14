//! The `epochs` file in a shard directory: loading it tolerantly and
//! replacing it atomically.
//!
//! The invariant is that a reader sees either the previous file or the new
//! one, never a mix: a half-written history would be read back as a
//! confident answer about where a generation began, and that answer becomes a
//! truncation point. So the file is only ever replaced by writing a temporary
//! beside it, syncing it, renaming it over the old one and syncing the
//! directory.
//!
//! The file is not authoritative. Every way it can be unusable reads as an
//! empty history, reported through a `tracing` warning and a [`LoadStatus`]
//! the caller can inspect, because a lost history only costs the ability to
//! repair a divergence automatically, never a record.

use std::io;
use std::path::{Path, PathBuf};

use felix_format::epochs::{decode_epochs, encode_epochs};
use felix_format::side_file::SideFileKind;
use felix_io::side_file::{SideFileProblem, read_leniently};
use felix_io::{FileSystem, IoError, ReplaceError, replace_file};

use crate::history::{EpochHistory, HistoryError};

pub use felix_format::{EPOCHS_FILE_NAME, EPOCHS_TEMP_FILE_NAME};

/// Why an existing epochs file was read as an empty history.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscardReason {
    /// It could not be used as a file: too large to be one (not read), not
    /// a regular file (never opened), unreadable, or bytes that are not an
    /// epochs file (short, wrong magic or version, a count that does not
    /// match the length, a failing body CRC). The same classification as
    /// every side file's, by the one reader of them.
    #[error("{0}")]
    Unusable(#[from] SideFileProblem),
    /// The file decoded, but its entries are not a valid history, such as
    /// entries that do not ascend.
    #[error("{0}")]
    History(#[from] HistoryError),
}

/// How [`EpochsFile::load`] came by its history.
#[non_exhaustive]
#[derive(Debug)]
pub enum LoadStatus {
    /// There is no epochs file, as in every shard written before it existed.
    Absent,
    /// The file was read and is the history.
    Loaded,
    /// The file exists but was unusable, so the history is empty.
    Discarded(DiscardReason),
}

/// What [`EpochsFile::load`] found.
#[derive(Debug)]
pub struct Loaded {
    /// The history; empty unless `status` is [`LoadStatus::Loaded`].
    pub history: EpochHistory,
    /// How the history was come by.
    pub status: LoadStatus,
    /// Whether a temporary left by an interrupted store was removed.
    pub removed_stale_temp: bool,
}

impl Loaded {
    /// What [`EpochsFile::load`] finds in a directory holding neither the
    /// file nor its temporary, for a caller whose listing of the directory
    /// (under the shard's lock) just showed that: an empty history, nothing
    /// removed, without asking the file system again.
    pub fn absent() -> Self {
        Self {
            history: EpochHistory::new(),
            status: LoadStatus::Absent,
            removed_stale_temp: false,
        }
    }
}

/// The epochs file of one shard directory.
///
/// A shard has one writer: [`load`](Self::load) removes a stale temporary,
/// so it must not run while a [`store`](Self::store) to the same directory is
/// in progress.
///
/// ```
/// use felix_epochs::{EpochHistory, EpochsFile, LoadStatus};
///
/// let dir = tempfile::tempdir()?;
/// let file = EpochsFile::new(&felix_io::FileSystem::os(), dir.path());
/// assert!(matches!(file.load().status, LoadStatus::Absent));
///
/// let mut history = EpochHistory::new();
/// history.record(1, 0)?;
/// file.store(&history)?;
/// let loaded = file.load();
/// assert!(matches!(loaded.status, LoadStatus::Loaded));
/// assert_eq!(loaded.history, history);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct EpochsFile {
    fs: FileSystem,
    dir: PathBuf,
    path: PathBuf,
    temp_path: PathBuf,
}

impl EpochsFile {
    /// The epochs file of the shard directory `dir` on the file system
    /// `fs`. Touches nothing.
    ///
    /// ```
    /// let file = felix_epochs::EpochsFile::new(&felix_io::FileSystem::os(), "/data/shard");
    /// assert_eq!(file.path(), std::path::Path::new("/data/shard/epochs"));
    /// ```
    pub fn new(fs: &FileSystem, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        Self {
            fs: fs.clone(),
            path: dir.join(EPOCHS_FILE_NAME),
            temp_path: dir.join(EPOCHS_TEMP_FILE_NAME),
            dir,
        }
    }

    /// The path of the file itself.
    ///
    /// See [`EpochsFile::new`] for an example.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the history, reading anything unusable as empty.
    ///
    /// A temporary left by an interrupted [`store`](Self::store) is removed
    /// first; it is never read, because until the rename it was not the
    /// history. An absent file is [`LoadStatus::Absent`]; any other failure is
    /// [`LoadStatus::Discarded`] with the reason, also logged as a warning.
    /// Loading never fails: the history is a convenience, and no state of
    /// this file may stop a shard from opening.
    ///
    /// See [`EpochsFile`] for an example.
    pub fn load(&self) -> Loaded {
        let removed_stale_temp = self.remove_stale_temp();
        let (history, status) = match self.read() {
            Ok(Some(history)) => (history, LoadStatus::Loaded),
            Ok(None) => (EpochHistory::new(), LoadStatus::Absent),
            Err(reason) => {
                tracing::warn!(
                    path = %self.path.display(),
                    %reason,
                    "epochs file discarded; the generation history reads as empty, \
                     so a divergence from the leader cannot be repaired automatically"
                );
                (EpochHistory::new(), LoadStatus::Discarded(reason))
            }
        };
        Loaded {
            history,
            status,
            removed_stale_temp,
        }
    }

    /// Replaces the file with `history`, atomically and durably.
    ///
    /// Writes a temporary, syncs it, renames it over the file and syncs the
    /// directory (felix-io's [`replace_file`]), so a crash at any point
    /// leaves the old file or the new one. On error the old file is still
    /// in place unless the rename happened; a temporary left behind is
    /// removed by the next load. A name (the file's or the temporary's)
    /// taken by something that is not a regular file is not ours: nothing
    /// is written, and the error (at `stat`) says what it is.
    ///
    /// See [`EpochsFile`] for an example.
    pub fn store(&self, history: &EpochHistory) -> Result<(), IoError> {
        history.debug_assert_ascending("before encode");
        let mut bytes = Vec::new();
        encode_epochs(history.entries(), &mut bytes).map_err(|e| {
            // A history never exceeds the cap, so this is a broken invariant,
            // reported rather than written as a file no reader accepts.
            IoError::new("encode", &self.temp_path, io::Error::other(e))
        })?;
        replace_file(
            &self.fs,
            &self.dir,
            EPOCHS_FILE_NAME,
            EPOCHS_TEMP_FILE_NAME,
            &bytes,
        )
        .map_err(|e| match e {
            ReplaceError::Io(e) => e,
            // Not ours: nothing was written over it.
            ReplaceError::NotRegular { path, not_regular } => {
                IoError::new("stat", path, not_regular.into_io_error())
            }
        })
    }

    /// Removes a temporary left by a crash, reporting whether there was one.
    /// A failure only means the next store overwrites it instead.
    fn remove_stale_temp(&self) -> bool {
        match self.fs.remove_file(&self.temp_path) {
            Ok(()) => {
                tracing::info!(
                    path = %self.temp_path.display(),
                    "removed the temporary of an interrupted epochs store"
                );
                true
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => {
                tracing::warn!(
                    error = %IoError::new("remove", &self.temp_path, e),
                    "could not remove the temporary of an interrupted epochs store"
                );
                false
            }
        }
    }

    /// The history in the file, `None` when there is no file.
    fn read(&self) -> Result<Option<EpochHistory>, DiscardReason> {
        // Bounded before reading, so a huge file costs no allocation.
        let entries = read_leniently(&self.fs, &self.path, SideFileKind::Epochs, |bytes| {
            decode_epochs(bytes).map(|entries| entries.collect::<Vec<_>>())
        })?;
        let Some(entries) = entries else {
            return Ok(None);
        };
        let history = EpochHistory::from_entries(entries)?;
        history.debug_assert_ascending("after decode");
        Ok(Some(history))
    }
}

#[cfg(test)]
mod tests;
