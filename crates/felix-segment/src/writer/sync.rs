//! Syncing the active segment from another thread, and the one record of
//! the failure that stopped its writer: a failed write or sync is kept here
//! and every later call gets it back, never a retry.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::error::{Result, SegmentError};
use crate::fs::sync_data;
use crate::segment::SegmentFile;

/// Shared record of the failure that stopped a writer.
pub(super) type Poison = Arc<OnceLock<Arc<SegmentError>>>;

/// Records `err` as the writer's first failure and returns the error to give
/// the caller: the failure itself to the call it happened to (it is that
/// call's error, not an earlier one), `Poisoned` naming the first failure
/// when another got there first.
pub(super) fn poison(cell: &Poison, path: &Path, err: SegmentError) -> SegmentError {
    match cell.set(Arc::new(err.clone())) {
        Ok(()) => {
            tracing::error!(path = %path.display(), error = %err, "segment writer stopped");
            err
        }
        Err(_) => SegmentError::Poisoned {
            path: path.to_path_buf(),
            original: cell.get().map_or_else(|| Arc::new(err), Arc::clone),
        },
    }
}

/// Syncs a segment from another thread; see
/// [`SegmentWriter::sync_handle`](super::SegmentWriter::sync_handle).
#[derive(Debug, Clone)]
pub struct SyncHandle {
    pub(super) segment: Arc<SegmentFile>,
    pub(super) poison: Poison,
}

impl SyncHandle {
    /// `fdatasync`s the segment. A failure stops the writer for good.
    pub fn sync_data(&self) -> Result<()> {
        if let Some(original) = self.poison.get() {
            return Err(SegmentError::Poisoned {
                path: self.segment.path().to_path_buf(),
                original: Arc::clone(original),
            });
        }
        sync_data(self.segment.file(), self.segment.path())
            .map_err(|e| poison(&self.poison, self.segment.path(), e.into()))
    }

    /// The segment this handle syncs.
    pub fn segment(&self) -> &Arc<SegmentFile> {
        &self.segment
    }
}
