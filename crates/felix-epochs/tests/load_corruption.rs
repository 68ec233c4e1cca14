//! Every way the epochs file can be unusable reads as an empty history, with
//! the reason reported; a good file reads back exactly as stored.

use std::fs;

use felix_epochs::{
    DiscardReason, EPOCHS_FILE_NAME, EpochEntry, EpochHistory, EpochsFile, HistoryError,
    LoadStatus, Loaded, MAX_EPOCH_ENTRIES,
};
use felix_format::epochs::{MAX_EPOCHS_FILE_LEN, encode_epochs};
use felix_format::side_file::{SideFileDefect as D, SideFileError, SideFileKind};
use felix_io::FileType;
use felix_io::side_file::SideFileProblem;
use proptest::prelude::*;

fn error(defect: D) -> SideFileError {
    SideFileError::new(SideFileKind::Epochs, defect)
}

fn entry(generation: u64, start_offset: u64) -> EpochEntry {
    EpochEntry {
        generation,
        start_offset,
    }
}

fn sample_entries() -> Vec<EpochEntry> {
    vec![entry(1, 0), entry(2, 10), entry(5, 40)]
}

fn encoded(entries: &[EpochEntry]) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_epochs(entries, &mut bytes).unwrap();
    bytes
}

/// Writes `bytes` as the epochs file of a fresh directory and loads it.
fn load_bytes(bytes: &[u8]) -> Loaded {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(EPOCHS_FILE_NAME), bytes).unwrap();
    EpochsFile::new(&felix_io::FileSystem::os(), dir.path()).load()
}

/// The decode error a discarded load reports, failing on any other outcome.
fn decode_reason(loaded: &Loaded) -> SideFileError {
    assert!(loaded.history.is_empty());
    match loaded.status {
        LoadStatus::Discarded(DiscardReason::Unusable(SideFileProblem::Invalid(e))) => e,
        ref other => panic!("expected a decode discard, got {other:?}"),
    }
}

#[test]
fn load_stored_history_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let file = EpochsFile::new(&felix_io::FileSystem::os(), dir.path());
    let history = EpochHistory::from_entries(sample_entries()).unwrap();
    file.store(&history).unwrap();
    assert_eq!(
        fs::read(dir.path().join(EPOCHS_FILE_NAME)).unwrap(),
        encoded(&sample_entries())
    );
    let loaded = file.load();
    assert!(matches!(loaded.status, LoadStatus::Loaded));
    assert_eq!(loaded.history, history);
    assert!(!loaded.removed_stale_temp);
}

#[test]
fn load_stored_empty_history_is_loaded_not_absent() {
    let dir = tempfile::tempdir().unwrap();
    let file = EpochsFile::new(&felix_io::FileSystem::os(), dir.path());
    file.store(&EpochHistory::new()).unwrap();
    let loaded = file.load();
    assert!(matches!(loaded.status, LoadStatus::Loaded));
    assert!(loaded.history.is_empty());
}

#[test]
fn load_full_history_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let file = EpochsFile::new(&felix_io::FileSystem::os(), dir.path());
    let entries = (0..MAX_EPOCH_ENTRIES as u64)
        .map(|g| entry(g, g * 3))
        .collect();
    let history = EpochHistory::from_entries(entries).unwrap();
    file.store(&history).unwrap();
    let loaded = file.load();
    assert!(matches!(loaded.status, LoadStatus::Loaded));
    assert_eq!(loaded.history, history);
}

#[test]
fn load_missing_file_is_absent() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = EpochsFile::new(&felix_io::FileSystem::os(), dir.path()).load();
    assert!(matches!(loaded.status, LoadStatus::Absent));
    assert!(loaded.history.is_empty());
    assert!(!loaded.removed_stale_temp);
}

#[test]
fn load_file_cut_at_every_byte_is_discarded() {
    let full = encoded(&sample_entries());
    for len in 0..full.len() {
        let reason = decode_reason(&load_bytes(&full[..len]));
        let expected = if len < 12 {
            error(D::Short {
                len,
                header_len: 12,
            })
        } else {
            error(D::CountMismatch {
                count: 3,
                expected: 48,
                found: len - 12,
            })
        };
        assert_eq!(reason, expected, "cut at {len}");
    }
}

#[test]
fn load_file_every_bit_flipped_is_discarded() {
    let full = encoded(&sample_entries());
    for byte in 0..full.len() {
        for bit in 0..8 {
            let mut bytes = full.clone();
            bytes[byte] ^= 1 << bit;
            let reason = decode_reason(&load_bytes(&bytes));
            // Each header field is checked before the body, so the flipped
            // field is the one reported, in an error about an epochs file.
            let defect = match reason {
                SideFileError {
                    kind: SideFileKind::Epochs,
                    defect,
                    embedded: None,
                } => defect,
                other => panic!("byte {byte} bit {bit}: not an epochs file's error: {other:?}"),
            };
            let ok = match byte {
                0..4 => matches!(defect, D::Magic { .. }),
                4..6 => matches!(defect, D::Version { .. }),
                6..8 => matches!(defect, D::Count { .. } | D::CountMismatch { .. }),
                _ => matches!(defect, D::Checksum { .. }),
            };
            assert!(ok, "byte {byte} bit {bit}: {reason:?}");
        }
    }
}

