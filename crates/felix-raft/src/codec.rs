//! One Raft entry, one felix record: the entry (its log id and payload) in
//! postcard, the record's offset its index, the record's generation its
//! term.

use openraft::entry::RaftEntry;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::RaftLogError;

/// The record payload of `entry`, whose index is `index`.
pub(crate) fn encode_entry<E>(entry: &E, index: u64) -> Result<Vec<u8>, RaftLogError>
where
    E: Serialize,
{
    postcard::to_allocvec(entry).map_err(|source| RaftLogError::Encode { index, source })
}

/// The entry a record at `offset` holds; its index must be `offset`.
pub(crate) fn decode_entry<E>(shard: &str, offset: u64, payload: &[u8]) -> Result<E, RaftLogError>
where
    E: RaftEntry + DeserializeOwned,
{
    let entry: E = postcard::from_bytes(payload).map_err(|source| RaftLogError::Entry {
        shard: shard.to_owned(),
        offset,
        source,
    })?;
    if entry.index() != offset {
        return Err(RaftLogError::IndexMismatch {
            shard: shard.to_owned(),
            offset,
            index: entry.index(),
        });
    }
    Ok(entry)
}
