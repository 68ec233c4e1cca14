//! The bytes of a record (log encoding 2): one kind byte, then a normal
//! entry's producer bytes as they were given, a membership entry's
//! membership in postcard, nothing for a blank entry; the record's
//! timestamp is a normal entry's own and 0 for the others, its generation
//! the entry's term, its offset the index. Entries read back are rebuilt
//! from these.

use std::collections::{BTreeMap, BTreeSet};

use felix_raft::{Entry, FelixLogStore, LogId, Request, TypeConfig};
use felix_storage::{ReadBound, ReadRecord};
use openraft::storage::RaftLogStorageExt;
use openraft::{BasicNode, EntryPayload, Membership, RaftLogReader};

#[test]
fn entries_are_stored_as_kind_byte_then_body() {
    let dir = tempfile::tempdir().unwrap();
    let mut log: FelixLogStore<TypeConfig> = FelixLogStore::options(dir.path()).open().unwrap();
    let nodes = BTreeMap::from([(1, BasicNode::new("a")), (2, BasicNode::new("b"))]);
    let membership = Membership::new(vec![BTreeSet::from([1, 2])], nodes).unwrap();
    let entries = vec![
        Entry {
            log_id: LogId::new_term_index(3, 0),
            payload: EntryPayload::Blank,
        },
        Entry {
            log_id: LogId::new_term_index(3, 1),
            payload: EntryPayload::Normal(Request::at(1_700_000_000_000_001, &b"ab"[..])),
        },
        Entry {
            log_id: LogId::new_term_index(300, 2),
            payload: EntryPayload::Membership(membership),
        },
        Entry {
            log_id: LogId::new_term_index(300, 3),
            payload: EntryPayload::Normal(Request::at(5, &b""[..])),
        },
    ];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        log.blocking_append(entries.clone()).await.unwrap();
        let records = log.shard().read(0, 1 << 20, ReadBound::Written).unwrap();
        let record = |offset: u64, timestamp_micros: u64, payload: &[u8]| ReadRecord {
            offset,
            timestamp_micros,
            payload: payload.to_vec().into(),
        };
        assert_eq!(
            records,
            vec![
                // blank (2), timestamp 0
                record(0, 0, &[2]),
                // normal (1), then the producer's bytes; the request's time
                record(1, 1_700_000_000_000_001, &[1, b'a', b'b']),
                // membership (3), then postcard of the membership:
                // configs [{1, 2}], nodes {1: "a", 2: "b"}; timestamp 0
                record(2, 0, &[3, 1, 2, 1, 2, 2, 1, 1, b'a', 2, 1, b'b']),
                // normal, empty payload
                record(3, 5, &[1]),
            ]
        );
        let generations: Vec<_> = records
            .iter()
            .map(|r| log.shard().generation_at(r.offset))
            .collect();
        assert_eq!(generations, [Some(3), Some(3), Some(300), Some(300)]);
        let read = log.try_get_log_entries(0..4).await.unwrap();
        assert_eq!(read, entries);
    });
}
