//! The bytes of a record: each entry is postcard of openraft's `Entry`,
//! laid out as openraft 0.9 with `single-term-leader` wrote it (the log id
//! as its term and index, the payload's variant, its fields), so logs
//! written before the move to openraft 0.10 read as they did.

use std::collections::{BTreeMap, BTreeSet};

use felix_raft::{Entry, FelixLogStore, LogId, Request, TypeConfig};
use felix_storage::ReadBound;
use openraft::storage::RaftLogStorageExt;
use openraft::{BasicNode, EntryPayload, Membership, RaftLogReader};

#[test]
fn entries_are_stored_as_openraft_0_9_laid_them_out() {
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
            payload: EntryPayload::Normal(Request(b"ab".to_vec())),
        },
        Entry {
            log_id: LogId::new_term_index(300, 2),
            payload: EntryPayload::Membership(membership),
        },
    ];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        log.blocking_append(entries.clone()).await.unwrap();
        let records = log
            .shard()
            .read_bounded(0, 1 << 20, ReadBound::Written)
            .unwrap();
        let payloads: Vec<Vec<u8>> = records.iter().map(|r| r.payload.to_vec()).collect();
        assert_eq!(
            payloads,
            vec![
                // term 3, index 0, Blank (variant 0)
                vec![3, 0, 0],
                // term 3, index 1, Normal (1), 2 bytes "ab"
                vec![3, 1, 1, 2, b'a', b'b'],
                // term 300 (varint 0xac 0x02), index 2, Membership (2):
                // configs [{1, 2}], nodes {1: "a", 2: "b"}
                vec![0xac, 0x02, 2, 2, 1, 2, 1, 2, 2, 1, 1, b'a', 2, 1, b'b'],
            ]
        );
        let generations: Vec<_> = records
            .iter()
            .map(|r| log.shard().generation_at(r.offset))
            .collect();
        assert_eq!(generations, [Some(3), Some(3), Some(300)]);
        assert_eq!(log.try_get_log_entries(0..3).await.unwrap(), entries);
    });
}
