//! Why a shard could not be inspected, repaired or opened.

use std::path::PathBuf;

use felix_io::NotRegularFile;
use felix_segment::SegmentError;

use crate::classify::RepairClass;
use crate::report::Finding;

/// A failure of recovery.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    /// Reading or writing the directory failed.
    #[error(transparent)]
    Io(#[from] SegmentError),
    /// An entry named like a segment is not a regular file (a directory,
    /// FIFO, socket or device, or a symbolic link to one). It was not
    /// opened: the records its name claims cannot be read, so the shard can
    /// be neither judged nor opened until it is moved away or the segment
    /// restored. Nothing was modified.
    #[error("{} is named like a segment but is {not_regular}; it was not opened, and the shard cannot be opened until it is moved away or the segment restored", path.display())]
    NotRegularFile {
        /// The entry.
        path: PathBuf,
        /// What it is.
        #[source]
        not_regular: NotRegularFile,
    },
    /// A key has a text part longer than a key file holds
    /// ([`MAX_KEY_PART_BYTES`](felix_format::key_file::MAX_KEY_PART_BYTES)).
    /// Nothing was written.
    #[error("key {key} cannot be written to a key file: {source}")]
    KeyTooLong {
        /// The key.
        key: felix_format::ShardKey,
        /// Which part, and how long it is.
        #[source]
        source: felix_format::key_file::KeyFileDecodeError,
    },
    /// Damage was found that the chosen policy may not repair. Nothing was
    /// modified.
    #[error("{}", unrepairable_text(dir, blocking, *repair_checksum_tail))]
    Unrepairable {
        /// The shard directory.
        dir: PathBuf,
        /// Every finding the policy does not allow repairing.
        blocking: Vec<Finding>,
        /// The policy that was in force.
        repair_checksum_tail: bool,
    },
}

impl RecoveryError {
    /// A copy of this error, for what must keep it while the error itself
    /// goes to the call that failed (see [`SegmentError::duplicate`]).
    pub fn duplicate(&self) -> Self {
        match self {
            Self::Io(err) => Self::Io(err.duplicate()),
            Self::NotRegularFile { path, not_regular } => Self::NotRegularFile {
                path: path.clone(),
                not_regular: *not_regular,
            },
            Self::KeyTooLong { key, source } => Self::KeyTooLong {
                key: key.clone(),
                source: *source,
            },
            Self::Unrepairable {
                dir,
                blocking,
                repair_checksum_tail,
            } => Self::Unrepairable {
                dir: dir.clone(),
                blocking: blocking.clone(),
                repair_checksum_tail: *repair_checksum_tail,
            },
        }
    }
}

fn unrepairable_text(
    dir: &std::path::Path,
    blocking: &[Finding],
    repair_checksum_tail: bool,
) -> String {
    // "By default" only when opting in would change the answer.
    let opt_in_would_help =
        !repair_checksum_tail && blocking.iter().any(|f| f.repair == RepairClass::OptIn);
    let mut text = format!(
        "shard {} cannot be opened: {} finding(s) not repairable{}; nothing was modified",
        dir.display(),
        blocking.len(),
        if opt_in_would_help { " by default" } else { "" },
    );
    for finding in blocking {
        text.push_str("\n  - ");
        text.push_str(&finding.to_string());
    }
    text
}
