//! How a subcommand ends, and the errors that map to exit status 2.
//!
//! Damage is not an error here: a `verify` that finds a refused shard did
//! its job and ends with [`Outcome::Damage`] (exit 1). [`CliError`] is for
//! what stopped a subcommand from doing its job: bad arguments, and I/O
//! failures, each naming the path involved. A command over many shards
//! reports a shard it cannot read and goes on with the rest, ending with
//! [`Outcome::Failed`] (exit 2, like a `CliError`).

use std::fmt;
use std::io;
use std::path::PathBuf;

use felix_io::IoError;
use felix_recovery::RecoveryError;
use felix_segment::SegmentError;
use felix_storage::StorageError;

/// How a subcommand that ran to completion ended, from best to worst (the
/// meanings of the exit statuses are defined in the README's "Exit status").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Outcome {
    /// Success, or every shard opens, cleanly or after the repairs a
    /// default open makes (exit 0).
    Success,
    /// A shard a default open refuses, or an operation refused (exit 1).
    Damage,
    /// Some shard could not be read; its error was reported and the others
    /// were still checked (exit 2).
    Failed,
}

impl Outcome {
    /// The worse of the two.
    pub(crate) fn and(self, other: Self) -> Self {
        self.max(other)
    }
}

/// A failure that stopped a subcommand (exit 2).
#[derive(Debug)]
pub(crate) enum CliError {
    /// The arguments make no sense together, or a path is not what the
    /// subcommand needs.
    Usage(String),
    /// A file-system call failed (what was being done, e.g. `"read
    /// directory"`, the path, and why).
    Io(IoError),
    /// A segment operation failed (its message names the path).
    Segment(SegmentError),
    /// Recovery could not read or write the shard (its message names the
    /// path). Refusals are reported by `recover` itself, not through this.
    Recovery(RecoveryError),
    /// A store or shard operation failed.
    Storage(StorageError),
    /// A tiered shard's object store could not be read (the URL named
    /// with `--remote`, and why).
    Remote {
        /// The store's URL.
        url: String,
        /// What failed (boxed: the error is large, and rare).
        error: Box<felix_tiered::TieredError>,
    },
    /// Writing to stdout failed.
    Output(io::Error),
}

impl CliError {
    /// An [`CliError::Io`] for `op` on `path`.
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io(IoError::new(op, path.into(), source))
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Usage(message) => f.write_str(message),
            Self::Io(err) => write!(f, "{err}"),
            Self::Segment(err) => write!(f, "{err}"),
            Self::Recovery(err) => write!(f, "{err}"),
            Self::Storage(err) => write!(f, "{err}"),
            Self::Remote { url, error } => {
                write!(f, "remote {url}: {}", crate::cmd::remote::chain(error))
            }
            Self::Output(err) => write!(f, "write to stdout: {err}"),
        }
    }
}

impl From<IoError> for CliError {
    fn from(err: IoError) -> Self {
        Self::Io(err)
    }
}

impl From<SegmentError> for CliError {
    fn from(err: SegmentError) -> Self {
        Self::Segment(err)
    }
}

impl From<RecoveryError> for CliError {
    fn from(err: RecoveryError) -> Self {
        Self::Recovery(err)
    }
}

impl From<felix_recovery::LockError> for CliError {
    fn from(err: felix_recovery::LockError) -> Self {
        Self::Storage(err.into())
    }
}

impl From<StorageError> for CliError {
    fn from(err: StorageError) -> Self {
        Self::Storage(err)
    }
}
