//! The one decision recovery makes: may this damage be repaired, and on
//! whose authority?
//!
//! The dividing line is whether the damaged record's length is trustworthy
//! and whether the damage is confined to the end of the newest segment —
//! the only place a record can have been mid-write when the process died.
//! Which segment that is, and what a damaged segment header means, are
//! decided here too; where in the newest segment damage lies is
//! [`crate::location`]'s decision. Pure: every input is a value.

use felix_format::CorruptionKind;

/// Where damage was found, as far as repair is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DamageLocation {
    /// In the newest segment, with no intact record anywhere after it.
    NewestConfined,
    /// In the newest segment, but an intact record follows it: something
    /// complete was written after the damage, so it is not a torn write.
    NewestFollowedByIntact,
    /// In the newest segment, where a record header should begin there are
    /// only zeros — and, if an intact record follows, zeros all the way to
    /// it: space whose size reached the disk before its data did. A record
    /// header is never all zeros, a write `fdatasync` covered reads back as
    /// written, and a sync covers every earlier write, so nothing from here
    /// on was ever synced, and so never acknowledged.
    NewestUnwritten,
    /// In the newest segment, the damaged record runs into 4 KiB blocks
    /// (aligned to file position) that read as never written: zeros filling
    /// the blocks that hold its own header or the next one the walk expects,
    /// or zeros from a block boundary inside it to the end of the file. A
    /// sync writes back every block a record touches and a header is never
    /// all zeros, so neither this record nor any after it was ever synced,
    /// whatever follows (see [`crate::UnwrittenBlocks`];
    /// `docs/storage-format.md`, "Never-written blocks", gives the argument
    /// and its one limit).
    NewestUnwrittenBlocks,
    /// In a sealed (older) segment, which was complete and synced before the
    /// next segment was created.
    Sealed,
}

/// Who may authorise a repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RepairClass {
    /// Repaired on every open: provably an unfinished write.
    Default,
    /// Repaired only under [`RepairPolicy::ChecksumTail`]: the damage may
    /// be rot of an acknowledged record.
    OptIn,
    /// Never repaired: recovery fails with the facts instead.
    Never,
}

impl RepairClass {
    /// The name used in reports and JSON: `default`, `opt_in` or `never`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::OptIn => "opt_in",
            Self::Never => "never",
        }
    }
}

/// Which damage a repair may remove: the caller's choice, against which
/// every finding's [`RepairClass`] is weighed.
///
/// ```
/// # use felix_recovery::{RepairClass, RepairPolicy};
/// assert!(RepairPolicy::Default.allows(RepairClass::Default));
/// assert!(!RepairPolicy::Default.allows(RepairClass::OptIn));
/// assert!(RepairPolicy::ChecksumTail.allows(RepairClass::OptIn));
/// assert!(!RepairPolicy::ChecksumTail.allows(RepairClass::Never));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RepairPolicy {
    /// Repair only what is provably an unfinished write
    /// ([`RepairClass::Default`]): what every open does.
    #[default]
    Default,
    /// Also truncate damage confined to the newest segment's tail that may
    /// be rot of an acknowledged record ([`RepairClass::OptIn`]: checksum
    /// failures, out-of-order offsets, impossible lengths), dropping the
    /// records from it on.
    ChecksumTail,
}

impl RepairPolicy {
    /// Whether this policy repairs damage of class `class`.
    pub fn allows(self, class: RepairClass) -> bool {
        match class {
            RepairClass::Default => true,
            RepairClass::OptIn => self == Self::ChecksumTail,
            RepairClass::Never => false,
        }
    }

    /// The name used in reports and JSON: `default` or `checksum_tail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::ChecksumTail => "checksum_tail",
        }
    }
}