#[test]
fn load_wrong_magic_is_discarded() {
    let mut bytes = encoded(&sample_entries());
    bytes[..4].copy_from_slice(b"FLSG");
    assert_eq!(
        decode_reason(&load_bytes(&bytes)),
        error(D::Magic {
            found: 0x464C_5347,
            expected: 0x464C_4550
        })
    );
}

#[test]
fn load_unknown_version_is_discarded() {
    let mut bytes = encoded(&sample_entries());
    bytes[4..6].copy_from_slice(&2u16.to_be_bytes());
    assert_eq!(
        decode_reason(&load_bytes(&bytes)),
        error(D::Version {
            found: 2,
            expected: 1
        })
    );
}

#[test]
fn load_count_not_matching_length_is_discarded() {
    let mut bytes = encoded(&sample_entries());
    bytes[6..8].copy_from_slice(&2u16.to_be_bytes());
    assert_eq!(
        decode_reason(&load_bytes(&bytes)),
        error(D::CountMismatch {
            count: 2,
            expected: 32,
            found: 48
        })
    );
}

#[test]
fn load_count_above_cap_is_discarded() {
    let mut bytes = encoded(&sample_entries());
    bytes[6..8].copy_from_slice(&u16::MAX.to_be_bytes());
    assert_eq!(
        decode_reason(&load_bytes(&bytes)),
        error(D::Count {
            count: u32::from(u16::MAX),
            max: MAX_EPOCH_ENTRIES as u32,
            min: 0
        })
    );
}

#[test]
fn load_failing_body_crc_is_discarded() {
    let mut bytes = encoded(&sample_entries());
    // Entry 1's start offset, 10, becomes 11.
    bytes[12 + 16 + 15] ^= 1;
    let reason = decode_reason(&load_bytes(&bytes));
    let stored = u32::from_be_bytes(bytes[8..12].try_into().unwrap());
    assert!(matches!(
        reason,
        SideFileError {
            kind: SideFileKind::Epochs,
            defect: D::Checksum { expected, found },
            embedded: None,
        } if expected == stored && found != stored
    ));
}

#[test]
fn load_entries_not_ascending_is_discarded() {
    // The codec encodes any entries; ascent is the history's rule.
    for (bad, why) in [
        (entry(2, 20), "generation repeats"),
        (entry(3, 10), "start repeats"),
        (entry(3, 5), "start goes back"),
    ] {
        let bytes = encoded(&[entry(1, 0), entry(2, 10), bad]);
        let loaded = load_bytes(&bytes);
        assert!(loaded.history.is_empty(), "{why}");
        assert!(
            matches!(
                loaded.status,
                LoadStatus::Discarded(DiscardReason::History(HistoryError::NotAscending {
                    index: 2,
                    previous,
                    entry: found,
                })) if previous == entry(2, 10) && found == bad
            ),
            "{why}: {:?}",
            loaded.status
        );
    }
}

#[test]
fn load_file_longer_than_any_valid_is_discarded_unread() {
    let mut bytes = encoded(&sample_entries());
    bytes.resize(MAX_EPOCHS_FILE_LEN + 1, 0);
    let loaded = load_bytes(&bytes);
    assert!(loaded.history.is_empty());
    let LoadStatus::Discarded(reason) = &loaded.status else {
        panic!("expected a discard, got {:?}", loaded.status);
    };
    assert_eq!(
        *reason,
        DiscardReason::Unusable(SideFileProblem::TooLarge {
            file: SideFileKind::Epochs,
            len: MAX_EPOCHS_FILE_LEN as u64 + 1,
        })
    );
    // The bound it was over is the longest valid epochs file.
    assert_eq!(SideFileKind::Epochs.layout().max_len(), MAX_EPOCHS_FILE_LEN);
}

#[test]
fn load_directory_under_the_name_is_discarded_unopened_and_names_it() {
    // A directory where the file should be is never opened: what it is
    // is the reason, and the warning names the path.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(EPOCHS_FILE_NAME);
    fs::create_dir(&path).unwrap();
    let file = EpochsFile::new(&felix_io::FileSystem::os(), dir.path());
    let loaded = file.load();
    assert!(loaded.history.is_empty());
    let LoadStatus::Discarded(reason) = &loaded.status else {
        panic!("expected a discard, got {:?}", loaded.status);
    };
    assert!(
        matches!(
            reason,
            DiscardReason::Unusable(SideFileProblem::NotAFile {
                file: SideFileKind::Epochs,
                what,
            }) if what.file_type == FileType::Directory && !what.via_symlink
        ),
        "{reason:?}"
    );
    assert_eq!(file.path(), path);
    assert_eq!(reason.to_string(), "it is a directory, not a regular file");
}

