//! Why a shard could not be inspected, repaired or opened.

use std::path::PathBuf;

use felix_io::{IoError, NotRegularFile};
use felix_segment::SegmentError;

use crate::classify::{RepairClass, RepairPolicy};
use crate::report::Finding;

/// A failure of recovery.
///
/// `Clone`, so that one failure can be handed to every caller it covers.
#[non_exhaustive]
#[derive(Debug, Clone, thiserror::Error)]
pub enum RecoveryError {
    /// Reading or writing the directory failed.
    #[error(transparent)]
    Io(#[from] IoError),
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
        /// Which part, and how long it is (boxed: the error names the
        /// file's kind and the values seen, and every `Result` of this
        /// crate stays small).
        #[source]
        source: Box<felix_format::side_file::SideFileError>,
    },
    /// Damage was found that the chosen policy may not repair. Nothing was
    /// modified.
    #[error("{}", unrepairable_text(dir, blocking, *policy))]
    Unrepairable {
        /// The shard directory.
        dir: PathBuf,
        /// Every finding the policy does not allow repairing.
        blocking: Vec<Finding>,
        /// The policy that was in force.
        policy: RepairPolicy,
    },
}

fn unrepairable_text(dir: &std::path::Path, blocking: &[Finding], policy: RepairPolicy) -> String {
    // "By default" only when a wider policy would change the answer.
    let wider_policy_would_help =
        policy == RepairPolicy::Default && blocking.iter().any(|f| f.repair == RepairClass::OptIn);
    let mut text = format!(
        "shard {} cannot be opened: {} finding(s) not repairable{}; nothing was modified",
        dir.display(),
        blocking.len(),
        if wider_policy_would_help {
            " by default"
        } else {
            ""
        },
    );
    for finding in blocking {
        text.push_str("\n  - ");
        text.push_str(&finding.to_string());
    }
    text
}

/// A segment error of a kind recovery's call could not return (opening a
/// segment fails only to read it or on its header, which the callers
/// handle): reported as the failure to open `path` that it is, never
/// dropped.
pub(crate) fn unexpected_segment_error(
    err: &SegmentError,
    path: &std::path::Path,
) -> RecoveryError {
    RecoveryError::Io(IoError::new(
        "open",
        path,
        std::io::Error::other(err.to_string()),
    ))
}
