//! The history's rules, one behaviour a test.

use super::*;

fn entry(generation: u64, start_offset: u64) -> EpochEntry {
    EpochEntry {
        generation,
        start_offset,
    }
}

use super::history_of as history;

#[test]
fn record_empty_history_appends() {
    let mut h = EpochHistory::new();
    assert_eq!(h.record(7, 100), Ok(Recorded::Appended));
    assert_eq!(h.entries(), [entry(7, 100)]);
}

#[test]
fn record_lower_generation_is_rejected() {
    let mut h = history(&[(1, 0), (5, 10)]);
    assert_eq!(
        h.record(4, 20),
        Err(HistoryError::GenerationWentBackwards {
            last: 5,
            requested: 4
        })
    );
    assert_eq!(h, history(&[(1, 0), (5, 10)]));
}

#[test]
fn record_lower_start_offset_is_rejected() {
    let mut h = history(&[(1, 0), (5, 10)]);
    assert_eq!(
        h.record(6, 9),
        Err(HistoryError::StartOffsetWentBackwards {
            last_generation: 5,
            last_start: 10,
            generation: 6,
            requested: 9
        })
    );
    // The same generation may not move its start backwards either.
    assert_eq!(
        h.record(5, 3),
        Err(HistoryError::StartOffsetWentBackwards {
            last_generation: 5,
            last_start: 10,
            generation: 5,
            requested: 3
        })
    );
    assert_eq!(h, history(&[(1, 0), (5, 10)]));
}

#[test]
fn record_same_start_offset_replaces_latest() {
    let mut h = history(&[(1, 0), (5, 10)]);
    assert_eq!(
        h.record(6, 10),
        Ok(Recorded::Replaced {
            previous: entry(5, 10)
        })
    );
    assert_eq!(h, history(&[(1, 0), (6, 10)]));
}

#[test]
fn record_latest_generation_again_changes_nothing() {
    let mut h = history(&[(1, 0), (5, 10)]);
    assert_eq!(h.record(5, 10), Ok(Recorded::AlreadyLatest));
    assert_eq!(h.record(5, 30), Ok(Recorded::AlreadyLatest));
    assert_eq!(h, history(&[(1, 0), (5, 10)]));
}

#[test]
fn record_full_history_drops_oldest() {
    let mut h = EpochHistory::new();
    let max = MAX_EPOCH_ENTRIES as u64;
    for g in 0..max {
        assert_eq!(h.record(g, g * 2), Ok(Recorded::Appended));
    }
    assert_eq!(
        h.record(max, max * 2),
        Ok(Recorded::AppendedDroppingOldest {
            dropped: entry(0, 0)
        })
    );
    assert_eq!(h.len(), MAX_EPOCH_ENTRIES);
    assert_eq!(h.earliest(), Some(entry(1, 2)));
    assert_eq!(h.latest(), Some(entry(max, max * 2)));
    assert_eq!(h.generation_at(1), None);
    // Replacing needs no room, so a full history replaces without dropping.
    assert_eq!(
        h.record(max + 1, max * 2),
        Ok(Recorded::Replaced {
            previous: entry(max, max * 2)
        })
    );
    assert_eq!(h.earliest(), Some(entry(1, 2)));
}

#[test]
fn from_entries_too_many_is_rejected() {
    let entries: Vec<_> = (0..=MAX_EPOCH_ENTRIES as u64)
        .map(|g| entry(g, g))
        .collect();
    assert_eq!(
        EpochHistory::from_entries(entries),
        Err(HistoryError::TooManyEntries {
            count: MAX_EPOCH_ENTRIES + 1,
            max: MAX_EPOCH_ENTRIES
        })
    );
}

#[test]
fn from_entries_not_ascending_names_first_offender() {
    for (bad, why) in [
        (entry(2, 20), "equal generation"),
        (entry(1, 30), "lower generation"),
        (entry(3, 10), "equal start"),
        (entry(3, 5), "lower start"),
    ] {
        let entries = vec![entry(0, 0), entry(2, 10), bad, entry(9, 99)];
        assert_eq!(
            EpochHistory::from_entries(entries),
            Err(HistoryError::NotAscending {
                index: 2,
                previous: entry(2, 10),
                entry: bad
            }),
            "{why}"
        );
    }
}

#[test]
fn generation_at_offsets_maps_each_range() {
    let h = history(&[(1, 5), (3, 8), (4, 12)]);
    let found: Vec<_> = (0..15).map(|o| h.generation_at(o)).collect();
    assert_eq!(
        found,
        [
            None,
            None,
            None,
            None,
            None,
            Some(1),
            Some(1),
            Some(1),
            Some(3),
            Some(3),
            Some(3),
            Some(3),
            Some(4),
            Some(4),
            Some(4)
        ]
    );
    assert_eq!(EpochHistory::new().generation_at(0), None);
}

