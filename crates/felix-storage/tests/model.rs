//! A shard behaves like an in-memory `Vec` of records under random appends,
//! replicated appends, reads, truncations, resets, retention and reopens.

mod common;

use bytes::Bytes;
use felix_storage::{
    Durability, Preallocation, ReadBound, Record, ReplicatedRecord, Retention, Shard, StorageError,
    StoreConfig,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Append {
        count: u8,
        len: u16,
    },
    AppendReplicated {
        count: u8,
    },
    Read {
        at: prop::sample::Index,
        budget: u16,
    },
    TruncateTo {
        at: prop::sample::Index,
    },
    ResetTo {
        delta: u16,
    },
    Retention {
        max_bytes: u16,
    },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u8..6, 0u16..300).prop_map(|(count, len)| Op::Append { count, len }),
        2 => (1u8..4).prop_map(|count| Op::AppendReplicated { count }),
        4 => (any::<prop::sample::Index>(), 0u16..2000).prop_map(|(at, budget)| Op::Read { at, budget }),
        1 => any::<prop::sample::Index>().prop_map(|at| Op::TruncateTo { at }),
        1 => (0u16..500).prop_map(|delta| Op::ResetTo { delta }),
        // From 1: a retention of 0 bytes is refused as an invalid config.
        1 => (1u16..3000).prop_map(|max_bytes| Op::Retention { max_bytes }),
        1 => Just(Op::Reopen),
    ]
}

struct Model {
    base: u64,
    records: Vec<Vec<u8>>,
}

impl Model {
    fn next(&self) -> u64 {
        self.base + self.records.len() as u64
    }
}

fn config(max_bytes: Option<u64>) -> StoreConfig {
    StoreConfig {
        segment_size_bytes: 700,
        index_spacing_bytes: 128,
        preallocate: Preallocation::Off,
        durability: Durability::None,
        writeback_bytes: None,
        retention: Retention {
            max_bytes,
            ..Retention::default()
        },
        repair_policy: felix_storage::recovery::RepairPolicy::Default,
        ..StoreConfig::default()
    }
}

fn payload(seed: u64, len: u16) -> Vec<u8> {
    (0..len)
        .map(|i| (seed as u8).wrapping_mul(7).wrapping_add(i as u8))
        .collect()
}

fn check_all(shard: &Shard, model: &Model) {
    assert_eq!(shard.offsets().base, model.base);
    assert_eq!(shard.offsets().written, model.next());
    let mut offset = model.base;
    while offset < model.next() {
        let got = shard.read(offset, 1 << 16, ReadBound::Committed).unwrap();
        assert!(!got.is_empty());
        for r in got {
            assert_eq!(r.offset, offset);
            assert_eq!(
                &r.payload[..],
                &model.records[(offset - model.base) as usize][..]
            );
            offset += 1;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn shard_matches_vec_model(ops in proptest::collection::vec(op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let mut shard = Shard::options(dir.path()).config(config(None)).label("model").open().unwrap();
        let mut model = Model { base: 0, records: Vec::new() };
        let mut seed = 0u64;
        for op in ops {
            match op {
                Op::Append { count, len } => {
                    let batch: Vec<Vec<u8>> = (0..count).map(|i| payload(seed + u64::from(i), len)).collect();
                    seed += u64::from(count);
                    let records: Vec<_> = batch.iter().map(|p| Record::new(seed, p.clone())).collect();
                    let receipt = shard.append(&records).wait().unwrap();
                    prop_assert_eq!(receipt.first_offset, model.next());
                    model.records.extend(batch);
                }
                Op::AppendReplicated { count } => {
                    let next = model.next();
                    let batch: Vec<_> = (0..u64::from(count))
                        .map(|i| ReplicatedRecord { offset: next + i, generation: None, timestamp_micros: 1, payload: Bytes::from(payload(seed + i, 20)) })
                        .collect();
                    seed += u64::from(count);
                    shard.append_replicated(&batch).unwrap();
                    model.records.extend(batch.iter().map(|r| r.payload.to_vec()));
                }
                Op::Read { at, budget } => {
                    if model.records.is_empty() {
                        prop_assert!(shard.read(model.base, u64::from(budget), ReadBound::Committed).unwrap().is_empty());
                        continue;
                    }
                    let i = at.index(model.records.len());
                    let got = shard.read(model.base + i as u64, u64::from(budget), ReadBound::Committed).unwrap();
                    prop_assert!(!got.is_empty());
                    for (k, r) in got.iter().enumerate() {
                        prop_assert_eq!(r.offset, model.base + (i + k) as u64);
                        prop_assert_eq!(&r.payload[..], &model.records[i + k][..]);
                    }
                    if model.base > 0 {
                        let below = shard.read(model.base - 1, 10, ReadBound::Committed);
                        prop_assert!(matches!(below, Err(StorageError::Trimmed { .. })), "{:?}", below);
                    }
                }
                Op::TruncateTo { at } => {
                    let keep = at.index(model.records.len() + 1);
                    shard.truncate_to(model.base + keep as u64).unwrap();
                    model.records.truncate(keep);
                }
                Op::ResetTo { delta } => {
                    let offset = model.next() + u64::from(delta);
                    shard.reset_to(offset).unwrap();
                    model = Model { base: offset, records: Vec::new() };
                }
                Op::Retention { max_bytes } => {
                    drop(shard);
                    shard = Shard::options(dir.path()).config(config(Some(u64::from(max_bytes)))).label("model").open().unwrap();
                    let outcome = shard.apply_retention().unwrap();
                    prop_assert!(outcome.base_offset >= model.base && outcome.base_offset <= model.next());
                    let dropped = (outcome.base_offset - model.base) as usize;
                    model.records.drain(..dropped);
                    model.base = outcome.base_offset;
                    drop(shard);
                    shard = Shard::options(dir.path()).config(config(None)).label("model").open().unwrap();
                }
                Op::Reopen => {
                    drop(shard);
                    shard = Shard::options(dir.path()).config(config(None)).label("model").open().unwrap();
                }
            }
            check_all(&shard, &model);
        }
    }
}
