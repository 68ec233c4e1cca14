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

use crate::log_start::StoredLogStart;
use crate::raft_state::{StoredRaftSnapshot, StoredRaftState};

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
        trusted_clean_shutdown,
        clean_shutdown_note,
        key,
        log_start,
        raft_state,
        raft_snapshot,
        segments,
        clean_newest,
    } = facts;
    let next_segment_id = listing
        .segments
        .last()
        .map_or(Some(0), |last| last.checked_add(1))
        .map(|next| next.max(log_start.start().map_or(0, |s| s.first_segment_id)));
    let mut inspection = Inspection {
        dir: dir.to_path_buf(),
        shard: Arc::clone(shard),
        segments: Vec::with_capacity(segments.len()),
        findings: Vec::new(),
        notes: Vec::new(),
        plan: Vec::new(),
        key: None,
        log_start: log_start.start(),
        rebuilt: BTreeMap::new(),
        time_indexes: BTreeMap::new(),
        trusted_clean_shutdown,
        next_segment_id,
        clean_shutdown_present: listing.clean_shutdown,
        clean_newest,
        temporaries: listing
            .temporaries
            .iter()
            .map(|(name, kind)| (dir.join(name), *kind))
            .collect(),
        leftover_indexes: listing
            .leftover_indexes
            .iter()
            .map(|name| dir.join(name))
            .collect(),
    };
    inspection.notes.extend(clean_shutdown_note);
    inspection.notes.extend(listing.notes());
    if let Some(stored) = key {
        let (key, note) = shard_key(dir, stored);
        inspection.key = key;
        inspection.notes.extend(note);
    }
    if let StoredLogStart::Unusable(problem) = log_start {
        inspection.notes.push(Note::LogStartUnusable { problem });
    }
    if let Some(StoredRaftState::Unusable(problem)) = raft_state {
        inspection.notes.push(Note::RaftStateUnusable { problem });
    }
    if let Some(StoredRaftSnapshot::Unusable(problem)) = raft_snapshot {
        inspection
            .notes
            .push(Note::RaftSnapshotUnusable { problem });
    }
    // Segments below the one the log-start file names are not part of the
    // log (a deletion of records or a reset left them): planned for removal,
    // never judged against the segments after them.
    let first_id = log_start.start().map(|s| s.first_segment_id);
    let mut below = Vec::new();
    let mut previous: Option<(u64, Option<u64>)> = None;
    for segment in segments {
        let id = segment.id;
        let summary = plan_segment(&mut inspection, &listing, segment);
        if first_id.is_some_and(|first| id < first) {
            if !summary.removed {
                below.push(id);
            }
            inspection.segments.push(summary);
            continue;
        }
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
    if let Some(start) = log_start.start() {
        // A start past the records' end: a crash lost records written after
        // them (or a reset was cut short). The log begins at the start,
        // empty: everything left lies below it.
        if let Some(next_offset) = inspection.next_offset()
            && start.start_offset > next_offset
        {
            inspection.notes.push(Note::LogStartPastEnd {
                start_offset: start.start_offset,
                next_offset,
            });
            below.extend(inspection.live_segments().map(|s| s.id));
        }
        discard_below_start(&mut inspection, &below, start.start_offset);
    }
    inspection
}

/// Plans the removal of the segments `ids`, which lie wholly below the log
/// start: whatever else was found or planned for them no longer matters
/// (their damage cannot block an open, their indexes are not rebuilt).
fn discard_below_start(inspection: &mut Inspection, ids: &[u64], start_offset: u64) {
    if ids.is_empty() {
        return;
    }
    inspection
        .findings
        .retain(|f| !ids.contains(&f.site.segment));
    inspection.plan.retain(|action| {
        let segment = match action {
            Action::Truncate { segment, .. }
            | Action::RemoveSegment { segment, .. }
            | Action::RebuildIndex { segment, .. }
            | Action::RebuildTimeIndex { segment, .. }
            | Action::RemoveBelowLogStart { segment, .. } => *segment,
        };
        !ids.contains(&segment)
    });
    for &id in ids {
        inspection.rebuilt.remove(&id);
        inspection.time_indexes.remove(&id);
    }
    let dir = inspection.dir.clone();
    for summary in inspection
        .segments
        .iter_mut()
        .filter(|s| ids.contains(&s.id))
    {
        summary.removed = true;
        inspection.plan.push(Action::RemoveBelowLogStart {
            segment: summary.id,
            path: dir.join(file_name(summary.id, FileKind::Segment).as_str()),
            len: summary.file_len,
            start_offset,
        });
    }
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
                time_index,
                tail,
            } = *scanned;
            if let Some(reason) = time_index {
                inspection.notes.push(Note::TimeIndexUnusable {
                    segment: id,
                    reason,
                });
            }
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
            // The newest segment's time index goes to its writer; a sealed
            // one whose file is wrong is written again (not where its name
            // is not a regular file).
            if let Some(built) = records
                .time_index
                .filter(|_| role.newest || time_index.is_some())
            {
                if !role.newest && !listing.unwritable_time_indexes.contains(&id) {
                    let sealed = built.sealed();
                    inspection.plan.push(Action::RebuildTimeIndex {
                        segment: id,
                        path: inspection
                            .dir
                            .join(file_name(id, FileKind::TimeIndex).as_str()),
                        entries: sealed.entries().len(),
                    });
                    inspection.time_indexes.insert(id, sealed);
                } else if role.newest {
                    inspection.time_indexes.insert(id, built);
                }
            }
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
