//! The newest segment's descriptors, kept from an open's inspection for
//! the writer that continues the segment.
//!
//! An open ([`crate::open_shard`], under the shard's lock) measures the
//! newest segment and checks its index exactly as an inspection does, but
//! through descriptors opened read-write, and hands them to the writer: a
//! clean reopen then opens each file once, not twice (read-only to
//! check, then read-write to write). Reading through a read-write
//! descriptor reads the same bytes; nothing is written here. Where a
//! read-write open fails, the read-only one an inspection makes runs
//! instead and nothing is kept, so what is found and reported is as
//! before, and the writer's own open meets the failure as it always did.

use std::io;
use std::path::Path;
use std::sync::Arc;

use felix_io::{FileSystem, OpenMode};
use felix_segment::{IndexLoadError, OpenedIndex, SegmentFile, SparseIndex};

/// Descriptors an open's inspection kept for the writer.
#[derive(Debug)]
pub(crate) struct Held {
    /// The newest segment's id.
    pub(crate) id: u64,
    /// The newest segment, opened read-write, its header checked.
    pub(crate) segment: SegmentFile,
    /// Its index file, opened read-write, when it opened, with what was
    /// read from it when it loaded.
    pub(crate) index: Option<OpenedIndex>,
}

/// What an inspection is for.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Purpose<'a> {
    /// Trust a clean-shutdown record that lists exactly the directory's
    /// segments for the sealed ones.
    pub(crate) use_clean_shutdown: bool,
    /// The inspection of an open, under the shard's lock: the newest
    /// segment and its index are opened read-write and kept ([`Held`]).
    pub(crate) for_writer: bool,
    /// The key file as the caller read it just before (a store checks it
    /// before opening a shard, under its root's lock): taken instead of
    /// reading the file a second time.
    pub(crate) key: Option<&'a crate::StoredKey>,
}

/// Segment `id` of `dir` opened read-write with its header checked, or
/// `None` when that fails for any reason (the read-only open then says
/// why, as for an inspection).
pub(crate) fn open_segment(
    fs: &FileSystem,
    dir: &Path,
    id: u64,
    shard: &Arc<str>,
) -> Option<(SegmentFile, u64)> {
    SegmentFile::open(fs, dir, id, Arc::clone(shard), OpenMode::ReadWrite).ok()
}

/// `segment`'s index loaded as [`SparseIndex::load`] loads it, through a
/// read-write descriptor kept in `kept`. `None` when the read-write open
/// fails other than by a missing file: the caller then loads it read-only.
pub(crate) fn load_index(
    segment: &SegmentFile,
    valid_len: u64,
    kept: &mut Option<OpenedIndex>,
) -> Option<Result<SparseIndex, IndexLoadError>> {
    let path = segment.index_path();
    match segment.fs().open_with_len(&path, OpenMode::ReadWrite) {
        Ok((file, len)) => {
            let base = segment.base_offset();
            let (loaded, bytes) = match SparseIndex::load_file(&*file, len, &path, base, valid_len)
            {
                Ok((index, bytes)) => (Ok(index), Some(bytes)),
                Err(e) => (Err(e), None),
            };
            *kept = Some(OpenedIndex { file, bytes });
            Some(loaded)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Some(Err(IndexLoadError::Missing { path }))
        }
        Err(_) => None,
    }
}
