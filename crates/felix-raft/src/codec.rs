//! One Raft entry, one felix record (log encoding 2): the record's offset
//! is the entry's index, its generation the entry's term, and its payload
//! one kind byte then the body:
//!
//! * [`ENTRY_NORMAL`]: the producer's bytes ([`EntryData::payload`]); the
//!   record's timestamp is the entry's ([`EntryData::timestamp_micros`],
//!   set by the leader and replicated);
//! * [`ENTRY_LOG_START`]: the new log start, 8 bytes big-endian
//!   ([`EntryData::log_start`]); timestamp 0;
//! * [`ENTRY_BLANK`]: nothing; [`ENTRY_MEMBERSHIP`]: the membership in
//!   postcard. openraft makes these entries itself and they carry no time,
//!   so their record's timestamp is 0 on every replica. (The timestamp of
//!   the entry before would not do: replicas purge their logs at their own
//!   snapshots, so one may hold that entry and another not.) A time lookup
//!   never lands on them but on the next normal entry that reaches the
//!   time.
//!
//! A read slices the body out of the read's buffer: no copy.

use bytes::{BufMut, Bytes, BytesMut};
use felix_format::raft_state::{
    RAFT_ENTRY_BLANK, RAFT_ENTRY_LOG_START, RAFT_ENTRY_MEMBERSHIP, RAFT_ENTRY_NORMAL,
};
use openraft::vote::leader_id_std::CommittedLeaderId;
use openraft::{EntryPayload, LogId};

use crate::EntryData;
use crate::error::RaftLogError;
use crate::log_store::LogConfig;

/// The kind byte of a normal entry's record.
pub const ENTRY_NORMAL: u8 = RAFT_ENTRY_NORMAL;
/// The kind byte of a blank entry's record.
pub const ENTRY_BLANK: u8 = RAFT_ENTRY_BLANK;
/// The kind byte of a membership entry's record.
pub const ENTRY_MEMBERSHIP: u8 = RAFT_ENTRY_MEMBERSHIP;
/// The kind byte of a log-start entry's record.
pub const ENTRY_LOG_START: u8 = RAFT_ENTRY_LOG_START;

/// The record of `entry`: its timestamp and payload.
pub(crate) fn encode_entry<C>(entry: &C::Entry) -> Result<(u64, Bytes), RaftLogError>
where
    C: LogConfig,
{
    let index = entry.log_id.index;
    Ok(match &entry.payload {
        EntryPayload::Normal(data) => match data.log_start() {
            Some(start) => {
                let mut out = BytesMut::with_capacity(9);
                out.put_u8(ENTRY_LOG_START);
                out.put_u64(start);
                (0, out.freeze())
            }
            None => {
                let body = data.payload();
                let mut out = BytesMut::with_capacity(1 + body.len());
                out.put_u8(ENTRY_NORMAL);
                out.extend_from_slice(body);
                (data.timestamp_micros(), out.freeze())
            }
        },
        EntryPayload::Blank => (0, Bytes::from_static(&[ENTRY_BLANK])),
        EntryPayload::Membership(m) => {
            let out = postcard::to_extend(m, vec![ENTRY_MEMBERSHIP])
                .map_err(|source| RaftLogError::Encode { index, source })?;
            (0, Bytes::from(out))
        }
    })
}

