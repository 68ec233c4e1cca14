//! The one reader of side files (`read_side_file`): what it makes of each
//! way a file can be unusable, for every kind recovery reads, and the note
//! an open gives for a clean-shutdown file it could not use.

mod common;

use std::path::Path;

use common::build_shard;
use felix_format::clean::decode_clean_shutdown;
use felix_format::key_file::decode_key_file;
use felix_format::log_start::decode_log_start;
use felix_format::raft_state::decode_raft_state;
use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
use felix_format::{
    CLEAN_SHUTDOWN_FILE_NAME, KEY_FILE_NAME, LOG_START_FILE_NAME, RAFT_STATE_FILE_NAME,
};
use felix_io::{FileSystem, FileType, NotRegularFile};
use felix_recovery::{
    CleanShutdownUnused, InspectOptions, Note, OpenOptions, ReadSideFileError, RepairPolicy,
    ShardLock, SideFileProblem, open_shard, read_side_file,
};

/// Reads `name` in `dir` as a `kind` file, keeping only whether it decoded.
fn read(dir: &Path, name: &str, kind: SideFileKind) -> Result<Option<()>, ReadSideFileError> {
    let path = dir.join(name);
    let fs = FileSystem::os();
    match kind {
        SideFileKind::KeyFile => read_side_file(&fs, &path, kind, |b| decode_key_file(b).map(drop)),
        SideFileKind::LogStart => {
            read_side_file(&fs, &path, kind, |b| decode_log_start(b).map(drop))
        }
        SideFileKind::RaftState => {
            read_side_file(&fs, &path, kind, |b| decode_raft_state(b).map(drop))
        }
        _ => read_side_file(&fs, &path, kind, |b| decode_clean_shutdown(b).map(drop)),
    }
}

const FILES: [(&str, SideFileKind); 4] = [
    (KEY_FILE_NAME, SideFileKind::KeyFile),
    (LOG_START_FILE_NAME, SideFileKind::LogStart),
    (RAFT_STATE_FILE_NAME, SideFileKind::RaftState),
    (CLEAN_SHUTDOWN_FILE_NAME, SideFileKind::CleanShutdown),
];

#[test]
fn read_side_file_missing_is_none_for_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    for (name, kind) in FILES {
        assert!(matches!(read(dir.path(), name, kind), Ok(None)), "{name}");
    }
}

#[test]
fn read_side_file_one_byte_past_the_longest_file_is_too_large_for_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    for (name, kind) in FILES {
        let max = kind.layout().max_len() as u64;
        let path = dir.path().join(name);
        // Sparse: the reader must refuse it by its length, unread.
        std::fs::File::create(&path)
            .unwrap()
            .set_len(max + 1)
            .unwrap();
        let err = read(dir.path(), name, kind).unwrap_err();
        assert!(
            matches!(&err, ReadSideFileError::TooLarge { path: p, file, len } if *p == path && *file == kind && *len == max + 1),
            "{err:?}"
        );
        let problem = err.problem(kind);
        assert_eq!(
            problem,
            SideFileProblem::TooLarge {
                file: kind,
                len: max + 1
            }
        );
        assert_eq!(problem.name(), format!("{}TooLarge", kind.name()));
        // At the bound it is read and judged by its bytes.
        std::fs::File::create(&path).unwrap().set_len(max).unwrap();
        assert!(
            matches!(
                read(dir.path(), name, kind),
                Err(ReadSideFileError::Invalid { .. })
            ),
            "{name}"
        );
    }
}

#[test]
fn read_side_file_directory_under_the_name_is_never_opened_for_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    for (name, kind) in FILES {
        std::fs::create_dir(dir.path().join(name)).unwrap();
        let err = read(dir.path(), name, kind).unwrap_err();
        let ReadSideFileError::Io(io) = &err else {
            panic!("{err:?}");
        };
        assert_eq!(io.op(), "open");
        let problem = err.problem(kind);
        assert_eq!(
            problem,
            SideFileProblem::NotAFile {
                file: kind,
                what: NotRegularFile {
                    file_type: FileType::Directory,
                    via_symlink: false,
                },
            }
        );
        assert_eq!(problem.name(), format!("{}NotAFile", kind.name()));
    }
}

#[test]
fn read_side_file_bytes_that_do_not_decode_name_the_kind_and_the_defect() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(LOG_START_FILE_NAME), b"FLLS").unwrap();
    let err = read(dir.path(), LOG_START_FILE_NAME, SideFileKind::LogStart).unwrap_err();
    let expected = SideFileError::new(SideFileKind::LogStart, SideFileDefect::Length { len: 4 });
    assert!(
        matches!(&err, ReadSideFileError::Invalid { source, .. } if *source == expected),
        "{err:?}"
    );
    let problem = err.problem(SideFileKind::LogStart);
    assert_eq!(problem, SideFileProblem::Invalid(expected));
    assert_eq!(problem.name(), "LogStartLength");
    assert_eq!(
        problem.to_string(),
        "it does not decode (LogStartLength: log-start file is 4 bytes, not 28)"
    );
}

#[test]
fn open_damaged_clean_shutdown_file_is_a_note_naming_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    build_shard(dir.path(), 0, &[3, 2], 64);
    std::fs::write(dir.path().join(CLEAN_SHUTDOWN_FILE_NAME), b"FLCS").unwrap();
    let fs = FileSystem::os();
    let lock = ShardLock::acquire(&fs, dir.path()).unwrap();
    let options = OpenOptions {
        inspect: InspectOptions::default(),
        repair_policy: RepairPolicy::Default,
        use_clean_shutdown: true,
        keep_clean_shutdown: false,
    };
    let opened = open_shard(&fs, dir.path(), "t", &options, &lock).unwrap();
    assert!(!opened.clean_shutdown_trusted);
    let short = SideFileError::new(
        SideFileKind::CleanShutdown,
        SideFileDefect::Short {
            len: 4,
            header_len: 16,
        },
    );
    let note = Note::CleanShutdownUnused {
        reason: CleanShutdownUnused::Unusable(SideFileProblem::Invalid(short)),
    };
    assert!(
        opened.inspection.notes.contains(&note),
        "{:?}",
        opened.inspection.notes
    );
    assert_eq!(
        note.to_string(),
        "clean-shutdown file not used (it does not decode (CleanShutdownShort: clean-shutdown file is 4 bytes, shorter than its 16-byte header)); every segment inspected"
    );
    assert!(!dir.path().join(CLEAN_SHUTDOWN_FILE_NAME).exists());
}
