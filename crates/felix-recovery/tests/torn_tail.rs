//! A crash mid-append leaves the newest segment ending anywhere inside the
//! records being written. Every cut through the newest segment's last three
//! records is swept: each is a `Truncated` tail, repaired on a default open
//! back to the last whole record, and nothing else in the shard changes.

mod common;

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use common::{
    LABEL, RecordAt, assert_reads_back, build_shard, index_entries, index_name, inspect_unchanged,
    materialise, seg_name, seg_path, set_len, shard_layout, snapshot,
};
use felix_format::{CorruptionKind, CorruptionSite, RECORD_HEADER_LEN, SegmentExtent};
use felix_recovery::{
    Action, DamageLocation, Finding, FindingContext, IndexProblem, InspectOptions, Note,
    OpenOptions, RepairClass, open_shard,
};
use felix_segment::{Record, SegmentConfig, SegmentWriter};

/// Two sealed segments and a newest one of six records (offsets 8..14).
const SEGMENTS: &[u64] = &[4, 4, 6];
/// Small enough that the newest segment's index has an entry among its
/// last three records, so cuts also invalidate index entries.
const SPACING: u64 = 64;
const NEWEST: u64 = 2;

struct Pristine {
    files: BTreeMap<String, Vec<u8>>,
    layout: Vec<Vec<RecordAt>>,
}

impl Pristine {
    fn build() -> Self {
        let dir = tempfile::tempdir().unwrap();
        build_shard(dir.path(), 0, SEGMENTS, SPACING);
        let files = snapshot(dir.path());
        let layout = shard_layout(0, SEGMENTS);
        for (id, records) in layout.iter().enumerate() {
            assert_eq!(
                files[&seg_name(id as u64)].len() as u64,
                common::segment_len(records),
                "layout model"
            );
        }
        Self { files, layout }
    }

    fn newest(&self) -> &[RecordAt] {
        &self.layout[NEWEST as usize]
    }

    fn newest_bytes(&self) -> &[u8] {
        &self.files[&seg_name(NEWEST)]
    }

    /// Every length from the start of the third-last record up to the
    /// whole file.
    fn cuts(&self) -> RangeInclusive<u64> {
        let newest = self.newest();
        newest[newest.len() - 3].position..=common::segment_len(newest)
    }

    /// A fresh copy with the newest segment cut to `len` bytes.
    fn cut_copy(&self, len: u64) -> tempfile::TempDir {
        let dir = materialise(&self.files);
        set_len(&seg_path(dir.path(), NEWEST), len);
        dir
    }

    /// The record a cut at `len` tears, or `None` when `len` falls on a
    /// record boundary (or is the whole file).
    fn torn_by(&self, len: u64) -> Option<RecordAt> {
        self.newest()
            .iter()
            .copied()
            .find(|r| r.position < len && len < r.end())
    }

    /// The offset and byte position just past the last whole record of a
    /// newest segment cut to `len`.
    fn last_whole_end(&self, len: u64) -> (u64, u64) {
        let newest = self.newest();
        newest
            .iter()
            .rev()
            .find(|r| r.end() <= len)
            .map_or((newest[0].offset, newest[0].position), |r| {
                (r.offset + 1, r.end())
            })
    }
}

fn options() -> InspectOptions {
    InspectOptions {
        index_spacing_bytes: SPACING,
        full_verify: false,
        ..InspectOptions::default()
    }
}

