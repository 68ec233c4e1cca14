//! A segment behaves like a `Vec` of records under random batches and reads.

mod common;

use common::writer;
use felix_segment::Record;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn segment_matches_vec_model(
        base in 0u64..1_000_000,
        spacing in prop_oneof![Just(1u64), Just(64), Just(4096), Just(1 << 30)],
        batches in proptest::collection::vec(proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..8), 1..12),
        reads in proptest::collection::vec((any::<prop::sample::Index>(), 0u64..2000), 1..20),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path(), base, spacing);
        let mut model: Vec<Vec<u8>> = Vec::new();
        for batch in batches {
            let records: Vec<_> = batch.iter().map(|p| Record::new(7, p.clone())).collect();
            let appended = w.append(&records).unwrap();
            prop_assert_eq!(appended.first_offset, base + model.len() as u64);
            model.extend(batch);
        }
        for (at, budget) in reads {
            let i = at.index(model.len());
            let got = w.read(base + i as u64, budget).unwrap();
            // Whole records from `i` while they fit the budget — the first
            // whatever its size — and none past the end.
            let mut expected = 0;
            let mut fitted = 0u64;
            for payload in &model[i..] {
                let total = 28 + payload.len() as u64;
                if expected > 0 && fitted + total > budget {
                    break;
                }
                expected += 1;
                fitted += total;
                if fitted >= budget {
                    break;
                }
            }
            prop_assert_eq!(got.len(), expected);
            let mut used = 0u64;
            for (k, record) in got.iter().enumerate() {
                prop_assert_eq!(record.offset, base + (i + k) as u64);
                prop_assert_eq!(&record.payload[..], &model[i + k][..]);
                used += 28 + record.payload.len() as u64;
            }
            // Whole records within the budget, except a lone first record.
            prop_assert!(used <= budget.max(28 + got[0].payload.len() as u64));
            let next = i + got.len();
            if next < model.len() {
                prop_assert!(used + 28 + model[next].len() as u64 > budget, "stopped early");
            }
        }
    }
}
