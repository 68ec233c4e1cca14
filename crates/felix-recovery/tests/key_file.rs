//! The key file in a shard directory: an inspection reads it into
//! `Inspection::key`, never calls it a stray, reports one it cannot use (or
//! one naming another directory's key) as a note with its kind, and an open
//! removes its temporary. None of it stops an open.

mod common;

use std::path::Path;

use common::build_shard;
use felix_format::key_file::encode_key_file;
use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
use felix_format::{KEY_FILE_NAME, KEY_TEMP_FILE_NAME, ShardKey};
use felix_io::{FileSystem, FileType, NotRegularFile};
use felix_recovery::{
    InspectOptions, Note, OpenOptions, RecoveryError, RepairPolicy, ShardLock, SideFileProblem,
    StoredKey, TemporaryKind, inspect, open_shard, read_key_file, write_key_file,
};

fn key() -> ShardKey {
    ShardKey::new("acme", "default", "ünï/orders", 3)
}

/// A shard directory named after `key()`, holding one segment of 3 records.
fn shard(root: &Path) -> std::path::PathBuf {
    let dir = root.join(key().dir_name());
    std::fs::create_dir(&dir).unwrap();
    build_shard(&dir, 0, &[3], 64);
    dir
}

fn encoded(key: &ShardKey) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_key_file(key, &mut bytes).unwrap();
    bytes
}

fn notes(dir: &Path) -> (Option<ShardKey>, Vec<Note>) {
    let inspection = inspect(&FileSystem::os(), dir, "t", &InspectOptions::default()).unwrap();
    assert!(inspection.findings.is_empty(), "{:?}", inspection.findings);
    assert_eq!(inspection.next_offset(), Some(3));
    (inspection.key, inspection.notes)
}

#[test]
fn inspect_key_file_gives_the_exact_key_and_no_stray() {
    let root = tempfile::tempdir().unwrap();
    let dir = shard(root.path());
    assert!(write_key_file(&FileSystem::os(), &dir, &key()).unwrap());
    assert_eq!(notes(&dir), (Some(key()), vec![]));
}

#[test]
fn inspect_without_key_file_gives_no_key_and_no_note() {
    let root = tempfile::tempdir().unwrap();
    let dir = shard(root.path());
    assert_eq!(notes(&dir), (None, vec![]));
}

#[test]
fn inspect_damaged_key_file_is_a_note_with_its_kind() {
    let root = tempfile::tempdir().unwrap();
    let dir = shard(root.path());
    let mut bytes = encoded(&key());
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(dir.join(KEY_FILE_NAME), &bytes).unwrap();
    let (found, notes) = notes(&dir);
    assert_eq!(found, None);
    let [Note::KeyFileUnusable { problem }] = notes.as_slice() else {
        panic!("{notes:?}");
    };
    assert!(
        matches!(
            problem,
            SideFileProblem::Invalid(SideFileError {
                kind: SideFileKind::KeyFile,
                defect: SideFileDefect::Checksum { .. },
                ..
            })
        ),
        "{problem:?}"
    );
    assert_eq!(problem.name(), "KeyFileChecksum");
    let text = notes[0].to_string();
    assert!(
        text.starts_with(
            "key file unusable: it does not decode (KeyFileChecksum: key file checksum mismatch"
        ),
        "{text}"
    );

    // Too large to be one: not read past the bound.
    std::fs::write(dir.join(KEY_FILE_NAME), vec![0u8; 20_000]).unwrap();
    let (_, notes) = self::notes(&dir);
    assert_eq!(
        notes,
        [Note::KeyFileUnusable {
            problem: SideFileProblem::TooLarge {
                file: SideFileKind::KeyFile,
                len: 20_000
            }
        }]
    );
}

#[test]
fn inspect_key_file_of_another_directory_is_a_note_naming_both() {
    let root = tempfile::tempdir().unwrap();
    let dir = shard(root.path());
    let other = ShardKey::new("acme", "default", "orders", 4);
    std::fs::write(dir.join(KEY_FILE_NAME), encoded(&other)).unwrap();
    let (found, notes) = notes(&dir);
    assert_eq!(found, None);
    assert_eq!(
        notes,
        [Note::KeyFileDisagrees {
            key: other.clone(),
            expected_dir: other.dir_name(),
            dir_name: key().dir_name(),
        }]
    );
}