#[test]
fn end_offset_for_each_generation_matches_kafka() {
    let h = history(&[(2, 5), (4, 8), (7, 12)]);
    let answer = |generation, end_offset| {
        Some(LeaderAnswer {
            generation,
            end_offset,
        })
    };
    // Older than the whole history: the asked generation, ending where it begins.
    assert_eq!(h.end_offset_for(1, 20), answer(1, 5));
    assert_eq!(h.end_offset_for(2, 20), answer(2, 8));
    assert_eq!(h.end_offset_for(3, 20), answer(2, 8));
    assert_eq!(h.end_offset_for(4, 20), answer(4, 12));
    assert_eq!(h.end_offset_for(6, 20), answer(4, 12));
    assert_eq!(h.end_offset_for(7, 20), answer(7, 20));
    assert_eq!(h.end_offset_for(u64::MAX, 20), answer(7, 20));
    assert_eq!(EpochHistory::new().end_offset_for(3, 20), None);
}

#[test]
fn truncate_from_offsets_drops_entries_at_or_above() {
    let mut h = history(&[(1, 0), (2, 10), (3, 20)]);
    assert_eq!(h.truncate_from(21), 0);
    assert_eq!(h.truncate_from(20), 1);
    assert_eq!(h, history(&[(1, 0), (2, 10)]));
    assert_eq!(h.truncate_from(0), 2);
    assert!(h.is_empty());
}

#[test]
fn truncate_before_offsets_keeps_covering_entry() {
    let mut h = history(&[(1, 0), (2, 10), (3, 20)]);
    assert_eq!(h.truncate_before(0), 0);
    assert_eq!(h, history(&[(1, 0), (2, 10), (3, 20)]));
    assert_eq!(h.truncate_before(10), 1);
    assert_eq!(h, history(&[(2, 10), (3, 20)]));
    assert_eq!(h.truncate_before(25), 1);
    assert_eq!(h, history(&[(3, 25)]));
    assert_eq!(h.generation_at(24), None);
    assert_eq!(h.generation_at(25), Some(3));
}

#[test]
fn truncate_before_offset_below_history_keeps_all() {
    let mut h = history(&[(1, 10), (2, 20)]);
    assert_eq!(h.truncate_before(5), 0);
    assert_eq!(h, history(&[(1, 10), (2, 20)]));
}

#[test]
fn display_history_errors_read_for_an_operator() {
    let e = HistoryError::NotAscending {
        index: 2,
        previous: entry(2, 10),
        entry: entry(2, 20),
    };
    assert_eq!(
        e.to_string(),
        "entry 2 (generation 2, start offset 20) does not ascend from the entry before it (generation 2, start offset 10)"
    );
    assert_eq!(
        HistoryError::GenerationWentBackwards {
            last: 5,
            requested: 4
        }
        .to_string(),
        "generation 4 is below the latest recorded generation 5; generations never go backwards"
    );
}

/// A history that bypassed [`EpochHistory::from_entries`] (only code in
/// this crate can build one) is caught at the boundary it crosses.
#[cfg(debug_assertions)]
mod debug_asserts {
    use super::*;
    use crate::EpochsFile;
    use felix_io::FileSystem;
    use felix_io::sim::SimFs;

    fn not_ascending() -> EpochHistory {
        EpochHistory {
            entries: vec![entry(3, 4), entry(2, 5)],
        }
    }

    #[test]
    #[should_panic(
        expected = "epochs history before encode: entry 1 (generation 2, start offset 5) does not ascend from entry 0 (generation 3, start offset 4)"
    )]
    fn store_history_not_ascending_fails_the_assertion() {
        let sim = SimFs::new();
        let fs = FileSystem::new(sim.clone());
        fs.create_dir_all(std::path::Path::new("/d")).unwrap();
        let _ = EpochsFile::new(&fs, "/d").store(&not_ascending());
    }

    #[test]
    #[should_panic(
        expected = "epochs history after record: entry 1 (generation 2, start offset 5) does not ascend from entry 0 (generation 3, start offset 4)"
    )]
    fn record_on_history_not_ascending_fails_the_assertion() {
        let _ = not_ascending().record(9, 50);
    }

    #[test]
    #[should_panic(
        expected = "epochs history after truncate_from: entry 1 (generation 1, start offset 5) does not ascend from entry 0 (generation 1, start offset 4)"
    )]
    fn truncate_from_history_with_repeated_generation_fails_the_assertion() {
        let mut history = EpochHistory {
            entries: vec![entry(1, 4), entry(1, 5), entry(2, 9)],
        };
        history.truncate_from(9);
    }
}
