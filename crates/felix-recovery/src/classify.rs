//! The one decision recovery makes: may this damage be repaired, and on
//! whose authority?
//!
//! The dividing line is whether the damaged record's length is trustworthy
//! and whether the damage is confined to the end of the newest segment —
//! the only place a record can have been mid-write when the process died.

use felix_format::CorruptionKind;

/// Where damage was found, as far as repair is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DamageLocation {
    /// In the newest segment, with no intact record anywhere after it.
    NewestConfined,
    /// In the newest segment, but an intact record follows it: something
    /// complete was written after the damage, so it is not a torn write.
    NewestFollowedByIntact,
    /// In a sealed (older) segment, which was complete and synced before the
    /// next segment was created.
    Sealed,
}

/// Who may authorise a repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RepairClass {
    /// Repaired on every open: provably an unfinished write.
    Default,
    /// Repaired only when the caller opts in (`repair_checksum_tail`): the
    /// damage may be rot of an acknowledged record.
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

/// Decides whether damage of `kind` at `location` may be repaired.
///
/// * Segment-header damage is never repairable: the header is synced before
///   any record lives in the segment, so it is never a torn write.
/// * Damage in a sealed segment, or followed by an intact record, is never
///   repairable.
/// * In the newest segment's confined tail, `Truncated` is repaired by
///   default (a verified header proves the write was unfinished); damage that
///   could be rot of a complete record (`RecordHeaderChecksum`,
///   `RecordChecksum`, `OffsetOutOfOrder`, `RecordTooLarge`) needs opt-in.
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
    if location != DamageLocation::NewestConfined {
        return RepairClass::Never;
    }
    match kind {
        CorruptionKind::Truncated { .. } => RepairClass::Default,
        CorruptionKind::RecordHeaderChecksum { .. }
        | CorruptionKind::RecordChecksum { .. }
        | CorruptionKind::OffsetOutOfOrder { .. }
        | CorruptionKind::RecordTooLarge { .. } => RepairClass::OptIn,
        _ => RepairClass::Never,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DamageLocation::{NewestConfined, NewestFollowedByIntact, Sealed};
    use RepairClass::{Default, Never, OptIn};

    /// Every kind × every location, written out so a change to the rules
    /// shows up as a change to this table.
    #[test]
    fn is_repairable_tail_table() {
        use CorruptionKind as K;
        #[rustfmt::skip]
        let table: &[(K, [RepairClass; 3])] = &[
            //                                                          confined  followed  sealed
            (K::Truncated { needed: 128, available: 10 },               [Default, Never, Never]),
            (K::RecordHeaderChecksum { expected: 1, found: 2 },         [OptIn,   Never, Never]),
            (K::RecordChecksum { expected: 1, found: 2 },               [OptIn,   Never, Never]),
            (K::OffsetOutOfOrder { expected: 1, found: 2 },             [OptIn,   Never, Never]),
            (K::RecordTooLarge { payload_len: u32::MAX, max: 1 },       [OptIn,   Never, Never]),
            (K::SegmentMagic { found: 0 },                              [Never,   Never, Never]),
            (K::SegmentVersion { found: 1 },                            [Never,   Never, Never]),
            (K::SegmentFlags { found: 1 },                              [Never,   Never, Never]),
            (K::SegmentHeaderChecksum { expected: 1, found: 2 },        [Never,   Never, Never]),
            (K::SegmentReserved { found: 1 },                           [Never,   Never, Never]),
            (K::IndexMagic { found: 0 },                                [Never,   Never, Never]),
            (K::IndexVersion { found: 0 },                              [Never,   Never, Never]),
            (K::IndexFlags { found: 1 },                                [Never,   Never, Never]),
            (K::IndexBaseOffset { expected: 0, found: 1 },              [Never,   Never, Never]),
            (K::IndexEntryOutOfOrder { entry: 0, offset: 0, position: 0 }, [Never, Never, Never]),
        ];
        for (kind, expected) in table {
            for (location, class) in [NewestConfined, NewestFollowedByIntact, Sealed]
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
