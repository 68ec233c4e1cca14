//! What a caller does next about an error: [`ErrorKind`].

use felix_recovery::RecoveryError;
use felix_segment::SegmentError;

use super::StorageError;

/// What the caller does next about a [`StorageError`]: the one question a
/// broker asks of every error it gets ([`StorageError::kind`]). The error
/// itself keeps every fact (the shard, the offsets, the path, the I/O error
/// underneath); the kind only groups the variants by the remedy.
///
/// | variant | kind |
/// |---|---|
/// | [`InFlightFull`](StorageError::InFlightFull) | [`Retry`](ErrorKind::Retry) |
/// | [`Trimmed`](StorageError::Trimmed) | [`ResetConsumer`](ErrorKind::ResetConsumer) |
/// | [`Poisoned`](StorageError::Poisoned) | [`Reopen`](ErrorKind::Reopen) |
/// | [`ShardClosed`](StorageError::ShardClosed) | [`Reopen`](ErrorKind::Reopen) |
/// | [`StoreClosed`](StorageError::StoreClosed) | [`Reopen`](ErrorKind::Reopen) |
/// | [`Io`](StorageError::Io) | [`Reopen`](ErrorKind::Reopen) |
/// | [`Epochs`](StorageError::Epochs) | [`Reopen`](ErrorKind::Reopen) |
/// | [`Segment`](StorageError::Segment) | by the segment error: an I/O failure or a stopped writer [`Reopen`](ErrorKind::Reopen), damage [`Fatal`](ErrorKind::Fatal), a refused batch or offset [`InvalidInput`](ErrorKind::InvalidInput), an exhausted offset space [`Fatal`](ErrorKind::Fatal) |
/// | [`Recovery`](StorageError::Recovery) | by the recovery error: an I/O failure [`Reopen`](ErrorKind::Reopen), a key too long [`InvalidInput`](ErrorKind::InvalidInput), damage it may not repair or an entry that is no file [`Fatal`](ErrorKind::Fatal) |
/// | [`EmptyBatch`](StorageError::EmptyBatch) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`PayloadTooLarge`](StorageError::PayloadTooLarge) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`ReplicaOffsetMismatch`](StorageError::ReplicaOffsetMismatch) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`TruncateBelowBase`](StorageError::TruncateBelowBase) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`DeletePastEnd`](StorageError::DeletePastEnd) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`NotSealed`](StorageError::NotSealed) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`CopyRejected`](StorageError::CopyRejected) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`InvalidConfig`](StorageError::InvalidConfig) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`Generation`](StorageError::Generation) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`ShardNotFound`](StorageError::ShardNotFound) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`AlreadyExists`](StorageError::AlreadyExists) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`KeyTooLong`](StorageError::KeyTooLong) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`ShardLocked`](StorageError::ShardLocked) | [`Fatal`](ErrorKind::Fatal) |
/// | [`StoreLocked`](StorageError::StoreLocked) | [`Fatal`](ErrorKind::Fatal) |
/// | [`KeyFileDisagrees`](StorageError::KeyFileDisagrees) | [`Fatal`](ErrorKind::Fatal) |
/// | [`OffsetSpaceExhausted`](StorageError::OffsetSpaceExhausted) | [`Fatal`](ErrorKind::Fatal) |
/// | [`SegmentIdsExhausted`](StorageError::SegmentIdsExhausted) | [`Fatal`](ErrorKind::Fatal) |
///
/// ```
/// use felix_storage::{ErrorKind, ReadBound, Record, Retention, Shard, StoreConfig};
///
/// let dir = tempfile::tempdir()?;
/// let config = StoreConfig {
///     segment_size_bytes: 100,
///     retention: Retention { max_bytes: Some(200), ..Retention::default() },
///     ..StoreConfig::default()
/// };
/// let shard = Shard::options(dir.path()).config(config).open()?;
/// for i in 0..10 {
///     shard.append(&[Record::new(i, vec![0u8; 20])]).wait()?;
/// }
/// shard.apply_retention()?;
/// let mut from = 0;
/// let records = loop {
///     match shard.read(from, 1 << 20, ReadBound::Committed) {
///         Ok(records) => break records,
///         Err(err) if err.kind() == ErrorKind::ResetConsumer => from = shard.offsets().base,
///         Err(err) => return Err(err.into()),
///     }
/// };
/// assert_eq!(records[0].offset, shard.offsets().base);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Nothing was done and nothing is wrong: wait (for an earlier append
    /// to complete), then try again.
    Retry,
    /// The records asked for are gone (retention, or a moved log start): a
    /// consumer resumes at the oldest offset the error names.
    ResetConsumer,
    /// The handle is done for: the shard (or store) was closed, or a failed
    /// write or sync stopped its writes. Open it again; recovery keeps
    /// everything acknowledged.
    Reopen,
    /// The call was refused for what it asked (an empty batch, an offset or
    /// key that does not fit, a setting out of range); nothing changed.
    /// Fix the request.
    InvalidInput,
    /// Damage, a refused recovery, another writer holding the directory or
    /// an exhausted offset space: nothing this process can retry; an
    /// operator looks.
    Fatal,
}

