//! The full-depth walk of a whole sealed segment's bytes, fed in pieces as
//! they are read: an upload checks each part before it leaves the disk, and
//! a remote check each piece as it arrives, so neither holds a segment in
//! memory.

use felix_format::{
    CorruptionKind, CursorStep, RecordCursor, SEGMENT_HEADER_LEN, ScanDepth, SegmentHeader,
};

/// Walks every record of a segment of `len` bytes at full depth (the
/// header, then each record's header and payload checksums and offsets),
/// fed its bytes in order in pieces of any size.
///
/// A record that runs from one piece into the next is gathered into a
/// buffer of its own (so a walk holds at most one record besides the piece
/// in hand); every other record is checked in place. Damage is final: every
/// later `feed` and `finish` report it again.
#[derive(Debug)]
pub(crate) struct SegmentWalk {
    len: u64,
    /// Bytes fed so far.
    fed: u64,
    /// Set once the segment header has been read.
    cursor: Option<RecordCursor>,
    /// The bytes from the cursor's position that the pieces fed so far
    /// hold but that do not yet make a whole record (or header).
    carry: Vec<u8>,
    /// What the cursor last said it needs from its position: a walk that
    /// ends short reports it.
    needed: u64,
    /// The first damage found.
    damage: Option<(u64, CorruptionKind)>,
}

/// A carry buffer grown past this is given back once its record is read:
/// a record can be up to `MAX_PAYLOAD_BYTES`, and one such record must not
/// keep its buffer for the rest of the walk.
const CARRY_KEPT: usize = 1 << 20;

impl SegmentWalk {
    /// A walk of a segment of `len` bytes.
    pub(crate) fn new(len: u64) -> Self {
        SegmentWalk {
            len,
            fed: 0,
            cursor: None,
            carry: Vec::new(),
            needed: SEGMENT_HEADER_LEN as u64,
            damage: None,
        }
    }

    /// Walks the records `piece` completes. Pieces past `len` bytes in all
    /// are not the segment's: only the first `len` are walked. Returns where
    /// and how the segment is damaged (and the same again on every later
    /// call once it is).
    pub(crate) fn feed(&mut self, piece: &[u8]) -> Result<(), (u64, CorruptionKind)> {
        if let Some(damage) = self.damage {
            return Err(damage);
        }
        let walked = self.walk(piece);
        if let Err(damage) = walked {
            self.damage = Some(damage);
        }
        walked
    }

    fn walk(&mut self, piece: &[u8]) -> Result<(), (u64, CorruptionKind)> {
        let room = usize::try_from(self.len - self.fed).unwrap_or(usize::MAX);
        let mut piece = piece.get(..room.min(piece.len())).unwrap_or_default();
        self.fed += piece.len() as u64;
        let carry = &mut self.carry;
        let last_needed = &mut self.needed;
        let cursor = match self.cursor.as_mut() {
            Some(cursor) => cursor,
            None => {
                // The header first, gathered if the first piece is short.
                let (head, rest) = piece.split_at(gather(carry, SEGMENT_HEADER_LEN, piece));
                carry.extend_from_slice(head);
                if carry.len() < SEGMENT_HEADER_LEN {
                    return Ok(());
                }
                let header = SegmentHeader::decode(carry).map_err(|k| (0, k))?;
                carry.clear();
                piece = rest;
                self.cursor.insert(RecordCursor::new(
                    SEGMENT_HEADER_LEN as u64,
                    header.base_offset,
                    self.len,
                    ScanDepth::Full,
                ))
            }
        };
        // A record begun in an earlier piece: complete it from this one.
        // The carry starts at the cursor's position and is gathered up to
        // what the cursor says it needs, so a record read from it uses it
        // all.
        while !carry.is_empty() {
            match cursor.step(carry) {
                CursorStep::NeedBytes { needed } => {
                    *last_needed = needed;
                    let needed = usize::try_from(needed).unwrap_or(usize::MAX);
                    let (head, rest) = piece.split_at(gather(carry, needed, piece));
                    carry.extend_from_slice(head);
                    piece = rest;
                    if carry.len() < needed {
                        return Ok(()); // the piece ended first
                    }
                }
                CursorStep::Record(_) => {
                    if carry.capacity() > CARRY_KEPT {
                        *carry = Vec::new();
                    } else {
                        carry.clear();
                    }
                }
                CursorStep::End | CursorStep::Declined { .. } => return Ok(()),
                CursorStep::Damage(d) => return Err((d.position, d.kind)),
            }
        }
        // The rest of the piece, in place; a record it does not finish is
        // carried.
        let piece_start = self.fed - piece.len() as u64;
        loop {
            // The cursor is never behind the piece: the carry (empty here)
            // held every byte before it.
            let at = cursor
                .position()
                .checked_sub(piece_start)
                .and_then(|at| usize::try_from(at).ok())
                .unwrap_or(usize::MAX);
            let here = piece.get(at..).unwrap_or_default();
            match cursor.step(here) {
                CursorStep::Record(_) => {}
                CursorStep::NeedBytes { needed } => {
                    *last_needed = needed;
                    carry.extend_from_slice(here);
                    return Ok(());
                }
                CursorStep::End | CursorStep::Declined { .. } => return Ok(()),
                CursorStep::Damage(d) => return Err((d.position, d.kind)),
            }
        }
    }