/// The entry a record holds: at `offset`, written in `term`, with
/// `timestamp_micros` and `payload`.
pub(crate) fn decode_entry<C>(
    shard: &str,
    offset: u64,
    term: u64,
    timestamp_micros: u64,
    payload: &Bytes,
) -> Result<C::Entry, RaftLogError>
where
    C: LogConfig,
{
    let log_id = LogId::new(CommittedLeaderId::new(term), offset);
    let Some(&kind) = payload.first() else {
        return Err(RaftLogError::EmptyRecord {
            shard: shard.to_owned(),
            offset,
        });
    };
    let payload = match kind {
        ENTRY_NORMAL => {
            EntryPayload::Normal(C::D::from_record(timestamp_micros, payload.slice(1..)))
        }
        ENTRY_BLANK if payload.len() == 1 => EntryPayload::Blank,
        ENTRY_BLANK => {
            return Err(RaftLogError::BlankWithBody {
                shard: shard.to_owned(),
                offset,
                len: payload.len() - 1,
            });
        }
        ENTRY_LOG_START => {
            let start = payload
                .get(1..)
                .and_then(|body| <[u8; 8]>::try_from(body).ok())
                .map(u64::from_be_bytes)
                .ok_or_else(|| RaftLogError::LogStartBody {
                    shard: shard.to_owned(),
                    offset,
                    len: payload.len() - 1,
                })?;
            let data = C::D::from_log_start(start).ok_or_else(|| RaftLogError::EntryKind {
                shard: shard.to_owned(),
                offset,
                kind,
            })?;
            EntryPayload::Normal(data)
        }
        ENTRY_MEMBERSHIP => {
            let body = payload.get(1..).unwrap_or_default();
            EntryPayload::Membership(postcard::from_bytes(body).map_err(|source| {
                RaftLogError::Membership {
                    shard: shard.to_owned(),
                    offset,
                    source,
                }
            })?)
        }
        kind => {
            return Err(RaftLogError::EntryKind {
                shard: shard.to_owned(),
                offset,
                kind,
            });
        }
    };
    Ok(openraft::Entry { log_id, payload })
}

/// serde for [`Bytes`] as a byte string (the bytes crate's own serde is a
/// feature this workspace does not enable).
pub(crate) mod serde_bytes {
    use bytes::Bytes;
    use serde::de::{Error, SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(bytes: &Bytes, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytes)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        struct BytesVisitor;
        impl<'de> Visitor<'de> for BytesVisitor {
            type Value = Bytes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes::copy_from_slice(v))
            }
            fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
                Ok(Bytes::from(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(Bytes::from(out))
            }
        }
        d.deserialize_byte_buf(BytesVisitor)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
mod tests {
    use super::*;
    use crate::{EntryData, Request, TypeConfig};

    #[test]
    fn a_normal_entry_read_is_a_slice_of_the_record() {
        let record = Bytes::from(vec![ENTRY_NORMAL, b'x', b'y']);
        let entry = decode_entry::<TypeConfig>("s", 7, 2, 99, &record).unwrap();
        assert_eq!(entry.log_id, LogId::new(CommittedLeaderId::new(2), 7));
        let EntryPayload::Normal(request) = entry.payload else {
            panic!("not normal: {:?}", entry.payload);
        };
        assert_eq!(request, Request::at(99, &b"xy"[..]));
        assert_eq!(request.payload().as_ptr(), record[1..].as_ptr());
    }

    #[test]
    fn a_log_start_entry_is_its_kind_byte_and_the_start_big_endian() {
        let entry = openraft::Entry::<CommittedLeaderId<u64>, _> {
            log_id: LogId::new(CommittedLeaderId::new(3), 40),
            payload: EntryPayload::Normal(Request::LogStart { start: 0x0102 }),
        };
        let (timestamp, record) = encode_entry::<TypeConfig>(&entry).unwrap();
        assert_eq!(timestamp, 0);
        assert_eq!(&record[..], &[ENTRY_LOG_START, 0, 0, 0, 0, 0, 0, 1, 2]);
        let back = decode_entry::<TypeConfig>("s", 40, 3, 0, &record).unwrap();
        assert_eq!(back, entry);
        assert!(matches!(
            decode_entry::<TypeConfig>("s", 40, 3, 0, &record.slice(..5)),
            Err(RaftLogError::LogStartBody {
                offset: 40,
                len: 4,
                ..
            })
        ));
    }

    #[test]
    fn records_no_entry_wrote_are_refused_naming_what_is_wrong() {
        let decode =
            |bytes: &[u8]| decode_entry::<TypeConfig>("s", 4, 1, 0, &Bytes::copy_from_slice(bytes));
        assert!(matches!(
            decode(&[]),
            Err(RaftLogError::EmptyRecord { offset: 4, .. })
        ));
        assert!(matches!(
            decode(&[0, 1]),
            Err(RaftLogError::EntryKind {
                offset: 4,
                kind: 0,
                ..
            })
        ));
        assert!(matches!(
            decode(&[ENTRY_BLANK, 0]),
            Err(RaftLogError::BlankWithBody {
                offset: 4,
                len: 1,
                ..
            })
        ));
        assert!(matches!(
            decode(&[ENTRY_MEMBERSHIP, 0xff]),
            Err(RaftLogError::Membership { offset: 4, .. })
        ));
    }
}