#[test]
fn inspect_key_name_that_is_a_directory_is_never_opened() {
    let root = tempfile::tempdir().unwrap();
    let dir = shard(root.path());
    std::fs::create_dir(dir.join(KEY_FILE_NAME)).unwrap();
    let (found, notes) = notes(&dir);
    assert_eq!(found, None);
    assert_eq!(
        notes,
        [Note::NotAFile {
            name: KEY_FILE_NAME.into(),
            file_type: FileType::Directory
        }]
    );
    // Not ours: never written over.
    assert!(!write_key_file(&FileSystem::os(), &dir, &key()).unwrap());
    assert!(dir.join(KEY_FILE_NAME).is_dir());
    assert!(!dir.join(KEY_TEMP_FILE_NAME).exists());
    assert_eq!(
        read_key_file(&FileSystem::os(), &dir),
        StoredKey::Unusable(SideFileProblem::NotAFile {
            file: SideFileKind::KeyFile,
            what: NotRegularFile {
                file_type: FileType::Directory,
                via_symlink: false
            }
        })
    );
}

#[test]
fn open_removes_the_key_files_temporary_and_keeps_the_key() {
    let root = tempfile::tempdir().unwrap();
    let dir = shard(root.path());
    assert!(write_key_file(&FileSystem::os(), &dir, &key()).unwrap());
    std::fs::write(dir.join(KEY_TEMP_FILE_NAME), b"half").unwrap();
    let (found, notes) = notes(&dir);
    assert_eq!(found, Some(key()));
    assert_eq!(
        notes,
        [Note::Temporary {
            name: KEY_TEMP_FILE_NAME.into(),
            kind: TemporaryKind::KeyFile
        }]
    );
    let fs = FileSystem::os();
    let lock = ShardLock::acquire(&fs, &dir).unwrap();
    let options = OpenOptions {
        inspect: InspectOptions::default(),
        repair_policy: RepairPolicy::Default,
        use_clean_shutdown: true,
        keep_clean_shutdown: false,
    };
    open_shard(&fs, &dir, "t", &options, &lock).unwrap();
    assert!(!dir.join(KEY_TEMP_FILE_NAME).exists());
    assert_eq!(
        read_key_file(&FileSystem::os(), &dir),
        StoredKey::Key(key())
    );
}

#[test]
fn write_key_file_part_over_the_limit_writes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let long = ShardKey::new("t", "n".repeat(5000), "s", 0);
    let err = write_key_file(&FileSystem::os(), root.path(), &long).unwrap_err();
    assert!(
        matches!(&err, RecoveryError::KeyTooLong { key, source } if matches!(**source, SideFileError { kind: SideFileKind::KeyFile, defect: SideFileDefect::KeyPart { .. }, embedded: None }) && *key == long),
        "{err:?}"
    );
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
}

/// The golden key file and every damaged one under `fixtures/v2/key-file/`:
/// in a shard directory, the golden one is the key and each damaged one a
/// `KeyFileUnusable` note named by its directory, the shard unaffected.
#[test]
fn inspect_key_file_fixtures_read_as_the_readme_says() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v2/key-file");
    let golden = ShardKey::new("acme", "default", "ünï/orders", 3);
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join(golden.dir_name());
    std::fs::create_dir(&dir).unwrap();
    build_shard(&dir, 0, &[3], 64);
    std::fs::copy(fixtures.join(KEY_FILE_NAME), dir.join(KEY_FILE_NAME)).unwrap();
    assert_eq!(notes(&dir), (Some(golden), vec![]));
    let mut variants: Vec<String> = std::fs::read_dir(fixtures.join("damaged"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    variants.sort();
    assert_eq!(variants.len(), 9, "{variants:?}");
    for variant in variants {
        let from = fixtures.join("damaged").join(&variant).join(KEY_FILE_NAME);
        std::fs::copy(&from, dir.join(KEY_FILE_NAME)).unwrap();
        let (key, notes) = notes(&dir);
        assert_eq!(key, None, "{variant}");
        match notes.as_slice() {
            [Note::KeyFileUnusable { problem }] => assert_eq!(problem.name(), variant),
            other => panic!("{variant}: {other:?}"),
        }
    }
}