#[test]
fn inspect_newest_segment_cut_at_every_byte_reports_truncated_at_the_torn_record() {
    let pristine = Pristine::build();
    let (mut torn, mut boundaries) = (0, 0);
    for len in pristine.cuts() {
        let dir = pristine.cut_copy(len);
        let inspection = inspect_unchanged(dir.path(), &options());
        let (next_offset, end) = pristine.last_whole_end(len);
        assert_eq!(inspection.next_offset(), Some(next_offset), "cut at {len}");
        match pristine.torn_by(len) {
            None => {
                boundaries += 1;
                assert_eq!(
                    inspection.findings,
                    [],
                    "a cut at record boundary {len} is no damage"
                );
                assert!(inspection.plan.iter().all(|a| matches!(
                    a,
                    Action::RebuildIndex {
                        segment: NEWEST,
                        ..
                    }
                )));
            }
            Some(r) => {
                torn += 1;
                assert_eq!(r.position, end);
                let available = len - r.position;
                // A cut inside the 28-byte header leaves no header to verify;
                // past it, the verified header promises the record's length.
                let needed = if available < RECORD_HEADER_LEN as u64 {
                    RECORD_HEADER_LEN as u64
                } else {
                    r.len
                };
                let tail = &pristine.newest_bytes()[r.position as usize..len as usize];
                let expected = Finding {
                    kind: CorruptionKind::Truncated { needed, available },
                    site: CorruptionSite::new(LABEL, NEWEST, r.position),
                    repair: RepairClass::Default,
                    context: FindingContext::Record {
                        location: DamageLocation::NewestConfined,
                        intact_record_at: None,
                        // payload_len's leading bytes are zero, so a cut in them
                        // leaves an all-zero tail.
                        tail_all_zero: tail.iter().all(|&b| b == 0),
                        tail_bytes: available,
                        unwritten: None,
                    },
                };
                assert_eq!(inspection.findings, [expected], "cut at {len}");
                assert_eq!(
                    inspection.plan[0],
                    Action::Truncate {
                        segment: NEWEST,
                        path: seg_path(dir.path(), NEWEST),
                        from_len: len,
                        to_len: r.position
                    }
                );
                assert!(
                    inspection.would_open(felix_recovery::RepairPolicy::Default),
                    "Truncated is repaired by default"
                );
            }
        }
    }
    println!(
        "{} cuts: {torn} torn records, {boundaries} record boundaries",
        torn + boundaries
    );
    assert_eq!(boundaries, 4, "three record starts and the end of the file");
}

#[test]
fn open_newest_segment_cut_at_every_byte_repairs_to_last_whole_record() {
    let pristine = Pristine::build();
    let newest = pristine.newest();
    let sealed_expected: Vec<SegmentExtent> = pristine.layout[..NEWEST as usize]
        .iter()
        .enumerate()
        .map(|(id, records)| SegmentExtent {
            id: id as u64,
            base_offset: records[0].offset,
            next_offset: records.last().unwrap().offset + 1,
            len: common::segment_len(records),
        })
        .collect();
    let mut cuts = 0;
    for len in pristine.cuts() {
        cuts += 1;
        let dir = pristine.cut_copy(len);
        let shard = open_shard(
            &felix_io::FileSystem::os(),
            dir.path(),
            LABEL,
            &OpenOptions {
                inspect: options(),
                repair_policy: felix_recovery::RepairPolicy::Default,
                use_clean_shutdown: false,
                keep_clean_shutdown: false,
            },
            &common::lock(dir.path()),
        )
        .unwrap_or_else(|e| panic!("cut at {len}: {e}"));
        let (next_offset, end) = pristine.last_whole_end(len);

        let recovered = shard.newest.as_ref().unwrap();
        assert_eq!(
            (recovered.file.id(), recovered.file.base_offset()),
            (NEWEST, newest[0].offset)
        );
        assert_eq!(
            (recovered.next_offset, recovered.len),
            (next_offset, end),
            "cut at {len}"
        );
        let whole: Vec<RecordAt> = newest.iter().copied().filter(|r| r.end() <= len).collect();
        assert_eq!(
            recovered.index.entries(),
            index_entries(&whole, SPACING),
            "cut at {len}"
        );
        assert_eq!(shard.sealed, sealed_expected);

        let truncations: Vec<&Action> = shard
            .actions
            .iter()
            .filter(|a| matches!(a, Action::Truncate { .. }))
            .collect();
        if pristine.torn_by(len).is_some() {
            let expected = Action::Truncate {
                segment: NEWEST,
                path: seg_path(dir.path(), NEWEST),
                from_len: len,
                to_len: end,
            };
            assert_eq!(truncations, [&expected]);
        } else {
            assert_eq!(
                truncations,
                [] as [&Action; 0],
                "a cut at record boundary {len} is not truncated further"
            );
        }

        // The newest segment is exactly its whole records; nothing else
        // changed except, possibly, the newest segment's index (rebuilt when
        // it named a record that is gone).
        let after = snapshot(dir.path());
        assert_eq!(
            after[&seg_name(NEWEST)],
            pristine.newest_bytes()[..end as usize],
            "cut at {len}"
        );
        for (name, bytes) in &pristine.files {
            if *name != seg_name(NEWEST) && *name != index_name(NEWEST) {
                assert_eq!(&after[name], bytes, "{name} must not change (cut at {len})");
            }
        }
        assert_reads_back(dir.path(), &shard, 0, next_offset);

        // A second open finds a clean shard and does nothing.
        let again = open_shard(
            &felix_io::FileSystem::os(),
            dir.path(),
            LABEL,
            &OpenOptions {
                inspect: options(),
                repair_policy: felix_recovery::RepairPolicy::Default,
                use_clean_shutdown: false,
                keep_clean_shutdown: false,
            },
            &common::lock(dir.path()),
        )
        .unwrap();
        assert_eq!(
            (
                again.inspection.findings.len(),
                again.inspection.notes.len(),
                again.actions.len()
            ),
            (0, 0, 0)
        );
    }
    println!("{cuts} cuts opened");
}

