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
/// | [`WriteInterrupted`](StorageError::WriteInterrupted) | [`Reopen`](ErrorKind::Reopen) |
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
            | Self::ShardClosed { .. }
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
            | Self::AlreadyExists { .. }
            | Self::KeyTooLong { .. } => ErrorKind::InvalidInput,
            Self::ShardLocked { .. }
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::PathBuf;
    use std::sync::Arc;

    use felix_epochs::HistoryError;
    use felix_format::{CorruptionKind, CorruptionSite, ShardKey};
    use felix_io::IoError;
    use felix_recovery::{RecoveryError, RepairPolicy};
    use felix_segment::SegmentError;

    use super::ErrorKind::{self, Fatal, InvalidInput, Reopen, ResetConsumer, Retry};
    use crate::config::{ConfigError, ConfigField};
    use crate::error::{CopyProblem, StorageError};

    /// The variant's name, by an exhaustive match: a new variant does not
    /// compile here until it is named, given an example below and a row
    /// in the table.
    fn name(err: &StorageError) -> &'static str {
        match err {
            StorageError::EmptyBatch { .. } => "EmptyBatch",
            StorageError::PayloadTooLarge { .. } => "PayloadTooLarge",
            StorageError::OffsetSpaceExhausted { .. } => "OffsetSpaceExhausted",
            StorageError::SegmentIdsExhausted { .. } => "SegmentIdsExhausted",
            StorageError::Trimmed { .. } => "Trimmed",
            StorageError::ReplicaOffsetMismatch { .. } => "ReplicaOffsetMismatch",
            StorageError::TruncateBelowBase { .. } => "TruncateBelowBase",
            StorageError::DeletePastEnd { .. } => "DeletePastEnd",
            StorageError::NotSealed { .. } => "NotSealed",
            StorageError::CopyRejected { .. } => "CopyRejected",
            StorageError::ShardLocked { .. } => "ShardLocked",
            StorageError::StoreLocked { .. } => "StoreLocked",
            StorageError::Poisoned { .. } => "Poisoned",
            StorageError::WriteInterrupted { .. } => "WriteInterrupted",
            StorageError::ShardClosed { .. } => "ShardClosed",
            StorageError::InFlightFull { .. } => "InFlightFull",
            StorageError::ShardNotFound { .. } => "ShardNotFound",
            StorageError::InvalidConfig(_) => "InvalidConfig",
            StorageError::Segment { .. } => "Segment",
            StorageError::Recovery(_) => "Recovery",
            StorageError::Generation { .. } => "Generation",
            StorageError::Epochs { .. } => "Epochs",
            StorageError::Io(_) => "Io",
            StorageError::StoreClosed { .. } => "StoreClosed",
            StorageError::AlreadyExists { .. } => "AlreadyExists",
            StorageError::KeyFileDisagrees { .. } => "KeyFileDisagrees",
            StorageError::KeyTooLong { .. } => "KeyTooLong",
        }
    }

    const VARIANTS: usize = 27;

    fn io() -> IoError {
        IoError::new(
            "fdatasync",
            "/data/s/00000000000000000000.log",
            std::io::Error::from_raw_os_error(5),
        )
    }

    /// A key too long for its key file, as a store refuses it.
    fn key_too_long() -> StorageError {
        let root = tempfile::tempdir().unwrap();
        let store = crate::Store::options(root.path()).open().unwrap();
        let long = "k".repeat(felix_format::key_file::MAX_KEY_PART_BYTES + 1);
        store
            .create_shard(&ShardKey::new(long, "default", "orders", 0))
            .unwrap_err()
    }

    /// One example of every variant (and of each class of the variants
    /// whose kind follows what they hold), with the kind it must have.
    fn examples() -> Vec<(StorageError, ErrorKind)> {
        let shard: Arc<str> = Arc::from("acme/default/orders/0");
        let shard = || Arc::clone(&shard);
        let dir = PathBuf::from("/data/s");
        let key = ShardKey::new("acme", "default", "orders", 0);
        let site = CorruptionSite::new("s", 0, 32);
        vec![
            (StorageError::EmptyBatch { shard: shard() }, InvalidInput),
            (
                StorageError::PayloadTooLarge {
                    shard: shard(),
                    index_in_batch: 1,
                    len: 10,
                    max: 5,
                },
                InvalidInput,
            ),
            (
                StorageError::OffsetSpaceExhausted {
                    shard: shard(),
                    next_offset: u64::MAX - 1,
                    records: 2,
                },
                Fatal,
            ),
            (
                StorageError::SegmentIdsExhausted {
                    shard: shard(),
                    last_id: u64::MAX,
                },
                Fatal,
            ),
            (
                StorageError::Trimmed {
                    shard: shard(),
                    requested: 0,
                    oldest: 5,
                },
                ResetConsumer,
            ),
            (
                StorageError::ReplicaOffsetMismatch {
                    shard: shard(),
                    index_in_batch: 0,
                    expected: 3,
                    found: 4,
                },
                InvalidInput,
            ),
            (
                StorageError::TruncateBelowBase {
                    shard: shard(),
                    requested: 1,
                    oldest: 5,
                },
                InvalidInput,
            ),
            (
                StorageError::DeletePastEnd {
                    shard: shard(),
                    requested: 9,
                    readable_end: 5,
                },
                InvalidInput,
            ),
            (
                StorageError::NotSealed {
                    shard: shard(),
                    segment: 3,
                },
                InvalidInput,
            ),
            (
                StorageError::CopyRejected {
                    shard: shard(),
                    segment: 3,
                    problem: CopyProblem::SegmentChanged { segment: 3 },
                },
                InvalidInput,
            ),
            (StorageError::ShardLocked { dir: dir.clone() }, Fatal),
            (StorageError::StoreLocked { root: dir.clone() }, Fatal),
            (
                StorageError::Poisoned {
                    shard: shard(),
                    original: Arc::new(StorageError::Io(io())),
                },
                Reopen,
            ),
            (StorageError::WriteInterrupted { shard: shard() }, Reopen),
            (StorageError::ShardClosed { shard: shard() }, Reopen),
            (
                StorageError::InFlightFull {
                    shard: shard(),
                    limit: 4096,
                },
                Retry,
            ),
            (
                StorageError::ShardNotFound {
                    shard: key.to_string(),
                    dir: dir.clone(),
                },
                InvalidInput,
            ),
            (
                StorageError::InvalidConfig(ConfigError::SizeOutOfRange {
                    field: ConfigField::SegmentSizeBytes,
                    value: 1,
                    min: 60,
                    max: u64::MAX,
                }),
                InvalidInput,
            ),
            (
                StorageError::Segment {
                    shard: shard(),
                    source: SegmentError::Io(io()),
                },
                Reopen,
            ),
            (
                StorageError::Segment {
                    shard: shard(),
                    source: SegmentError::Corrupt {
                        site: site.clone(),
                        kind: CorruptionKind::SegmentMagic { found: 0 },
                    },
                },
                Fatal,
            ),
            (
                StorageError::Segment {
                    shard: shard(),
                    source: SegmentError::EmptyBatch,
                },
                InvalidInput,
            ),
            (StorageError::Recovery(RecoveryError::Io(io())), Reopen),
            (
                StorageError::Recovery(RecoveryError::Unrepairable {
                    dir: dir.clone(),
                    blocking: Vec::new(),
                    policy: RepairPolicy::Default,
                }),
                Fatal,
            ),
            (
                StorageError::Generation {
                    shard: shard(),
                    refusal: HistoryError::GenerationWentBackwards {
                        last: 3,
                        requested: 2,
                    },
                },
                InvalidInput,
            ),
            (
                StorageError::Epochs {
                    shard: shard(),
                    source: io(),
                },
                Reopen,
            ),
            (StorageError::Io(io()), Reopen),
            (StorageError::StoreClosed { root: dir.clone() }, Reopen),
            (
                StorageError::AlreadyExists {
                    key: key.clone(),
                    dir: dir.clone(),
                },
                InvalidInput,
            ),
            (
                StorageError::KeyFileDisagrees {
                    dir,
                    requested: Box::new(key.clone()),
                    found: Box::new(ShardKey::new("acme", "default", "orders", 1)),
                },
                Fatal,
            ),
            (key_too_long(), InvalidInput),
        ]
    }

    #[test]
    fn every_variant_has_the_kind_its_table_row_says() {
        let examples = examples();
        let mut named = BTreeSet::new();
        for (err, kind) in &examples {
            assert_eq!(err.kind(), *kind, "{} ({err:?})", name(err));
            named.insert(name(err));
        }
        assert_eq!(named.len(), VARIANTS, "a variant has no example: {named:?}");
        // The table in `ErrorKind`'s documentation has a row for each.
        let doc = include_str!("kind.rs");
        for variant in named {
            let row = format!("/// | [`{variant}`](StorageError::{variant}) | ");
            assert!(doc.contains(&row), "no table row for {variant}");
        }
    }
}
