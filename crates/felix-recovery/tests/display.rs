//! The operator-facing text of findings and of a refused open, reviewed
//! through snapshots.
//!
//! Shards here are written byte for byte with a fixed creation time
//! (`write_segment`), so every CRC in the text is the same on every run; the
//! temporary directory's path is replaced by `[SHARD_DIR]`.

mod common;

use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
use std::path::Path;

use common::{
    LABEL, flip_bit, inspect_unchanged, open_refused, seg_path, segment_layout, set_len, write_at,
    write_segment,
};
use felix_recovery::{
    Finding, InspectOptions, OpenOptions, RecoveryError, RepairPolicy, open_shard,
};

fn options() -> InspectOptions {
    InspectOptions {
        index_spacing_bytes: 4096,
        full_verify: true,
        ..InspectOptions::default()
    }
}

/// The one finding a shard built by `build` produces.
fn finding(build: impl FnOnce(&Path)) -> Finding {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let mut findings = inspect_unchanged(dir.path(), &options()).findings;
    assert_eq!(findings.len(), 1, "{findings:?}");
    findings.remove(0)
}

#[test]
fn finding_display_text_for_every_context() {
    let last = segment_layout(1, 3, 3)[2];
    let middle = segment_layout(1, 3, 3)[1];
    let cases: Vec<(&str, Finding)> = vec![
        (
            "torn newest tail",
            finding(|d| {
                write_segment(d, 0, 0, 3);
                write_segment(d, 1, 3, 3);
                set_len(&seg_path(d, 1), last.position + 40);
            }),
        ),
        (
            "zero-filled newest tail",
            finding(|d| {
                write_segment(d, 0, 0, 3);
                write_segment(d, 1, 3, 3);
                set_len(&seg_path(d, 1), last.end() + 100);
            }),
        ),
        (
            "newest, running into never-written blocks",
            finding(|d| {
                // The record holding byte 4096 runs into block 1, which
                // holds the next header: zero that block, keep what follows.
                write_segment(d, 0, 0, 3);
                write_segment(d, 1, 3, 250);
                write_at(&seg_path(d, 1), 4096, &[0; 4096]);
            }),
        ),
        (
            "newest, rot before never-written blocks",
            finding(|d| {
                // A rotted record whose own bytes persisted, then zeros from
                // the next header to the block's end.
                write_segment(d, 0, 0, 3);
                write_segment(d, 1, 3, 250);
                let rotted = *segment_layout(1, 3, 250)
                    .iter()
                    .find(|r| r.position > 5000)
                    .unwrap();
                write_at(
                    &seg_path(d, 1),
                    rotted.end(),
                    &vec![0; (8192 - rotted.end()) as usize],
                );
                flip_bit(&seg_path(d, 1), rotted.position + 30, 0);
            }),
        ),
        (
            "newest, followed by an intact record",
            finding(|d| {
                write_segment(d, 0, 0, 3);
                write_segment(d, 1, 3, 3);
                flip_bit(&seg_path(d, 1), middle.position + 40, 2);
            }),
        ),
        (
            "sealed",
            finding(|d| {
                write_segment(d, 0, 0, 3);
                write_segment(d, 1, 3, 3);
                flip_bit(&seg_path(d, 0), 40, 0);
            }),
        ),
        (
            "segment header",
            finding(|d| {
                write_segment(d, 0, 0, 3);
                write_segment(d, 1, 3, 3);
                flip_bit(&seg_path(d, 1), 31, 0);
            }),
        ),
        (
            "abandoned newest segment",
            finding(|d| {
                write_segment(d, 0, 0, 3);
                write_segment(d, 1, 3, 0);
                set_len(&seg_path(d, 1), 12);
            }),
        ),
        (
            "abandoned only segment",
            finding(|d| {
                write_segment(d, 0, 0, 0);
                set_len(&seg_path(d, 0), 12);
            }),
        ),
        (
            "gap",
            finding(|d| {
                write_segment(d, 0, 0, 3);
                write_segment(d, 2, 6, 3);
            }),
        ),
    ];
    let text: String = cases
        .iter()
        .map(|(case, f)| format!("{case}:\n  {f}\n"))
        .collect();
    insta::assert_snapshot!(text);
}

#[test]
fn unrepairable_display_lists_every_blocking_finding_and_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    write_segment(dir.path(), 0, 0, 3);
    write_segment(dir.path(), 1, 3, 3);
    flip_bit(&seg_path(dir.path(), 0), 31, 0);
    let last = segment_layout(1, 3, 3)[2];
    // Rot in the newest tail: repairable only with opt-in.
    flip_bit(&seg_path(dir.path(), 1), last.end() - 1, 0);

    let mut text = String::new();
    for policy in [RepairPolicy::Default, RepairPolicy::ChecksumTail] {
        let repair_checksum_tail = policy == RepairPolicy::ChecksumTail;
        let options = OpenOptions {
            inspect: options(),
            repair_policy: policy,
            use_clean_shutdown: false,
            keep_clean_shutdown: false,
        };
        let blocking = open_refused(dir.path(), &options);
        assert_eq!(blocking.len(), if repair_checksum_tail { 1 } else { 2 });
        let err = open_shard(
            &felix_io::FileSystem::os(),
            dir.path(),
            LABEL,
            &options,
            &common::lock(dir.path()),
        )
        .unwrap_err();
        assert!(matches!(err, RecoveryError::Unrepairable { .. }));
        let shown = err
            .to_string()
            .replace(&dir.path().display().to_string(), "[SHARD_DIR]");
        text.push_str(&format!(
            "repair_checksum_tail = {repair_checksum_tail}:\n{shown}\n\n"
        ));
    }
    insta::assert_snapshot!(text);
}

