//! From facts to an [`Inspection`]: the findings (each classified), the
//! summary of every segment as it will be after the repairs, the notes, and
//! the plan of actions a repair would carry out. Pure: it reads the values
//! [`crate::scan`] measured and decides with [`crate::classify`] and
//! [`crate::location`]; nothing here reads or writes a file.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use felix_format::{CorruptionKind, CorruptionSite, FileKind, ShardKey, file_name};
use felix_segment::SparseIndex;

use crate::classify::{RepairClass, header_damage_class, is_repairable_tail};
use crate::facts::{ScannedSegment, SegmentFacts, SegmentState, ShardFacts};
use crate::inspection::{Inspection, SegmentSummary};
use crate::key_file::StoredKey;
use crate::listing::Listing;
use crate::location::locate;
use crate::report::{Action, Finding, FindingContext, Note};

/// The inspection of the shard directory `dir` (labelled `shard`) that
/// `facts` describe.
pub(crate) fn plan(dir: &Path, shard: &Arc<str>, facts: ShardFacts) -> Inspection {
    let ShardFacts {
        listing,
        clean_shutdown_note,
        key,
        segments,
        clean_newest,
        ..
    } = facts;
    let mut inspection = Inspection {
        dir: dir.to_path_buf(),
        shard: Arc::clone(shard),
        segments: Vec::with_capacity(segments.len()),
        findings: Vec::new(),
        notes: Vec::new(),
        plan: Vec::new(),
        key: None,
        rebuilt: BTreeMap::new(),
        clean_shutdown_present: listing.clean_shutdown,
        clean_newest,
        temporaries: listing
            .temporaries
            .iter()
            .map(|(name, kind)| (dir.join(name), *kind))
            .collect(),
    };
    inspection.notes.extend(clean_shutdown_note);
    inspection.notes.extend(listing.notes());
    if let Some(stored) = key {
        let (key, note) = shard_key(dir, stored);
        inspection.key = key;
        inspection.notes.extend(note);
    }
    let mut previous: Option<(u64, Option<u64>)> = None;
    for segment in segments {
        let id = segment.id;
        let summary = plan_segment(&mut inspection, &listing, segment);
        if let (Some((prev_id, Some(prev_next))), Some(base)) = (previous, summary.base_offset)
            && prev_next != base
        {
            inspection.findings.push(Finding {
                kind: CorruptionKind::OffsetOutOfOrder {
                    expected: prev_next,
                    found: base,
                },
                site: CorruptionSite::new(&**shard, id, 0),
                repair: RepairClass::Never,
                context: FindingContext::OffsetGap {
                    previous_segment: prev_id,
                },
            });
        }
        if !summary.removed {
            previous = Some((id, summary.next_offset));
        }
        inspection.segments.push(summary);
    }
    inspection
}

/// The shard's key from what its key file says, and the note saying why
/// not when it cannot be taken: an unusable file, or one naming a key whose
/// directory name is not the directory's (renamed or copied, or the file
/// belongs elsewhere). A directory whose name cannot be compared (`.`, `/`)
/// takes the key as it is.
fn shard_key(dir: &Path, stored: StoredKey) -> (Option<ShardKey>, Option<Note>) {
    match stored {
        StoredKey::Missing => (None, None),
        StoredKey::Unusable(problem) => (None, Some(Note::KeyFileUnusable { problem })),
        StoredKey::Key(key) => {
            let expected_dir = key.dir_name();
            match dir.file_name().map(|n| n.to_string_lossy()) {
                Some(name) if name != expected_dir.as_str() => (
                    None,
                    Some(Note::KeyFileDisagrees {
                        key,
                        expected_dir,
                        dir_name: name.into_owned(),
                    }),
                ),
                _ => (Some(key), None),
            }
        }
    }
}

/// One segment's findings, notes and actions, and its summary.
fn plan_segment(
    inspection: &mut Inspection,
    listing: &Listing,
    segment: SegmentFacts,
) -> SegmentSummary {
    let SegmentFacts { id, role, state } = segment;
    let site = |position| CorruptionSite::new(&*inspection.shard, id, position);
    let segment_path = inspection
        .dir
        .join(file_name(id, FileKind::Segment).as_str());
    match state {
        SegmentState::Trusted(extent) => SegmentSummary::trusted(extent),
        SegmentState::HeaderDamaged {
            file_len,
            kind,
            abandoned_shape,
        } => {
            let repair = header_damage_class(role, abandoned_shape);
            let context = if abandoned_shape {
                FindingContext::AbandonedSegment {
                    older_segment_exists: role.older_exists,
                }
            } else {
                FindingContext::SegmentHeader
            };
            let site = site(0);
            inspection.findings.push(Finding {
                kind,
                site,
                repair,
                context,
            });
            let removed = repair == RepairClass::Default;
            if removed {
                inspection.plan.push(Action::RemoveSegment {
                    segment: id,
                    path: segment_path,
                    len: file_len,
                });
            }
            SegmentSummary {
                id,
                base_offset: None,
                next_offset: None,
                file_len,
                valid_len: 0,
                newest: role.newest,
                index_ok: false,
                removed,
            }
        }
        SegmentState::Scanned(scanned) => {
            let ScannedSegment {
                base_offset,
                file_len,
                records,
                index,
                tail,
            } = *scanned;
            if let Some(reason) = index.problem {
                inspection.notes.push(Note::IndexUnusable {
                    segment: id,
                    reason,
                });
            }
            if let (Some(damage), Some(tail)) = (records.damage, tail) {
                let located = locate(&damage.kind, &tail);
                let repair = is_repairable_tail(&damage.kind, located.location);
                inspection.findings.push(Finding {
                    kind: damage.kind,
                    site: site(damage.position),
                    repair,
                    context: FindingContext::Record {
                        location: located.location,
                        intact_record_at: located.intact_record_at,
                        tail_all_zero: tail.all_zero(),
                        tail_bytes: file_len - damage.position,
                        unwritten: located.unwritten,
                    },
                });
                debug_assert_eq!(
                    damage.position, records.valid_len,
                    "the walk stops where its damage begins"
                );
                if repair != RepairClass::Never {
                    inspection.plan.push(Action::Truncate {
                        segment: id,
                        path: segment_path,
                        from_len: file_len,
                        to_len: damage.position,
                    });
                }
            }
            // No rebuilt index is written where its name is not a regular
            // file.
            if !index.usable && !listing.unwritable_indexes.contains(&id) {
                inspection.plan.push(Action::RebuildIndex {
                    segment: id,
                    path: inspection.dir.join(file_name(id, FileKind::Index).as_str()),
                    entries: records.entries.len(),
                });
            }
            let known_next = records.damage.is_none() || role.newest;
            let summary = SegmentSummary {
                id,
                base_offset: Some(base_offset),
                next_offset: known_next.then_some(records.next_offset),
                file_len,
                valid_len: records.valid_len,
                newest: role.newest,
                index_ok: index.usable,
                removed: false,
            };
            // The newest segment's index goes to its writer; a rebuilt one
            // to disk.
            if role.newest || !index.usable {
                inspection
                    .rebuilt
                    .insert(id, SparseIndex::from_entries(base_offset, records.entries));
            }
            summary
        }
    }
}