    /// Ends the walk once all `len` bytes were fed: one past the last
    /// record's offset. Fewer bytes fed than `len` is a truncated segment:
    /// `Truncated` at the record (or header) it cut, with the bytes that
    /// record needs and those there were.
    pub(crate) fn finish(&self) -> Result<u64, (u64, CorruptionKind)> {
        if let Some(damage) = self.damage {
            return Err(damage);
        }
        let truncated = |position: u64| {
            Err((
                position,
                CorruptionKind::Truncated {
                    needed: self.needed,
                    available: self.fed.saturating_sub(position),
                },
            ))
        };
        match &self.cursor {
            // Not even the segment header arrived whole.
            None => truncated(0),
            Some(cursor) if self.fed < self.len => truncated(cursor.position()),
            // Every byte fed and no damage: the cursor checked its end, so
            // the records reached it.
            Some(cursor) => Ok(cursor.next_offset()),
        }
    }
}

/// How many bytes of `piece` bring `carry` to `needed`.
fn gather(carry: &[u8], needed: usize, piece: &[u8]) -> usize {
    needed.saturating_sub(carry.len()).min(piece.len())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use felix_format::{RECORD_HEADER_LEN, encode_record_header};
    use proptest::prelude::*;

    /// A segment at base offset 100 holding records of these payload
    /// lengths, and each record's position.
    fn segment(lens: &[usize]) -> (Vec<u8>, Vec<u64>) {
        let mut bytes = SegmentHeader::new(100, 1).encode().to_vec();
        let mut at = Vec::new();
        for (i, len) in lens.iter().enumerate() {
            at.push(bytes.len() as u64);
            let payload: Vec<u8> = (0..*len).map(|b| (b + i) as u8).collect();
            let offset = 100 + i as u64;
            bytes.extend_from_slice(&encode_record_header(offset, 5, &payload).unwrap());
            bytes.extend_from_slice(&payload);
        }
        (bytes, at)
    }

    /// Feeds `bytes` cut at `cuts` (positions, any order) and finishes.
    fn walk_in_pieces(bytes: &[u8], cuts: &[usize]) -> Result<u64, (u64, CorruptionKind)> {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.push(0);
        cuts.push(bytes.len());
        cuts.sort_unstable();
        let mut walk = SegmentWalk::new(bytes.len() as u64);
        for pair in cuts.windows(2) {
            walk.feed(&bytes[pair[0]..pair[1]])?;
        }
        walk.finish()
    }

    #[test]
    fn a_whole_segment_in_one_piece_ends_one_past_its_last_record() {
        let (bytes, _) = segment(&[3, 0, 40]);
        assert_eq!(walk_in_pieces(&bytes, &[]), Ok(103));
    }

    #[test]
    fn a_walk_fed_fewer_bytes_than_the_segment_is_truncated_at_the_record_it_cut() {
        let (bytes, at) = segment(&[10, 20, 10]);
        // Cut inside the middle record, in two pieces: the record needs its
        // own length, not the rest of the segment.
        let cut = at[1] as usize + RECORD_HEADER_LEN + 5;
        let mut walk = SegmentWalk::new(bytes.len() as u64);
        walk.feed(&bytes[..at[1] as usize + 3]).unwrap();
        walk.feed(&bytes[at[1] as usize + 3..cut]).unwrap();
        assert_eq!(
            walk.finish(),
            Err((
                at[1],
                CorruptionKind::Truncated {
                    needed: (RECORD_HEADER_LEN + 20) as u64,
                    available: (RECORD_HEADER_LEN + 5) as u64,
                }
            ))
        );
        // Cut at a record boundary: the next record's header is needed.
        let mut at_boundary = SegmentWalk::new(bytes.len() as u64);
        at_boundary.feed(&bytes[..at[2] as usize]).unwrap();
        assert_eq!(
            at_boundary.finish(),
            Err((
                at[2],
                CorruptionKind::Truncated {
                    needed: RECORD_HEADER_LEN as u64,
                    available: 0,
                }
            ))
        );
        // Cut inside the segment header.
        let mut short = SegmentWalk::new(bytes.len() as u64);
        short.feed(&bytes[..5]).unwrap();
        assert_eq!(
            short.finish(),
            Err((
                0,
                CorruptionKind::Truncated {
                    needed: SEGMENT_HEADER_LEN as u64,
                    available: 5,
                }
            ))
        );
    }

    #[test]
    fn damage_is_reported_again_by_every_later_feed_and_by_finish() {
        let (mut bytes, at) = segment(&[10, 10, 10]);
        let flipped = at[1] as usize + RECORD_HEADER_LEN + 2;
        bytes[flipped] ^= 1;
        let mut walk = SegmentWalk::new(bytes.len() as u64);
        let first = walk.feed(&bytes[..flipped + 20]).unwrap_err();
        assert!(matches!(
            first,
            (p, CorruptionKind::RecordChecksum { .. }) if p == at[1]
        ));
        assert_eq!(walk.feed(&bytes[flipped + 20..]), Err(first));
        assert_eq!(walk.finish(), Err(first));
    }

    #[test]
    fn a_record_larger_than_the_kept_carry_walks_and_its_buffer_is_given_back() {
        let (bytes, _) = segment(&[10, CARRY_KEPT * 2, 10]);
        let mut walk = SegmentWalk::new(bytes.len() as u64);
        for piece in bytes.chunks(64 << 10) {
            walk.feed(piece).unwrap();
        }
        assert_eq!(walk.finish(), Ok(103));
        assert!(walk.carry.capacity() <= CARRY_KEPT);
    }

    #[test]
    fn bytes_past_the_segments_length_are_not_walked() {
        let (mut bytes, _) = segment(&[8, 8]);
        let len = bytes.len() as u64;
        bytes.extend_from_slice(&[0xAB; 50]);
        let mut walk = SegmentWalk::new(len);
        walk.feed(&bytes).unwrap();
        assert_eq!(walk.finish(), Ok(102));
    }

    proptest! {
        /// However the bytes are cut, the walk finds what one whole piece
        /// finds: the end of a sound segment, or the damaged record's
        /// position and kind.
        #[test]
        fn pieces_of_any_size_walk_as_the_whole_segment(
            lens in proptest::collection::vec(0usize..300, 1..12),
            cuts in proptest::collection::vec(any::<usize>(), 0..20),
            flip in proptest::option::of((any::<usize>(), 0u8..8)),
        ) {
            let (mut bytes, at) = segment(&lens);
            let whole = walk_in_pieces(&bytes, &[]);
            prop_assert_eq!(whole, Ok(100 + lens.len() as u64));
            prop_assert_eq!(walk_in_pieces(&bytes, &cuts), whole);
            if let Some((byte, bit)) = flip {
                // Damage inside a record: found at that record.
                let byte = SEGMENT_HEADER_LEN + byte % (bytes.len() - SEGMENT_HEADER_LEN);
                bytes[byte] ^= 1 << bit;
                let whole = walk_in_pieces(&bytes, &[]);
                let record = at.iter().rev().find(|p| **p as usize <= byte).copied().unwrap();
                prop_assert!(
                    matches!(whole, Err((position, _)) if position == record),
                    "{:?} for a flip at {} in the record at {}", whole, byte, record
                );
                prop_assert_eq!(walk_in_pieces(&bytes, &cuts), whole);
            }
        }
    }
}