/// Decides whether damage of `kind` at `location` may be repaired.
///
/// * Segment-header damage is never repairable: the header is synced before
///   any record lives in the segment, so it is never a torn write.
/// * Damage in a sealed segment, or followed by an intact record, is never
///   repairable — unless it is unwritten space (below).
/// * In the newest segment's confined tail, `Truncated` is repaired by
///   default (a verified header proves the write was unfinished); damage that
///   could be rot of a complete record (`RecordHeaderChecksum`,
///   `RecordChecksum`, `OffsetOutOfOrder`, `RecordTooLarge`) needs opt-in.
/// * In the newest segment, a zero record header (zeros running on to the
///   next intact record, if one follows) is unwritten space left by a power
///   loss and is repaired by default, truncating at its start: every write
///   after the last successful `fdatasync` is unacknowledged, and only those
///   can read back as zeros.
/// * Index problems are not data damage (indexes are rebuilt); they are
///   classed `Never` here so that no caller truncates data because of one.
///
/// ```
/// use felix_format::CorruptionKind;
/// use felix_recovery::{is_repairable_tail, DamageLocation, RepairClass};
///
/// let torn = CorruptionKind::Truncated { needed: 128, available: 118 };
/// assert_eq!(is_repairable_tail(&torn, DamageLocation::NewestConfined), RepairClass::Default);
/// assert_eq!(is_repairable_tail(&torn, DamageLocation::Sealed), RepairClass::Never);
/// ```
pub fn is_repairable_tail(kind: &CorruptionKind, location: DamageLocation) -> RepairClass {
    match location {
        DamageLocation::NewestConfined => {}
        DamageLocation::NewestUnwritten | DamageLocation::NewestUnwrittenBlocks => {
            return match kind {
                // Zeros explain a length the file falls short of and a
                // header that is not all there...
                CorruptionKind::Truncated { .. } | CorruptionKind::RecordHeaderChecksum { .. } => {
                    RepairClass::Default
                }
                // ...and a record whose bytes in never-written blocks read as
                // zeros. (At `NewestUnwritten` the header itself is zeros, so
                // a record with a verified header is never classed there.)
                CorruptionKind::RecordChecksum { .. }
                    if location == DamageLocation::NewestUnwrittenBlocks =>
                {
                    RepairClass::Default
                }
                // A verified header is not zeros, and zeros do not make one
                // name another offset or an impossible length: unwritten
                // space does not explain these, so opt-in, as when confined.
                CorruptionKind::RecordChecksum { .. }
                | CorruptionKind::OffsetOutOfOrder { .. }
                | CorruptionKind::OffsetOverflow { .. }
                | CorruptionKind::RecordTooLarge { .. } => RepairClass::OptIn,
                _ => RepairClass::Never,
            };
        }
        DamageLocation::NewestFollowedByIntact | DamageLocation::Sealed => {
            return RepairClass::Never;
        }
    }
    match kind {
        CorruptionKind::Truncated { .. } => RepairClass::Default,
        CorruptionKind::RecordHeaderChecksum { .. }
        | CorruptionKind::RecordChecksum { .. }
        | CorruptionKind::OffsetOutOfOrder { .. }
        | CorruptionKind::OffsetOverflow { .. }
        | CorruptionKind::RecordTooLarge { .. } => RepairClass::OptIn,
        _ => RepairClass::Never,
    }
}

/// A segment's place in the shard, as far as recovery is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Role {
    /// The highest id: the only file that can be an abandoned creation.
    pub(crate) last: bool,
    /// The segment a writer continues: scanned in full, its confined tail
    /// damage repairable.
    pub(crate) newest: bool,
    /// Whether a segment with a lower id exists.
    pub(crate) older_exists: bool,
}

/// The role of segment `i` of `count`. When the last segment has the shape
/// of an abandoned creation (`last_abandoned`) and an older one exists, the
/// one before it is the newest: it is what a writer continues, so it is
/// scanned in full and its damage classified as the newest segment's.
pub(crate) fn role(i: usize, count: usize, last_abandoned: bool) -> Role {
    let newest_at = if last_abandoned && count > 1 {
        count - 2
    } else {
        count.saturating_sub(1)
    };
    Role {
        last: i + 1 == count,
        newest: i == newest_at,
        older_exists: i > 0,
    }
}

