//! How a subcommand ends, and the errors that map to exit status 2.
//!
//! The exit statuses are defined once, in [`EXIT_STATUS`], which
//! `felix-store --help` prints and the README quotes. Damage is not an
//! error here: a `verify` that finds a damaged shard did its job and ends
//! with [`Outcome::Damage`] (exit 1). [`CliError`] is for what stopped a
//! subcommand from doing its job: bad arguments, I/O failures, each naming
//! the path involved, and a shard that `recover` finds held by a running
//! store or writer. A command over many shards reports a shard it cannot
//! read and goes on with the rest, ending with [`Outcome::Failed`] (exit 2,
//! like a `CliError`).

use std::fmt;
use std::io;
use std::path::PathBuf;

use felix_io::IoError;
use felix_recovery::RecoveryError;
use felix_segment::SegmentError;
use felix_storage::StorageError;

/// The meaning of each exit status: the one definition, printed by
/// `felix-store --help` and quoted verbatim in the README's "Exit status"
/// section (a test compares them). [`Outcome`] and [`CliError`] map onto it.
pub(crate) const EXIT_STATUS: &str = "\
Exit status (the worst over all shards looked at: 2 over 1 over 0):
  0  Success. For verify, stat and dump: every shard looked at opens,
     cleanly or after the repairs a default open makes (a torn tail
     truncated, an abandoned segment removed, indexes rebuilt), and no
     check found rot. A missing or wrong index is never damage.
  1  Damage: a shard a default open refuses (verify, stat, dump), or rot
     the checks found even where a default open still succeeds (verify
     checksums every record unless --quick; dump stops at the first
     damage), the report then saying what an open would do (\"an open
     would: ...\", JSON \"open_would\"); or a recover refused because the
     damage is outside its repair policy.
  2  Bad usage, an I/O error, or (recover) a shard that a running store
     or writer holds, with a message on stderr naming the path. On a
     root, a shard that could not be read makes the status 2 after the
     other shards are reported.";

/// How a subcommand that ran to completion ended, from best to worst (the
/// meanings of the exit statuses are [`EXIT_STATUS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Outcome {
    /// Success, or every shard opens, cleanly or after the repairs a
    /// default open makes (exit 0).
    Success,
    /// Damage: a shard a default open refuses, rot the checks found, or a
    /// `recover` refused by its repair policy (exit 1).
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
    /// `recover` found the shard, or the store root above it, locked by a
    /// running store or writer, and looked no further.
    Held(felix_recovery::LockError),
    /// A tiered shard's object store could not be read (the URL named
    /// with `--remote`, and why).
    Remote {
        /// The store's URL.
        url: String,
        /// What failed (boxed: the error is large, and rare).
        error: Box<felix_tiered::TieredError>,
    },
    /// A cluster's nodes refused or did not answer a request.
    Cluster(felix_cluster::ClientError),
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
            Self::Held(err) => write!(
                f,
                "{err}; recover works only on a shard nothing else holds (`felix-store verify` reads a held shard, taking no lock)"
            ),
            Self::Remote { url, error } => {
                write!(f, "remote {url}: {}", crate::cmd::remote::chain(error))
            }
            Self::Cluster(err) => write!(f, "cluster: {err}"),
            Self::Output(err) => write!(f, "write to stdout: {err}"),
        }
    }
}

impl From<felix_cluster::ClientError> for CliError {
    fn from(err: felix_cluster::ClientError) -> Self {
        Self::Cluster(err)
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
