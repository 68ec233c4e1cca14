//! What can go wrong opening or using a felix Raft log, with the facts.

use std::path::PathBuf;

use felix_format::side_file::SideFileError;
use felix_io::IoError;
use felix_storage::StorageError;

/// Why a felix Raft log could not open, or an operation on it failed.
///
/// openraft sees these inside its `StorageError` (as the source of a
/// `StorageIOError`), so the chain still reaches the felix error and its
/// `io::Error`.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum RaftLogError {
    /// The shard failed (open, append, read, truncate, purge).
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Reading or replacing the raft-state file failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The raft-state file is damaged: the vote and the last purged id are
    /// unknown, so the log does not open (a vote forgotten could let this
    /// node vote twice in a term).
    #[error("raft-state file {path} is unusable: {source}")]
    RaftState {
        /// The file.
        path: PathBuf,
        /// What is wrong with its bytes.
        #[source]
        source: SideFileError,
    },
    /// The raft-state file says the shard's records hold entries in
    /// another log encoding than this release reads (2: one kind byte
    /// then the body). Version 1 files, with log encoding 1, were written
    /// by felix-raft on openraft 0.9, whose records were postcard-encoded
    /// openraft entries. Nothing was changed; the log does not open.
    #[error("{}", log_encoding_message(path, *found))]
    LogEncoding {
        /// The raft-state file.
        path: PathBuf,
        /// The log encoding it records.
        found: u16,
    },
    /// The raft-state file's name (or its temporary's) is taken by
    /// something that is not a regular file: not ours, so the vote or purge
    /// was not recorded (nor the call done).
    #[error("{} is {not_regular}; the raft-state file was not replaced", path.display())]
    RaftStateNotAFile {
        /// The name taken.
        path: PathBuf,
        /// What it is.
        not_regular: felix_io::NotRegularFile,
    },
    /// The raft-snapshot file is damaged: the membership of the entries
    /// purged is unknown, so the log does not open.
    #[error("raft-snapshot file {path} is unusable: {source}")]
    RaftSnapshot {
        /// The file.
        path: PathBuf,
        /// What is wrong with its bytes.
        #[source]
        source: SideFileError,
    },
    /// The membership the raft-snapshot file holds does not decode.
    #[error("the membership in raft-snapshot file {path} does not decode: {source}")]
    SnapshotMembership {
        /// The file.
        path: PathBuf,
        /// Why it did not decode.
        #[source]
        source: postcard::Error,
    },
    /// The raft-snapshot file's name (or its temporary's) is taken by
    /// something that is not a regular file: the snapshot was not recorded.
    #[error("{} is {not_regular}; the raft-snapshot file was not replaced", path.display())]
    RaftSnapshotNotAFile {
        /// The name taken.
        path: PathBuf,
        /// What it is.
        not_regular: felix_io::NotRegularFile,
    },
    /// The shard a log was asked to live in (a store's, or one configured
    /// through [`LogOptions::config`](crate::LogOptions::config)) would sync
    /// on a schedule of its own: its durability is not
    /// [`Durability::None`](felix_storage::Durability::None), and the log
    /// asks for the sync covering each append itself. Nothing was opened or
    /// created.
    #[error(
        "shard {shard} cannot keep a Raft log: its durability is {found:?}, and a Raft log needs Durability::None (it requests the sync covering each append itself)"
    )]
    Durability {
        /// The shard asked for: its key in a store, its directory alone.
        shard: String,
        /// The durability found (the store's, or the one configured).
        found: felix_storage::Durability,
    },
    /// A record of the shard is empty: no entry has no kind byte.
    #[error("the record at offset {offset} of shard {shard} is empty, not a Raft entry")]
    EmptyRecord {
        /// The shard's label.
        shard: String,
        /// The record's offset (the entry's index).
        offset: u64,
    },
    /// A record's first byte names no entry kind of log encoding 2.
    #[error(
        "the record at offset {offset} of shard {shard} begins with {kind:#04x}, no Raft entry kind (1 normal, 2 blank, 3 membership, 4 log start)"
    )]
    EntryKind {
        /// The shard's label.
        shard: String,
        /// The record's offset (the entry's index).
        offset: u64,
        /// The byte found.
        kind: u8,
    },
    /// A blank entry's record has bytes after its kind byte.
    #[error("the blank entry at offset {offset} of shard {shard} has {len} bytes of body")]
    BlankWithBody {
        /// The shard's label.
        shard: String,
        /// The record's offset (the entry's index).
        offset: u64,
        /// The bytes after the kind byte.
        len: usize,
    },
    /// A log-start entry's body is not the 8 bytes of a start.
    #[error(
        "the log-start entry at offset {offset} of shard {shard} has {len} bytes of body, not 8"
    )]
    LogStartBody {
        /// The shard's label.
        shard: String,
        /// The record's offset (the entry's index).
        offset: u64,
        /// The bytes after the kind byte.
        len: usize,
    },
    /// A membership entry's body does not decode.
    #[error("the membership entry at offset {offset} of shard {shard} does not decode: {source}")]
    Membership {
        /// The shard's label.
        shard: String,
        /// The record's offset (the entry's index).
        offset: u64,
        /// Why it did not decode.
        #[source]
        source: postcard::Error,
    },
    /// The shard's generation history does not say which generation wrote
    /// a record: the entry's term is unknown.
    #[error("shard {shard} does not know the generation of the record at offset {offset}")]
    NoTerm {
        /// The shard's label.
        shard: String,
        /// The record's offset (the entry's index).
        offset: u64,
    },
    /// Log ids read from the shard do not ascend as a Raft log's do (each
    /// index above the one before, each term at or above the one before):
    /// its records are not a log this crate wrote, so nothing read is
    /// returned.
    #[error(
        "log ids read from shard {shard} do not ascend: (term {term}, index {offset}) follows (term {previous_term}, index {previous_offset})"
    )]
    LogIdOrder {
        /// The shard's label.
        shard: String,
        /// The offset of the record whose id does not follow (its index).
        offset: u64,
        /// Its term.
        term: u64,
        /// The offset of the record read before it.
        previous_offset: u64,
        /// That record's term.
        previous_term: u64,
    },
    /// The raft-state file records a vote that names no candidate, which
    /// openraft's vote cannot hold (this crate never writes one): the vote
    /// is unknown, and a vote forgotten could let this node vote twice.
    #[error("shard {shard}'s raft-state file records a vote in term {term} for no candidate")]
    VoteWithoutCandidate {
        /// The shard's label.
        shard: String,
        /// The vote's term.
        term: u64,
    },
    /// An append into a non-empty log does not begin at its end (openraft
    /// truncates before it overwrites, so this is a caller's bug).
    #[error("append of index {first} into shard {shard}, whose next index is {next}")]
    AppendGap {
        /// The shard's label.
        shard: String,
        /// The first index appended.
        first: u64,
        /// The log's next index.
        next: u64,
    },
    /// Encoding a membership entry failed (postcard reports only what
    /// serde reports).
    #[error("encoding the membership entry of index {index} failed: {source}")]
    Encode {
        /// The entry's index.
        index: u64,
        /// The serializer's error.
        #[source]
        source: postcard::Error,
    },
}

/// The text of [`RaftLogError::LogEncoding`].
fn log_encoding_message(path: &std::path::Path, found: u16) -> String {
    let written = match found {
        felix_format::raft_state::RAFT_LOG_ENCODING_POSTCARD => {
            " (written by felix-raft on openraft 0.9: postcard entries)".to_owned()
        }
        _ => String::new(),
    };
    format!(
        "the Raft log in {} is in log encoding {found}{written}; this release reads log encoding {}",
        path.parent().unwrap_or(path).display(),
        felix_format::raft_state::RAFT_LOG_ENCODING
    )
}

impl RaftLogError {
    /// The error as an `io::Error` of the same kind where there is one,
    /// for openraft's flush callback, which takes an `io::Error`.
    pub fn into_io_error(self) -> std::io::Error {
        let kind = match &self {
            Self::Storage(e) => e.io_kind().unwrap_or(std::io::ErrorKind::Other),
            _ => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, self)
    }
}
