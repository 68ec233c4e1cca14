//! Faults a test can inject: which call fails, and how.

/// The operation a fault matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultOp {
    /// A positioned write.
    Write,
    /// `sync_data` or `sync_all` of a file.
    SyncFile,
    /// `sync_dir`.
    SyncDir,
    /// `set_len`.
    SetLen,
    /// `rename`.
    Rename,
    /// `remove_file`.
    Remove,
    /// `open` in a creating mode.
    Create,
}

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultEffect {
    /// The call fails with this errno and changes nothing.
    Errno(i32),
    /// A write stores only its first `written` bytes, then fails with `errno`.
    ShortWrite {
        /// Bytes stored before the failure.
        written: usize,
        /// The errno returned.
        errno: i32,
    },
    /// A file sync fails with `errno`, and the written data stays in the
    /// cache (it may or may not reach the disk later).
    SyncFailKeep(i32),
    /// A file sync fails with `errno`, and the data it should have written
    /// is dropped: the file reads back as it was when last durable.
    SyncFailDrop(i32),
    /// A sync (of a file or a directory) reports success but makes nothing
    /// durable: a lying disk, or a sync the code forgot. Tests use it to
    /// show that a crash check notices each missing sync.
    SyncSkipped,
}

/// A fault to inject: the `(skip + 1)`-th call of `op` on a path containing
/// `path_contains` has `effect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Which operation.
    pub op: FaultOp,
    /// A substring the path must contain (empty matches every path).
    pub path_contains: String,
    /// Matching calls to let through first.
    pub skip: u32,
    /// What happens.
    pub effect: FaultEffect,
}

/// The errno a fault returns, or `None` for one that lets the call succeed.
pub(super) fn errno_of(effect: FaultEffect) -> Option<i32> {
    match effect {
        FaultEffect::Errno(e) | FaultEffect::SyncFailKeep(e) | FaultEffect::SyncFailDrop(e) => {
            Some(e)
        }
        FaultEffect::ShortWrite { errno, .. } => Some(errno),
        FaultEffect::SyncSkipped => None,
    }
}