/// Why an index is unusable, for each reason: an index the process may not
/// read (mode 0600 under another user) is reported as unreadable with its
/// error, never as missing.
#[test]
fn index_note_display_text_for_every_problem() {
    use felix_format::CorruptionKind;
    use felix_recovery::{IndexProblem, Note};
    use felix_segment::IndexLoadError;

    let path = Path::new("shard/00000000000000000003.index");
    // What the OS returns for an index its permissions deny (EACCES):
    // tests run as root, which no mode stops, so the error is built here.
    let denied = IndexLoadError::Io(felix_io::IoError::new(
        "open",
        path,
        std::io::Error::from_raw_os_error(13),
    ));
    let unreadable = IndexProblem::of_load_error(&denied);
    assert_eq!(
        unreadable,
        IndexProblem::Unreadable {
            op: "open",
            kind: std::io::ErrorKind::PermissionDenied,
        }
    );
    let missing = IndexLoadError::Missing {
        path: path.to_path_buf(),
    };
    assert_eq!(IndexProblem::of_load_error(&missing), IndexProblem::Missing);
    let reasons = [
        IndexProblem::Missing,
        unreadable,
        IndexProblem::Invalid(CorruptionKind::IndexMagic { found: 0 }),
        IndexProblem::Stale,
        IndexProblem::StaleEntry {
            number: 1,
            offset: 3,
            position: 138,
        },
    ];
    let text: String = reasons
        .into_iter()
        .map(|reason| format!("{}\n", Note::IndexUnusable { segment: 3, reason }))
        .collect();
    insta::assert_snapshot!(text);
}

#[test]
fn note_display_text_for_temporaries_names_that_are_not_files_and_unwritten_indexes() {
    use felix_io::{FileType, NotRegularFile};
    use felix_recovery::{IndexProblem, Note, TemporaryKind};

    let fifo = NotRegularFile {
        file_type: FileType::Fifo,
        via_symlink: false,
    };
    let not_a_file = |name: &str, file_type| Note::NotAFile {
        name: name.to_owned(),
        file_type,
    };
    let notes = [
        Note::Temporary {
            name: "00000000000000000003.log.tmp".into(),
            kind: TemporaryKind::SegmentCreation(3),
        },
        Note::Temporary {
            name: "epochs.tmp".into(),
            kind: TemporaryKind::EpochsUpdate,
        },
        Note::Temporary {
            name: "clean-shutdown.tmp".into(),
            kind: TemporaryKind::CleanShutdown,
        },
        not_a_file("lock", FileType::Symlink),
        not_a_file("epochs", FileType::Fifo),
        not_a_file("clean-shutdown", FileType::Directory),
        not_a_file("00000000000000000003.log.tmp", FileType::Directory),
        Note::IndexUnusable {
            segment: 2,
            reason: IndexProblem::NotAFile(NotRegularFile {
                file_type: FileType::CharDevice,
                via_symlink: true,
            }),
        },
        Note::IndexNotWritten {
            segment: 2,
            kind: std::io::ErrorKind::StorageFull,
            not_regular: None,
        },
        Note::IndexNotWritten {
            segment: 4,
            kind: std::io::ErrorKind::InvalidInput,
            not_regular: Some(fifo),
        },
        Note::Temporary {
            name: "key.tmp".into(),
            kind: TemporaryKind::KeyFile,
        },
        not_a_file("key", FileType::Fifo),
        Note::KeyFileUnusable {
            problem: felix_recovery::SideFileProblem::Invalid(SideFileError::new(
                SideFileKind::KeyFile,
                SideFileDefect::Checksum {
                    expected: 0x1234_5678,
                    found: 0x9abc_def0,
                },
            )),
        },
        Note::KeyFileUnusable {
            problem: felix_recovery::SideFileProblem::TooLarge {
                file: SideFileKind::KeyFile,
                len: 20_000,
            },
        },
        Note::KeyFileDisagrees {
            key: felix_format::ShardKey::new("acme", "", "a/b", 4),
            expected_dir: felix_format::ShardKey::new("acme", "", "a/b", 4).dir_name(),
            dir_name: "acme_default_orders_3-0d3af04b998d2cb1".into(),
        },
    ];
    let text: Vec<String> = notes.iter().map(ToString::to_string).collect();
    insta::assert_snapshot!(text.join("\n"));
}
