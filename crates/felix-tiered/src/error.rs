//! Errors of the tiered layer.

use object_store::path::Path;

use felix_format::side_file::SideFileError;
use felix_format::tier_manifest::ManifestEncodeError;
use felix_format::{CorruptionKind, ShardKey};
use felix_storage::StorageError;

/// Why an object store could not be set up.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum StoreSetupError {
    /// The local directory a [`LocalFileSystem`](object_store::local::LocalFileSystem)
    /// store is rooted at could not be created.
    #[error("cannot create the object store directory {dir}")]
    CreateDir {
        /// The directory.
        dir: std::path::PathBuf,
        /// What the file system said.
        #[source]
        source: std::io::Error,
    },
    /// The S3 retry policy is out of range.
    #[error("S3 retry policy")]
    Retry(#[source] RetryPolicyError),
    /// `object_store` refused the configuration.
    #[error("cannot build the {backend} object store")]
    Build {
        /// Which backend: `local` or `s3`.
        backend: &'static str,
        /// What `object_store` said.
        #[source]
        source: object_store::Error,
    },
}

/// A [`RetryPolicy`](crate::RetryPolicy) value out of its range.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RetryPolicyError {
    /// The request timeout is zero.
    #[error("the request timeout is zero")]
    RequestTimeout,
    /// More retries than [`RetryPolicy::MAX_RETRIES`](crate::RetryPolicy::MAX_RETRIES).
    #[error("retry policy max_retries is {value}, above {max}")]
    MaxRetries {
        /// The value given.
        value: usize,
        /// Largest allowed.
        max: usize,
    },
    /// A longest wait above [`RetryPolicy::MAX_BACKOFF`](crate::RetryPolicy::MAX_BACKOFF).
    #[error("retry policy max_backoff is {value:?}, above {max:?}")]
    MaxBackoff {
        /// The value given.
        value: std::time::Duration,
        /// Largest allowed.
        max: std::time::Duration,
    },
    /// The first wait is zero or longer than the longest.
    #[error(
        "retry policy init_backoff is {init_backoff:?}, outside (0, max_backoff = {max_backoff:?}]"
    )]
    InitBackoff {
        /// The first wait given.
        init_backoff: std::time::Duration,
        /// The longest wait given.
        max_backoff: std::time::Duration,
    },
    /// The growth of the wait is not above 1 and at most 16.
    #[error("retry policy backoff_base is {value}, outside (1, 16]")]
    BackoffBase {
        /// The value given.
        value: f64,
    },
    /// The retry window is shorter than twice the request timeout: an
    /// attempt that timed out could never be retried.
    #[error(
        "retry policy retry_window is {window:?}, shorter than twice the request timeout {request_timeout:?}: a timed-out attempt could never be retried"
    )]
    Window {
        /// The window given.
        window: std::time::Duration,
        /// The request timeout.
        request_timeout: std::time::Duration,
    },
}

