//! The shared frame: its bounds per kind, its text and names for every
//! kind, and an embedded file's error chain.
#![allow(clippy::indexing_slicing, clippy::unwrap_used)]

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::error::Error;

use super::*;
use crate::ShardKey;

const KINDS: [SideFileKind; 8] = [
    SideFileKind::CleanShutdown,
    SideFileKind::KeyFile,
    SideFileKind::LogStart,
    SideFileKind::RaftState,
    SideFileKind::RaftSnapshot,
    SideFileKind::TimeIndex,
    SideFileKind::Epochs,
    SideFileKind::Manifest,
];

#[test]
fn layout_max_len_is_each_kinds_longest_file() {
    let max = |kind: SideFileKind| kind.layout().max_len();
    assert_eq!(
        max(SideFileKind::CleanShutdown),
        crate::clean::MAX_CLEAN_SHUTDOWN_FILE_LEN
    );
    assert_eq!(
        max(SideFileKind::KeyFile),
        crate::key_file::MAX_KEY_FILE_LEN
    );
    assert_eq!(
        max(SideFileKind::LogStart),
        crate::log_start::LOG_START_FILE_LEN
    );
    assert_eq!(
        max(SideFileKind::RaftState),
        crate::raft_state::RAFT_STATE_FILE_LEN
    );
    assert_eq!(
        max(SideFileKind::RaftSnapshot),
        crate::raft_snapshot::MAX_RAFT_SNAPSHOT_FILE_LEN
    );
    assert_eq!(
        max(SideFileKind::Epochs),
        crate::epochs::MAX_EPOCHS_FILE_LEN
    );
    assert_eq!(
        max(SideFileKind::Manifest),
        crate::tier_manifest::MANIFEST_HEADER_LEN + crate::tier_manifest::MAX_MANIFEST_BODY_LEN
    );
}

#[test]
fn layout_kind_is_the_kind_it_is_found_under() {
    for kind in KINDS {
        assert_eq!(kind.layout().kind, kind);
        assert_eq!(kind.name(), kind.layout().name);
    }
}

#[test]
fn unread_name_is_the_kind_name_then_the_finding_for_every_kind() {
    for kind in KINDS {
        for (unread, suffix) in [
            (SideFileUnread::TooLarge, "TooLarge"),
            (SideFileUnread::NotAFile, "NotAFile"),
            (SideFileUnread::Unreadable, "Unreadable"),
        ] {
            assert_eq!(kind.unread_name(unread), format!("{}{suffix}", kind.name()));
        }
    }
    assert_eq!(
        SideFileKind::RaftState.unread_name(SideFileUnread::NotAFile),
        "RaftStateNotAFile"
    );
}

/// Every frame defect each kind can report, as its name and its text:
/// the text is what reports and the fixtures' notes show, so a change to
/// it is reviewed here.
#[test]
fn side_file_error_name_and_text_for_every_kind_and_frame_defect() {
    let mut text = String::new();
    for kind in KINDS {
        let layout = kind.layout();
        let first = layout.versions[0];
        let mut defects: Vec<SideFileDefect> = Vec::new();
        match layout.body {
            SideFileBody::None => defects.push(SideFileDefect::Length { len: 9 }),
            _ => defects.push(SideFileDefect::Short {
                len: 3,
                header_len: first.header_len,
            }),
        }
        defects.push(SideFileDefect::Magic {
            expected: layout.magic,
            found: 0x464C_5347,
        });
        defects.push(SideFileDefect::Version {
            expected: first.version,
            found: 7,
        });
        if layout.has_flags {
            defects.push(SideFileDefect::Flags {
                found: 0x0020,
                known: first.known_flags,
            });
        }
        match layout.body {
            SideFileBody::None => {}
            SideFileBody::Bytes { max, .. } => {
                defects.push(SideFileDefect::BodyTooLong {
                    declared: u32::MAX,
                    max,
                });
                defects.push(SideFileDefect::LengthMismatch {
                    declared: 40,
                    found: 39,
                });
            }
            SideFileBody::Entries { min, max, .. } => {
                // A time index's count is bounded by its extent, not by
                // its layout (`EntriesForRecords`).
                if max < u32::MAX {
                    defects.push(SideFileDefect::Count {
                        count: max + 1,
                        min,
                        max,
                    });
                }
                defects.push(SideFileDefect::CountMismatch {
                    count: 2,
                    expected: 32,
                    found: 31,
                });
            }
        }
        defects.push(SideFileDefect::Checksum {
            expected: 0x1234_5678,
            found: 0x9abc_def0,
        });
        for defect in defects {
            let err = SideFileError::new(kind, defect);
            text.push_str(&format!("{}: {err}\n", err.name()));
        }
    }
    insta::assert_snapshot!(text);
}

#[test]
fn decode_manifest_damaged_key_is_manifest_key_and_its_source_is_the_key_error() {
    let manifest = crate::tier_manifest::Manifest {
        seq: 1,
        key: ShardKey::new("t", "n", "s", 0),
        start_offset: 0,
        segments: Vec::new(),
    };
    let mut bytes = Vec::new();
    crate::tier_manifest::encode_manifest(&manifest, &mut bytes).unwrap();
    // The embedded key file's magic (body byte 4), resealed so that only
    // the key's own checks see it.
    bytes[24 + 4] = b'X';
    crate::tier_manifest::MANIFEST_LAYOUT.seal(&mut bytes);
    let err = crate::tier_manifest::decode_manifest(&bytes).unwrap_err();
    let key = EmbeddedError {
        kind: SideFileKind::KeyFile,
        defect: SideFileDefect::Magic {
            expected: crate::key_file::KEY_FILE_MAGIC,
            found: u32::from_be_bytes(*b"XLSK"),
        },
    };
    assert_eq!(
        err,
        SideFileError {
            kind: SideFileKind::Manifest,
            defect: SideFileDefect::EmbeddedKey,
            embedded: Some(key),
        }
    );
    assert_eq!(err.name(), "ManifestKey");
    assert_eq!(err.to_string(), "manifest shard key is invalid");
    assert_eq!(
        err.source().map(|s| format!("{s}")),
        Some(String::from(
            "key file magic is 0x584c534b, expected 0x464c534b (FLSK)"
        ))
    );
    assert_eq!(key.name(), "KeyFileMagic");
}

#[test]
fn open_of_a_fixed_length_file_takes_the_version_its_length_names() {
    let layout = &crate::raft_state::RAFT_STATE_LAYOUT;
    let v1 = crate::raft_state::encode_raft_state_v1(&crate::raft_state::RaftState {
        log_encoding: crate::raft_state::RAFT_LOG_ENCODING_POSTCARD,
        ..crate::raft_state::RaftState::default()
    })
    .unwrap();
    let frame = layout.decode(&v1).unwrap();
    assert_eq!(
        (frame.version, frame.header.len(), frame.body.len()),
        (1, 44, 0)
    );
    let v2 = crate::raft_state::encode_raft_state(&crate::raft_state::RaftState::default());
    let frame = layout.decode(&v2).unwrap();
    assert_eq!((frame.version, frame.header.len()), (2, 64));
}