impl StorageError {
    /// What the caller does next about this error: see [`ErrorKind`] for
    /// every variant's kind.
    ///
    /// ```
    /// use felix_storage::{ErrorKind, Record, Shard};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let shard = Shard::options(dir.path()).open()?;
    /// let err = shard.append(&[]).wait().unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::InvalidInput);
    /// shard.close()?;
    /// let err = shard.append(&[Record::now("late")]).wait().unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::Reopen);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::InFlightFull { .. } => ErrorKind::Retry,
            Self::Trimmed { .. } => ErrorKind::ResetConsumer,
            Self::Poisoned { .. }
            | Self::WriteInterrupted { .. }
            | Self::Closed { .. }
            | Self::StoreClosed { .. }
            | Self::Io(_)
            | Self::Epochs { .. } => ErrorKind::Reopen,
            Self::Segment { source, .. } => segment_kind(source),
            Self::Recovery(err) => recovery_kind(err),
            Self::EmptyBatch { .. }
            | Self::PayloadTooLarge { .. }
            | Self::ReplicaOffsetMismatch { .. }
            | Self::TruncateBelowBase { .. }
            | Self::DeletePastEnd { .. }
            | Self::NotSealed { .. }
            | Self::CopyRejected { .. }
            | Self::InvalidConfig(_)
            | Self::Generation { .. }
            | Self::ShardNotFound { .. }
            | Self::NotFound { .. }
            | Self::AlreadyExists { .. }
            | Self::KeyTooLong { .. } => ErrorKind::InvalidInput,
            Self::Locked { .. }
            | Self::StoreLocked { .. }
            | Self::KeyFileDisagrees { .. }
            | Self::OffsetSpaceExhausted { .. }
            | Self::SegmentIdsExhausted { .. } => ErrorKind::Fatal,
        }
    }
}

fn segment_kind(err: &SegmentError) -> ErrorKind {
    match err {
        SegmentError::Io(_) | SegmentError::Poisoned { .. } => ErrorKind::Reopen,
        SegmentError::PayloadTooLarge { .. }
        | SegmentError::EmptyBatch
        | SegmentError::OffsetOutOfRange { .. } => ErrorKind::InvalidInput,
        // Damage, and anything new: an operator looks.
        _ => ErrorKind::Fatal,
    }
}

fn recovery_kind(err: &RecoveryError) -> ErrorKind {
    match err {
        RecoveryError::Io(_) => ErrorKind::Reopen,
        RecoveryError::KeyTooLong { .. } => ErrorKind::InvalidInput,
        // Damage recovery may not repair, and anything new.
        _ => ErrorKind::Fatal,
    }
}