/// An operation of the tiered layer failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum TieredError {
    /// An object-store request failed.
    #[error("object store {operation} of {object} failed")]
    Store {
        /// The request: `put`, `get`, `list`, `delete`, `head`.
        operation: &'static str,
        /// The object (or prefix, for a list).
        object: Path,
        /// What the store said.
        #[source]
        source: object_store::Error,
    },
    /// The local shard refused an operation.
    #[error("local shard")]
    Local(#[from] StorageError),
    /// A sealed segment's file could not be read for upload.
    #[error("cannot read {path} for upload")]
    LocalFile {
        /// The file.
        path: std::path::PathBuf,
        /// What the file system said.
        #[source]
        source: std::io::Error,
    },
    /// A local segment failed its checks while being uploaded: it is not
    /// offloaded (nor deleted).
    #[error("local segment {path} is damaged at byte {position}; not offloaded")]
    LocalCorrupt {
        /// The segment file.
        path: std::path::PathBuf,
        /// Byte of the damage.
        position: u64,
        /// What is wrong.
        #[source]
        kind: CorruptionKind,
    },
    /// A local segment's records end at another offset than the shard
    /// lists for it.
    #[error("local segment {path} ends at offset {found_next}, the shard lists {expected_next}")]
    LocalExtent {
        /// The segment file.
        path: std::path::PathBuf,
        /// One past the last offset the shard lists.
        expected_next: u64,
        /// One past the last offset its records hold.
        found_next: u64,
    },
    /// The oldest local segment to offload does not start where the remote
    /// segments end (the local log was reset past them): offloading it
    /// would leave a gap in the manifest.
    #[error(
        "remote segments end at offset {remote_end}, but the oldest local one to offload starts at {local_start}"
    )]
    Gap {
        /// One past the last remote offset.
        remote_end: u64,
        /// The local segment's base offset.
        local_start: u64,
    },
    /// A remote object's bytes failed a check: never returned as data.
    #[error("remote object {object} is damaged at byte {position}")]
    RemoteCorrupt {
        /// The object.
        object: Path,
        /// Byte of the object where the check failed.
        position: u64,
        /// What is wrong.
        #[source]
        kind: CorruptionKind,
    },
    /// A remote object is shorter (or longer) than its manifest says.
    #[error("remote object {object} is {found} bytes, the manifest says {expected}")]
    RemoteLength {
        /// The object.
        object: Path,
        /// Bytes the manifest lists.
        expected: u64,
        /// Bytes the store holds.
        found: u64,
    },
    /// A remote object's CRC-32 is not the manifest's.
    #[error("remote object {object} has CRC-32 {found:#010x}, the manifest says {expected:#010x}")]
    RemoteChecksum {
        /// The object.
        object: Path,
        /// The manifest's CRC.
        expected: u32,
        /// The CRC of the bytes fetched.
        found: u32,
    },
    /// A remote segment's records end at another offset than its manifest
    /// entry says.
    #[error(
        "remote object {object} ends at offset {found_next}, the manifest says {expected_next}"
    )]
    RemoteExtent {
        /// The `.log` object.
        object: Path,
        /// One past the last offset the manifest lists.
        expected_next: u64,
        /// One past the last offset its records hold.
        found_next: u64,
    },
    /// A manifest object decodes, but the number inside it is not the one
    /// in its name (a copy put under another name).
    #[error("remote manifest {object} holds version {found}, its name says {named}")]
    ManifestSeq {
        /// The object.
        object: Path,
        /// The number in its name.
        named: u64,
        /// The number inside it.
        found: u64,
    },
    /// A manifest object does not decode.
    #[error("remote manifest {object} is damaged")]
    Manifest {
        /// The object.
        object: Path,
        /// What is wrong.
        #[source]
        source: SideFileError,
    },
    /// The newest manifest belongs to another shard key (a hash collision
    /// of directory names, or a misconfigured prefix).
    #[error("remote manifest {object} belongs to another shard key")]
    KeyMismatch {
        /// The object.
        object: Path,
    },
    /// A manifest could not be encoded.
    #[error("cannot encode the remote manifest")]
    Encode(#[source] ManifestEncodeError),
    /// Another writer wrote this manifest version first: the store holds a
    /// different, decodable manifest under the number this writer took.
    /// This shard has two tiered writers, and this one stops.
    ///
    /// A put of this writer's own that the store applied but reported
    /// failed (a 503 after storing it, then `object_store`'s retry of the
    /// put-if-absent finding the object there) is not this: the tier reads
    /// the object back, and its own bytes are success.
    #[error("remote manifest {object} was written by another writer")]
    Fenced {
        /// The object that already existed.
        object: Path,
    },
    /// A segment object the manifest lists is not in the store: its
    /// records are lost unless the local shard still holds them.
    #[error("remote object {object} is missing; the manifest lists it")]
    RemoteMissing {
        /// The object.
        object: Path,
        /// What the store said (`object_store::Error::NotFound`).
        #[source]
        source: object_store::Error,
    },
    /// Offsets of the shard are in neither copy: an offload moved the
    /// local log start (the shard's log-start file says so) past where the
    /// newest manifest ends, or there is no manifest at all. An offload
    /// moves it only once a manifest listing those records is durable, so
    /// the remote copy was lost, or the store or prefix is not the one the
    /// tier offloaded to. Reads of those offsets would otherwise be
    /// [`TieredError::Trimmed`], as if deleted on purpose.
    #[error(
        "offsets {}..{} of shard {shard} are in neither the local log nor the remote copy ({}): the remote copy was lost, or this is not the store or prefix they were offloaded to",
        missing.start,
        missing.end,
        match manifest {
            Some(seq) => format!("remote manifest {seq} ends at offset {}", missing.start),
            None => format!("no remote manifest, and an offload moved the local log start to {}", missing.end),
        }
    )]
    HeldNowhere {
        /// The shard.
        shard: ShardKey,
        /// The offsets held nowhere: from where the newest manifest ends
        /// (0 when there is none: how far back the log went is unknown)
        /// to the start an offload moved the local log to.
        missing: std::ops::Range<u64>,
        /// The newest manifest's number, `None` when the store has none.
        manifest: Option<u64>,
    },
    /// The offset is below both the local and the remote log start.
    #[error("offset {requested} is trimmed; the oldest offset is {oldest}")]
    Trimmed {
        /// The offset asked for.
        requested: u64,
        /// The oldest offset held locally or remotely.
        oldest: u64,
    },
    /// The tiered configuration is out of range.
    #[error("tiered configuration")]
    Config(#[from] crate::config::TierConfigError),
    /// The shard's own retention is on: the tiered layer must make that
    /// decision, or segments would be deleted without being offloaded.
    #[error("the shard's own retention is on; tiered shards need StoreConfig::retention off")]
    ShardRetentionOn,
}

impl TieredError {
    pub(crate) fn store(
        operation: &'static str,
        object: &Path,
        source: object_store::Error,
    ) -> Self {
        TieredError::Store {
            operation,
            object: object.clone(),
            source,
        }
    }
}