#[test]
fn open_newest_segment_cut_at_record_boundary_modifies_no_record_bytes() {
    let pristine = Pristine::build();
    let newest = pristine.newest();
    let boundaries: Vec<u64> = newest[newest.len() - 3..]
        .iter()
        .map(|r| r.position)
        .chain([common::segment_len(newest)])
        .collect();
    for len in boundaries {
        let dir = pristine.cut_copy(len);
        let shard = open_shard(
            &felix_io::FileSystem::os(),
            dir.path(),
            LABEL,
            &OpenOptions {
                inspect: options(),
                repair_policy: felix_recovery::RepairPolicy::Default,
                use_clean_shutdown: false,
                keep_clean_shutdown: false,
            },
            &common::lock(dir.path()),
        )
        .unwrap();
        assert_eq!(shard.inspection.findings, []);
        // Only an index entry naming a record past the cut is a reason to
        // touch anything, and that is a note, never damage.
        for note in &shard.inspection.notes {
            assert!(
                matches!(
                    note,
                    Note::IndexUnusable {
                        segment: NEWEST,
                        reason: IndexProblem::Invalid(CorruptionKind::IndexEntryOutOfOrder { .. })
                    }
                ),
                "{note}"
            );
        }
        assert!(shard.actions.iter().all(|a| matches!(
            a,
            Action::RebuildIndex {
                segment: NEWEST,
                ..
            }
        )));
        assert_eq!(
            std::fs::read(seg_path(dir.path(), NEWEST)).unwrap(),
            pristine.newest_bytes()[..len as usize]
        );
        let (next_offset, end) = pristine.last_whole_end(len);
        assert_eq!(end, len);
        assert_eq!(shard.newest.as_ref().unwrap().next_offset, next_offset);
    }
}

/// A crash during the first append to a fresh segment: whatever part of
/// its only record reached the disk, the segment is cut back to its header
/// and continues as an empty newest segment.
#[test]
fn open_newest_segment_only_record_torn_leaves_empty_writable_segment() {
    let dir = tempfile::tempdir().unwrap();
    build_shard(dir.path(), 0, &[2, 1], SPACING);
    let files = snapshot(dir.path());
    let only = shard_layout(0, &[2, 1])[1][0];
    for len in only.position + 1..only.end() {
        let dir = materialise(&files);
        set_len(&seg_path(dir.path(), 1), len);
        let shard = open_shard(
            &felix_io::FileSystem::os(),
            dir.path(),
            LABEL,
            &OpenOptions::default(),
            &common::lock(dir.path()),
        )
        .unwrap_or_else(|e| panic!("cut at {len}: {e}"));
        assert!(matches!(
            shard.inspection.findings[..],
            [Finding {
                kind: CorruptionKind::Truncated { .. },
                repair: RepairClass::Default,
                ..
            }]
        ));
        let newest = shard.newest.unwrap();
        assert_eq!(
            (newest.file.id(), newest.next_offset, newest.len),
            (1, 2, only.position),
            "cut at {len}"
        );
        assert_eq!(newest.index.entries(), [], "cut at {len}");
        assert_eq!(
            std::fs::read(seg_path(dir.path(), 1)).unwrap(),
            files[&seg_name(1)][..only.position as usize]
        );

        let config = SegmentConfig {
            index_spacing_bytes: SPACING,
            preallocate_bytes: None,
        };
        let mut writer = SegmentWriter::resume(
            newest.file,
            newest.next_offset,
            newest.len,
            newest.index,
            newest.time_index,
            config,
        )
        .unwrap();
        writer
            .append(&[Record::new(2, common::payload(2))])
            .unwrap();
        writer.sync().unwrap();
        drop(writer);
        let again = open_shard(
            &felix_io::FileSystem::os(),
            dir.path(),
            LABEL,
            &OpenOptions::default(),
            &common::lock(dir.path()),
        )
        .unwrap();
        assert_eq!(
            (
                again.inspection.findings.len(),
                again.newest.as_ref().unwrap().next_offset
            ),
            (0, 3),
            "cut at {len}"
        );
        assert_reads_back(dir.path(), &again, 0, 3);
    }
}
