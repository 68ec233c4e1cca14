//! One Raft entry, one felix record: the entry (its log id and payload) in
//! postcard, the record's offset its index, the record's generation its
//! term.

use openraft::{Entry, RaftTypeConfig};

use crate::error::RaftLogError;

/// The record payload of `entry`.
pub(crate) fn encode_entry<C>(entry: &Entry<C>) -> Result<Vec<u8>, RaftLogError>
where
    C: RaftTypeConfig<NodeId = u64>,
{
    postcard::to_allocvec(entry).map_err(|source| RaftLogError::Encode {
        index: entry.log_id.index,
        source,
    })
}

/// The entry a record at `offset` holds; its index must be `offset`.
pub(crate) fn decode_entry<C>(
    shard: &str,
    offset: u64,
    payload: &[u8],
) -> Result<Entry<C>, RaftLogError>
where
    C: RaftTypeConfig<NodeId = u64>,
{
    let entry: Entry<C> = postcard::from_bytes(payload).map_err(|source| RaftLogError::Entry {
        shard: shard.to_owned(),
        offset,
        source,
    })?;
    if entry.log_id.index != offset {
        return Err(RaftLogError::IndexMismatch {
            shard: shard.to_owned(),
            offset,
            index: entry.log_id.index,
        });
    }
    Ok(entry)
}