/// The class of damage to a segment's header. The last segment, shorter
/// than its header or exactly a header's length of zeros (`abandoned`: its
/// size reached the disk, its bytes did not), was being created when the
/// process died: the header is synced before any record is written, so no
/// record can live in it, and it is removed by default — when an older
/// segment says where the shard goes on. A complete header with a bad field
/// is damage, never an interrupted creation.
pub(crate) fn header_damage_class(role: Role, abandoned: bool) -> RepairClass {
    if role.last && abandoned && role.older_exists {
        RepairClass::Default
    } else {
        RepairClass::Never
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DamageLocation::{
        NewestConfined, NewestFollowedByIntact, NewestUnwritten, NewestUnwrittenBlocks, Sealed,
    };
    use RepairClass::{Default, Never, OptIn};

    /// Every kind × every location, written out so a change to the rules
    /// shows up as a change to this table.
    #[test]
    fn repair_policy_allows_table() {
        use RepairPolicy as P;
        #[rustfmt::skip]
        let table = [
            (P::Default,      [true, false, false]),
            (P::ChecksumTail, [true, true,  false]),
        ];
        for (policy, expected) in table {
            for (class, allowed) in [Default, OptIn, Never].into_iter().zip(expected) {
                assert_eq!(policy.allows(class), allowed, "{policy:?} {class:?}");
            }
        }
    }

    #[test]
    fn role_table() {
        // (i, count, last abandoned) → (last, newest, older exists)
        #[rustfmt::skip]
        let table = [
            (0, 1, false, (true,  true,  false)),
            (0, 1, true,  (true,  true,  false)), // the only segment stays the newest
            (0, 2, false, (false, false, false)),
            (1, 2, false, (true,  true,  true)),
            (0, 2, true,  (false, true,  false)), // the one before an abandoned creation
            (1, 2, true,  (true,  false, true)),
            (2, 3, true,  (true,  false, true)),
            (1, 3, true,  (false, true,  true)),
        ];
        for (i, count, abandoned, (last, newest, older_exists)) in table {
            assert_eq!(
                role(i, count, abandoned),
                Role {
                    last,
                    newest,
                    older_exists
                },
                "segment {i} of {count}, last abandoned {abandoned}"
            );
        }
    }

    #[test]
    fn header_damage_class_table() {
        // (last, older exists, abandoned shape) → class
        #[rustfmt::skip]
        let table = [
            (true,  true,  true,  Default),
            (true,  false, true,  Never), // the shard's first offset is unknown
            (true,  true,  false, Never), // a complete header with a bad field
            (false, true,  true,  Never), // only the last can be a creation
            (false, false, false, Never),
        ];
        for (last, older_exists, abandoned, class) in table {
            let role = Role {
                last,
                newest: last,
                older_exists,
            };
            assert_eq!(
                header_damage_class(role, abandoned),
                class,
                "{role:?} abandoned {abandoned}"
            );
        }
    }

    #[test]
    fn is_repairable_tail_table() {
        use CorruptionKind as K;
        #[rustfmt::skip]
        let table: &[(K, [RepairClass; 5])] = &[
            //                                                          confined  unwritten blocks    followed  sealed
            (K::Truncated { needed: 128, available: 10 },               [Default, Default, Default, Never, Never]),
            (K::RecordHeaderChecksum { expected: 1, found: 2 },         [OptIn,   Default, Default, Never, Never]),
            (K::RecordChecksum { expected: 1, found: 2 },               [OptIn,   OptIn,   Default, Never, Never]),
            (K::OffsetOutOfOrder { expected: 1, found: 2 },             [OptIn,   OptIn,   OptIn,   Never, Never]),
            (K::OffsetOverflow { found: u64::MAX },                     [OptIn,   OptIn,   OptIn,   Never, Never]),
            (K::RecordTooLarge { payload_len: u32::MAX, max: 1 },       [OptIn,   OptIn,   OptIn,   Never, Never]),
            (K::SegmentMagic { found: 0 },                              [Never,   Never,   Never,   Never, Never]),
            (K::SegmentVersion { found: 1 },                            [Never,   Never,   Never,   Never, Never]),
            (K::SegmentFlags { found: 1 },                              [Never,   Never,   Never,   Never, Never]),
            (K::SegmentHeaderChecksum { expected: 1, found: 2 },        [Never,   Never,   Never,   Never, Never]),
            (K::SegmentReserved { found: 1 },                           [Never,   Never,   Never,   Never, Never]),
            (K::IndexMagic { found: 0 },                                [Never,   Never,   Never,   Never, Never]),
            (K::IndexVersion { found: 0 },                              [Never,   Never,   Never,   Never, Never]),
            (K::IndexFlags { found: 1 },                                [Never,   Never,   Never,   Never, Never]),
            (K::IndexBaseOffset { expected: 0, found: 1 },              [Never,   Never,   Never,   Never, Never]),
            (K::IndexEntryOutOfOrder { entry: 0, offset: 0, position: 0 }, [Never, Never,  Never,   Never, Never]),
        ];
        for (kind, expected) in table {
            for (location, class) in [
                NewestConfined,
                NewestUnwritten,
                NewestUnwrittenBlocks,
                NewestFollowedByIntact,
                Sealed,
            ]
            .into_iter()
            .zip(expected)
            {
                assert_eq!(
                    is_repairable_tail(kind, location),
                    *class,
                    "{} at {location:?}",
                    kind.name()
                );
            }
        }
    }
}
