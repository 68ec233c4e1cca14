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
/// | [`Segment`](StorageError::Segment) | by the segment error (the next table) |
/// | [`Recovery`](StorageError::Recovery) | by the recovery error (the table after it) |
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
/// | [`ShardLocked`](StorageError::ShardLocked) | [`Fatal`](ErrorKind::Fatal): another process (or store) holds the shard, and waiting will not free it; an operator looks at who |
/// | [`StoreLocked`](StorageError::StoreLocked) | [`Fatal`](ErrorKind::Fatal): another process (or store) holds the root, and waiting will not free it; an operator looks at who |
/// | [`KeyFileDisagrees`](StorageError::KeyFileDisagrees) | [`Fatal`](ErrorKind::Fatal) |
/// | [`OffsetSpaceExhausted`](StorageError::OffsetSpaceExhausted) | [`Fatal`](ErrorKind::Fatal) |
/// | [`SegmentIdsExhausted`](StorageError::SegmentIdsExhausted) | [`Fatal`](ErrorKind::Fatal) |
///
/// | segment error, in [`Segment`](StorageError::Segment) | kind |
/// |---|---|
/// | [`Io`](crate::recovery::SegmentError::Io) | [`Reopen`](ErrorKind::Reopen) |
/// | [`Poisoned`](crate::recovery::SegmentError::Poisoned) | [`Reopen`](ErrorKind::Reopen) |
/// | [`PayloadTooLarge`](crate::recovery::SegmentError::PayloadTooLarge) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`EmptyBatch`](crate::recovery::SegmentError::EmptyBatch) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`OffsetOutOfRange`](crate::recovery::SegmentError::OffsetOutOfRange) | [`Fatal`](ErrorKind::Fatal): a shard reads a segment only at offsets its own bounds place there, so this is an inconsistency inside it, not a bad request |
/// | [`OffsetSpaceExhausted`](crate::recovery::SegmentError::OffsetSpaceExhausted) | [`Fatal`](ErrorKind::Fatal) |
/// | [`Corrupt`](crate::recovery::SegmentError::Corrupt) | [`Fatal`](ErrorKind::Fatal) |
/// | [`StaleIndex`](crate::recovery::SegmentError::StaleIndex) | [`Fatal`](ErrorKind::Fatal) |
///
/// | recovery error, in [`Recovery`](StorageError::Recovery) | kind |
/// |---|---|
/// | [`Io`](crate::recovery::RecoveryError::Io) | [`Reopen`](ErrorKind::Reopen) |
/// | [`KeyTooLong`](crate::recovery::RecoveryError::KeyTooLong) | [`InvalidInput`](ErrorKind::InvalidInput) |
/// | [`NotRegularFile`](crate::recovery::RecoveryError::NotRegularFile) | [`Fatal`](ErrorKind::Fatal) |
/// | [`Unrepairable`](crate::recovery::RecoveryError::Unrepairable) | [`Fatal`](ErrorKind::Fatal) |
///
/// A segment or recovery error of a kind added later is
/// [`Fatal`](ErrorKind::Fatal) until it is given a row.
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
        SegmentError::PayloadTooLarge { .. } | SegmentError::EmptyBatch => ErrorKind::InvalidInput,
        // A shard asks a segment only for offsets its own bounds place
        // there: out of range is an inconsistency inside the shard, not a
        // request to fix. Damage, and anything new: an operator looks.
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
    use felix_format::key_file::{KeyPart, KeyPartProblem};
    use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
    use felix_format::{CorruptionKind, CorruptionSite, IndexEntry, ShardKey};
    use felix_io::{FileType, IoError, NotRegularFile};
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

    /// The segment error's variant, for its row in the segment table.
    fn segment_name(err: &SegmentError) -> &'static str {
        match err {
            SegmentError::Io(_) => "Io",
            SegmentError::Poisoned { .. } => "Poisoned",
            SegmentError::PayloadTooLarge { .. } => "PayloadTooLarge",
            SegmentError::EmptyBatch => "EmptyBatch",
            SegmentError::OffsetOutOfRange { .. } => "OffsetOutOfRange",
            SegmentError::OffsetSpaceExhausted { .. } => "OffsetSpaceExhausted",
            SegmentError::Corrupt { .. } => "Corrupt",
            SegmentError::StaleIndex { .. } => "StaleIndex",
            _ => "a segment error the tables do not name",
        }
    }

    /// The recovery error's variant, for its row in the recovery table.
    fn recovery_name(err: &RecoveryError) -> &'static str {
        match err {
            RecoveryError::Io(_) => "Io",
            RecoveryError::KeyTooLong { .. } => "KeyTooLong",
            RecoveryError::NotRegularFile { .. } => "NotRegularFile",
            RecoveryError::Unrepairable { .. } => "Unrepairable",
            _ => "a recovery error the tables do not name",
        }
    }

    /// The first cell of the row that gives `err`'s kind: the variant's,
    /// or for a segment or recovery error, the inner error's in its table.
    fn row_label(err: &StorageError) -> String {
        match err {
            StorageError::Segment { source, .. } => {
                let v = segment_name(source);
                format!("[`{v}`](crate::recovery::SegmentError::{v})")
            }
            StorageError::Recovery(inner) => {
                let v = recovery_name(inner);
                format!("[`{v}`](crate::recovery::RecoveryError::{v})")
            }
            other => {
                let v = name(other);
                format!("[`{v}`](StorageError::{v})")
            }
        }
    }

    /// Every table row of `ErrorKind`'s documentation that names an error:
    /// its first cell, and the rest of the line.
    fn table_rows(doc: &str) -> Vec<(&str, &str)> {
        doc.lines()
            .filter_map(|line| line.strip_prefix("/// | "))
            .filter(|row| row.starts_with("[`"))
            .map(|row| row.split_once(" | ").expect("a row has two cells"))
            .collect()
    }

    /// The kind a row's second cell names first (`[`Fatal`](ErrorKind::Fatal)...`).
    fn kind_in(cell: &str) -> Option<ErrorKind> {
        let (_, after) = cell.split_once("(ErrorKind::")?;
        let (kind, _) = after.split_once(')')?;
        Some(match kind {
            "Retry" => Retry,
            "ResetConsumer" => ResetConsumer,
            "Reopen" => Reopen,
            "InvalidInput" => InvalidInput,
            "Fatal" => Fatal,
            other => panic!("no kind {other}"),
        })
    }

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
                    shard: Arc::from(key.to_string()),
                    key: Some(Box::new(key.clone())),
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
            (
                StorageError::Segment {
                    shard: shard(),
                    source: SegmentError::PayloadTooLarge {
                        index_in_batch: 0,
                        len: 10,
                        max: 5,
                    },
                },
                InvalidInput,
            ),
            (
                StorageError::Segment {
                    shard: shard(),
                    source: SegmentError::Poisoned {
                        path: dir.join("00000000000000000000.log"),
                        original: Arc::new(SegmentError::Io(io())),
                    },
                },
                Reopen,
            ),
            (
                StorageError::Segment {
                    shard: shard(),
                    source: SegmentError::OffsetOutOfRange {
                        segment: 0,
                        offset: 9,
                        base_offset: 0,
                        next_offset: 5,
                    },
                },
                Fatal,
            ),
            (
                StorageError::Segment {
                    shard: shard(),
                    source: SegmentError::OffsetSpaceExhausted {
                        segment: 0,
                        next_offset: u64::MAX - 1,
                        records: 2,
                    },
                },
                Fatal,
            ),
            (
                StorageError::Segment {
                    shard: shard(),
                    source: SegmentError::StaleIndex {
                        entry: IndexEntry {
                            offset: 3,
                            position: 96,
                        },
                        site: site.clone(),
                        kind: CorruptionKind::SegmentMagic { found: 0 },
                    },
                },
                Fatal,
            ),
            (StorageError::Recovery(RecoveryError::Io(io())), Reopen),
            (
                StorageError::Recovery(RecoveryError::KeyTooLong {
                    key: key.clone(),
                    source: Box::new(SideFileError::new(
                        SideFileKind::KeyFile,
                        SideFileDefect::KeyPart {
                            part: KeyPart::Stream,
                            problem: KeyPartProblem::TooLong {
                                len: 5000,
                                max: 4096,
                            },
                        },
                    )),
                }),
                InvalidInput,
            ),
            (
                StorageError::Recovery(RecoveryError::NotRegularFile {
                    path: dir.join("00000000000000000000.log"),
                    not_regular: NotRegularFile {
                        file_type: FileType::Directory,
                        via_symlink: false,
                    },
                }),
                Fatal,
            ),
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
        let doc = include_str!("kind.rs");
        let rows = table_rows(doc);
        let mut named = BTreeSet::new();
        let mut used_rows = BTreeSet::new();
        for (err, kind) in examples() {
            assert_eq!(err.kind(), kind, "{} ({err:?})", name(&err));
            named.insert(name(&err));
            // The row that gives its kind says that kind.
            let label = row_label(&err);
            let (_, cell) = rows
                .iter()
                .find(|(first, _)| *first == label)
                .unwrap_or_else(|| panic!("no table row {label}"));
            assert_eq!(kind_in(cell), Some(kind), "the row {label} | {cell}");
            used_rows.insert(label);
        }
        assert_eq!(named.len(), VARIANTS, "a variant has no example: {named:?}");
        // Every row is checked by an example: none says a kind untested.
        for (first, cell) in &rows {
            let routes = cell.starts_with("by the ");
            assert!(
                used_rows.contains(*first) || routes,
                "no example checks the row {first} | {cell}"
            );
        }
        // And the two rows that send to the inner tables are there.
        for variant in ["Segment", "Recovery"] {
            let label = format!("[`{variant}`](StorageError::{variant})");
            assert!(
                rows.iter()
                    .any(|(first, cell)| *first == label && cell.starts_with("by the ")),
                "no table row for {variant}"
            );
        }
    }
}