#[test]
fn store_over_a_directory_is_refused_before_writing_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join(EPOCHS_FILE_NAME);
    fs::create_dir(&blocker).unwrap();
    fs::write(blocker.join("occupant"), b"x").unwrap();
    let err = EpochsFile::new(&felix_io::FileSystem::os(), dir.path())
        .store(&EpochHistory::from_entries(sample_entries()).unwrap())
        .unwrap_err();
    assert_eq!(err.op(), "stat");
    assert_eq!(err.path(), blocker);
    assert!(
        matches!(err.not_regular_file(), Some(n) if n.file_type == felix_io::FileType::Directory),
        "{err:?}"
    );
    // Nothing written: no temporary, and the directory untouched.
    assert!(!dir.path().join("epochs.tmp").exists());
    assert!(blocker.join("occupant").exists());
}

#[test]
fn display_discard_reason_reads_for_an_operator() {
    let reason = DiscardReason::Unusable(SideFileProblem::Invalid(error(D::Short {
        len: 3,
        header_len: 12,
    })));
    assert_eq!(
        reason.to_string(),
        "it does not decode (EpochsShort: epochs file is 3 bytes, shorter than its 12-byte header)"
    );
    let reason = DiscardReason::Unusable(SideFileProblem::TooLarge {
        file: SideFileKind::Epochs,
        len: 70_000,
    });
    assert_eq!(
        reason.to_string(),
        "it is 70000 bytes, longer than the largest valid one (65548 bytes)"
    );
}

fn arb_history() -> impl Strategy<Value = EpochHistory> {
    prop::collection::vec((1u64..1_000, 0u64..1_000), 0..40).prop_map(|steps| {
        let mut history = EpochHistory::new();
        let (mut generation, mut start) = (0u64, 0u64);
        for (generation_step, start_step) in steps {
            generation += generation_step;
            start += start_step;
            history.record(generation, start).unwrap();
        }
        history
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn load_stored_arbitrary_history_round_trips(history in arb_history()) {
        let dir = tempfile::tempdir().unwrap();
        let file = EpochsFile::new(&felix_io::FileSystem::os(), dir.path());
        file.store(&history).unwrap();
        let loaded = file.load();
        prop_assert!(matches!(loaded.status, LoadStatus::Loaded));
        prop_assert_eq!(loaded.history, history);
    }

    #[test]
    fn load_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let loaded = load_bytes(&bytes);
        prop_assert!(matches!(loaded.status, LoadStatus::Loaded | LoadStatus::Discarded(_)));
        if !matches!(loaded.status, LoadStatus::Loaded) {
            prop_assert!(loaded.history.is_empty());
        }
    }
}

/// Power loss during a store, on the simulated disk: cut after every call
/// of the rewrite, and every disk state the crash could leave (any subset of
/// the pending operations, the temporary's write torn or left as zeros)
/// reads as the old history or the new one — never a mix, never garbage.
#[test]
fn store_power_loss_at_every_call_leaves_old_or_new() {
    use felix_epochs::{EpochHistory, EpochsFile};
    use felix_io::sim::{CrashPlan, SimFs, Tear};
    use felix_io::{FileSystem, Vfs};
    use std::path::Path;

    let dir = Path::new("/shard");
    let mut old = EpochHistory::new();
    old.record(1, 0).unwrap();
    let mut new = old.clone();
    new.record(2, 40).unwrap();

    let mut states = 0;
    for cut in 0..16 {
        let sim = SimFs::new();
        sim.create_dir_all(dir).unwrap();
        // The shard directory itself is durable; the store is under test.
        sim.sync_dir(Path::new("/")).unwrap();
        let file = EpochsFile::new(&FileSystem::new(sim.clone()), dir);
        file.store(&old).unwrap();
        sim.cut_power_after(cut);
        let _ = file.store(&new);
        let pending = sim.pending();
        let n = pending.len();
        for bits in 0..1u32 << n {
            let keep: Vec<bool> = (0..n).map(|i| bits >> i & 1 == 1).collect();
            let mut plans = vec![CrashPlan {
                keep: keep.clone(),
                tear: None,
            }];
            if let Some(w) = (0..n)
                .rev()
                .find(|&i| keep[i] && pending[i].kind == "write")
            {
                for tear in [
                    Tear::Prefix(0),
                    Tear::Prefix(pending[w].len / 2),
                    Tear::Zeros,
                ] {
                    plans.push(CrashPlan {
                        keep: keep.clone(),
                        tear: Some((w, tear)),
                    });
                }
            }
            for plan in plans {
                states += 1;
                let crashed = sim.crash(&plan);
                let loaded = EpochsFile::new(&FileSystem::new(crashed), dir).load();
                assert!(
                    loaded.history == old || loaded.history == new,
                    "cut after {cut} calls, {plan:?}: {:?} ({:?})",
                    loaded.history,
                    loaded.status
                );
            }
        }
    }
    println!("{states} crash states of an epochs store, each old or new");
}
