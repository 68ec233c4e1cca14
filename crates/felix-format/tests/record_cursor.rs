//! `RecordCursor`: the one walk over a segment's records gives the verdict
//! the record decoders give, on any bytes, however they are fed to it.
//!
//! The reference below is the walk every reader used to write for itself
//! (recovery's scan, the segment read, `dump`), built from the decoders:
//! header CRC and length bound, offset sequence, length against the bytes,
//! record CRC — plus the one rule the old walks lacked, that no record takes
//! offset `u64::MAX` (they wrapped, or panicked in a debug build).

use felix_format::{
    CorruptionKind, CursorStep, Damage, RECORD_HEADER_LEN, RecordCursor, ScanDepth, SliceRecords,
    check_record, decode_record_header, encode_record_header,
};
use proptest::prelude::*;

/// What a walk saw: every record's (offset, position, payload when read),
/// the damage it stopped at, and where it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Verdict {
    records: Vec<(u64, u64, Option<Vec<u8>>)>,
    damage: Option<Damage>,
    next_offset: u64,
    position: u64,
}

/// The walk written out from the decoders, as the readers had it.
fn reference(file: &[u8], start: u64, base: u64, depth: ScanDepth) -> Verdict {
    let len = file.len() as u64;
    let (mut position, mut offset) = (start, base);
    let mut records = Vec::new();
    let damage = loop {
        if position == len {
            break None;
        }
        let at = usize::try_from(position).unwrap();
        let damage = |kind| Some(Damage { kind, position });
        if len - position < RECORD_HEADER_LEN as u64 {
            break damage(CorruptionKind::Truncated {
                needed: RECORD_HEADER_LEN as u64,
                available: len - position,
            });
        }
        let header = match decode_record_header(&file[at..]) {
            Ok(header) => header,
            Err(kind) => break damage(kind),
        };
        if let Err(kind) = header.check_offset(offset) {
            break damage(kind);
        }
        if header.offset == u64::MAX {
            break damage(CorruptionKind::OffsetOverflow { found: u64::MAX });
        }
        let total = header.encoded_len();
        if total > len - position {
            break damage(CorruptionKind::Truncated {
                needed: total,
                available: len - position,
            });
        }
        let bytes = &file[at..at + usize::try_from(total).unwrap()];
        let payload = match depth {
            ScanDepth::Headers => None,
            ScanDepth::Full => match check_record(header, bytes, Some(offset)) {
                Ok(record) => Some(record.payload.to_vec()),
                Err(kind) => break damage(kind),
            },
        };
        records.push((offset, position, payload));
        position += total;
        offset += 1;
    };
    Verdict {
        records,
        damage,
        next_offset: offset,
        position,
    }
}

/// The cursor over the whole file at once.
fn whole(file: &[u8], start: u64, base: u64, depth: ScanDepth) -> Verdict {
    let cursor = RecordCursor::new(start, base, file.len() as u64, depth);
    let mut walk = SliceRecords::new(file, cursor);
    let mut records = Vec::new();
    let mut damage = None;
    for step in walk.by_ref() {
        match step {
            Ok(r) => records.push((r.header.offset, r.position, r.payload().map(<[u8]>::to_vec))),
            Err(d) => damage = Some(d),
        }
    }
    Verdict {
        records,
        damage,
        next_offset: walk.cursor().next_offset(),
        position: walk.cursor().position(),
    }
}

/// The cursor fed the way a chunked reader feeds it: a few bytes at a
/// time (sizes from `chunks`, cycled), more only when it asks.
fn chunked(file: &[u8], start: u64, base: u64, depth: ScanDepth, chunks: &[usize]) -> Verdict {
    let mut cursor = RecordCursor::new(start, base, file.len() as u64, depth);
    let mut records = Vec::new();
    let mut sizes = chunks.iter().cycle();
    // How many bytes from the cursor's position the "reader" has buffered.
    let mut buffered = 0usize;
    let damage = loop {
        let at = usize::try_from(cursor.position()).unwrap();
        let available = (file.len() - at).min(buffered);
        let position = cursor.position();
        match cursor.step(&file[at..at + available]) {
            CursorStep::NeedBytes { needed } => {
                let needed = usize::try_from(needed).unwrap();
                assert!(needed > available, "asked for bytes it was given");
                assert!(at + needed <= file.len(), "asked for bytes past its end");
                buffered = needed.max(available + sizes.next().copied().unwrap_or(1));
                assert_eq!(
                    cursor.position(),
                    position,
                    "a need does not move the cursor"
                );
            }
            CursorStep::Record(r) => {
                assert_eq!(r.position, position);
                assert_eq!(cursor.position(), position + r.encoded_len());
                records.push((r.header.offset, r.position, r.payload().map(<[u8]>::to_vec)));
                buffered = available.saturating_sub(usize::try_from(r.encoded_len()).unwrap());
            }
            CursorStep::End => break None,
            CursorStep::Damage(d) => {
                // Damage is sticky: the cursor stays and says it again.
                assert_eq!(cursor.position(), position);
                assert_eq!(
                    cursor.step(&file[at..at + available]),
                    CursorStep::Damage(d)
                );
                break Some(d);
            }
            CursorStep::Declined { .. } => unreachable!("step takes every record"),
        }
    };
    Verdict {
        records,
        damage,
        next_offset: cursor.next_offset(),
        position: cursor.position(),
    }
}

fn check_all(file: &[u8], start: u64, base: u64, chunks: &[usize]) {
    for depth in [ScanDepth::Headers, ScanDepth::Full] {
        let expected = reference(file, start, base, depth);
        assert_eq!(whole(file, start, base, depth), expected, "{depth:?} whole");
        assert_eq!(
            chunked(file, start, base, depth, chunks),
            expected,
            "{depth:?} chunked"
        );
    }
}

/// Records `base..base + payloads.len()` back to back after `start` bytes
/// of filler (standing in for the segment header).
fn segment(start: usize, base: u64, payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut file = vec![0xA5; start];
    for (i, payload) in payloads.iter().enumerate() {
        let offset = base.wrapping_add(i as u64);
        file.extend_from_slice(&encode_record_header(offset, i as u64, payload).unwrap());
        file.extend_from_slice(payload);
    }
    file
}

/// Rewrites the header at `at` with `f` and re-seals its header CRC, so
/// the damage is in a field the CRC vouches for.
/// (A header a cut has removed is left alone.)
fn reseal(file: &mut [u8], at: usize, f: impl FnOnce(&mut [u8])) {
    let Some(header) = file.get_mut(at..at + RECORD_HEADER_LEN) else {
        return;
    };
    f(header);
    let crc = crc32fast::hash(&header[..20]);
    header[20..24].copy_from_slice(&crc.to_be_bytes());
}

/// How a generated segment is damaged.
#[derive(Debug, Clone)]
enum Mutation {
    None,
    Flip { byte: usize, bit: u8 },
    Cut { keep: usize },
    Offset { record: usize, offset: u64 },
    Length { record: usize, payload_len: u32 },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        Just(Mutation::None),
        (any::<usize>(), 0u8..8).prop_map(|(byte, bit)| Mutation::Flip { byte, bit }),
        any::<usize>().prop_map(|keep| Mutation::Cut { keep }),
        (any::<usize>(), any::<u64>())
            .prop_map(|(record, offset)| Mutation::Offset { record, offset }),
        (any::<usize>(), any::<u32>()).prop_map(|(record, payload_len)| Mutation::Length {
            record,
            payload_len
        }),
    ]
}

fn apply(file: &mut Vec<u8>, starts: &[usize], mutation: &Mutation) {
    match *mutation {
        Mutation::None => {}
        Mutation::Flip { byte, bit } if !file.is_empty() => {
            let len = file.len();
            file[byte % len] ^= 1 << bit;
        }
        Mutation::Cut { keep } => file.truncate(keep % (file.len() + 1)),
        Mutation::Offset { record, offset } if !starts.is_empty() => {
            let at = starts[record % starts.len()];
            reseal(file, at, |h| {
                h[4..12].copy_from_slice(&offset.to_be_bytes())
            });
        }
        Mutation::Length {
            record,
            payload_len,
        } if !starts.is_empty() => {
            let at = starts[record % starts.len()];
            reseal(file, at, |h| {
                h[0..4].copy_from_slice(&payload_len.to_be_bytes())
            });
        }
        _ => {}
    }
}

fn starts(start: usize, payloads: &[Vec<u8>]) -> Vec<usize> {
    payloads
        .iter()
        .scan(start, |at, p| {
            let here = *at;
            *at += RECORD_HEADER_LEN + p.len();
            Some(here)
        })
        .collect()
}

proptest! {
    #[test]
    fn cursor_matches_the_decoders_on_arbitrary_bytes(
        file in proptest::collection::vec(any::<u8>(), 0..300),
        start in 0usize..64,
        base in any::<u64>(),
        chunks in proptest::collection::vec(1usize..64, 1..8),
    ) {
        let start = start.min(file.len());
        check_all(&file, start as u64, base, &chunks);
    }

    #[test]
    fn cursor_matches_the_decoders_on_damaged_segments(
        payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 0..12),
        start in 0usize..40,
        base in prop_oneof![0u64..1000, (u64::MAX - 12)..=u64::MAX],
        mutations in proptest::collection::vec(mutation(), 0..3),
        chunks in proptest::collection::vec(1usize..200, 1..8),
    ) {
        let mut file = segment(start, base, &payloads);
        let starts = starts(start, &payloads);
        for m in &mutations {
            apply(&mut file, &starts, m);
        }
        let start = start.min(file.len());
        check_all(&file, start as u64, base, &chunks);
    }
}

#[test]
fn cursor_crafted_record_at_offset_u64_max_is_offset_overflow_not_a_wrap() {
    // A segment whose base offset is the last one: its one record would
    // leave no next offset to name.
    let file = segment(0, u64::MAX, &[b"last".to_vec()]);
    for depth in [ScanDepth::Headers, ScanDepth::Full] {
        let mut cursor = RecordCursor::new(0, u64::MAX, file.len() as u64, depth);
        assert_eq!(
            cursor.step(&file),
            CursorStep::Damage(Damage {
                kind: CorruptionKind::OffsetOverflow { found: u64::MAX },
                position: 0,
            })
        );
        assert_eq!((cursor.position(), cursor.next_offset()), (0, u64::MAX));
    }
    // The record before it is the last a segment can hold.
    let file = segment(0, u64::MAX - 1, &[b"a".to_vec()]);
    let mut cursor = RecordCursor::new(0, u64::MAX - 1, file.len() as u64, ScanDepth::Full);
    assert!(matches!(cursor.step(&file), CursorStep::Record(r) if r.header.offset == u64::MAX - 1));
    assert_eq!(cursor.next_offset(), u64::MAX);
    assert_eq!(cursor.step(&[]), CursorStep::End);
}

#[test]
fn cursor_checks_in_order_header_crc_offset_length_then_record_crc() {
    let payload = b"payload".to_vec();
    let file = segment(0, 5, std::slice::from_ref(&payload));
    fn step(bytes: &[u8], offset: u64) -> CursorStep<'_> {
        RecordCursor::new(0, offset, bytes.len() as u64, ScanDepth::Full).step(bytes)
    }
    let damage = |kind| CursorStep::Damage(Damage { kind, position: 0 });
    // A wrong offset and a rotted payload: the offset is named.
    let mut rotted = file.clone();
    *rotted.last_mut().unwrap() ^= 1;
    assert_eq!(
        step(&rotted, 6),
        damage(CorruptionKind::OffsetOutOfOrder {
            expected: 6,
            found: 5
        })
    );
    // A wrong offset and too few bytes: still the offset.
    let short = &file[..file.len() - 1];
    assert_eq!(
        step(short, 6),
        damage(CorruptionKind::OffsetOutOfOrder {
            expected: 6,
            found: 5
        })
    );
    // Too few bytes and a rotted payload: the length, before any CRC.
    let rotted_short = &rotted[..rotted.len() - 2];
    assert_eq!(
        step(rotted_short, 5),
        damage(CorruptionKind::Truncated {
            needed: 35,
            available: 33
        })
    );
    // A flipped header bit: the header CRC, before the offset.
    let mut flipped = file.clone();
    flipped[5] ^= 1;
    assert!(matches!(
        step(&flipped, 6),
        CursorStep::Damage(Damage {
            kind: CorruptionKind::RecordHeaderChecksum { .. },
            position: 0
        })
    ));
}

#[test]
fn cursor_step_if_declines_without_moving_and_before_the_length_check() {
    let file = segment(0, 0, &[b"a".to_vec(), b"bb".to_vec()]);
    // Cut into the second record: declining it must not report the cut.
    let cut = &file[..file.len() - 1];
    let mut cursor = RecordCursor::new(0, 0, cut.len() as u64, ScanDepth::Full);
    assert!(matches!(cursor.step(cut), CursorStep::Record(r) if r.header.offset == 0));
    let (position, rest) = (cursor.position(), &cut[29..]);
    match cursor.step_if(rest, |h| h.payload_len < 2) {
        CursorStep::Declined { header } => assert_eq!((header.offset, header.payload_len), (1, 2)),
        other => panic!("{other:?}"),
    }
    assert_eq!((cursor.position(), cursor.next_offset()), (position, 1));
    assert_eq!(
        cursor.step(rest),
        CursorStep::Damage(Damage {
            kind: CorruptionKind::Truncated {
                needed: 30,
                available: 29
            },
            position,
        })
    );
}

#[test]
fn cursor_never_reads_past_its_end_whatever_it_is_given() {
    let file = segment(0, 0, &[b"abc".to_vec()]);
    // An end inside the record: the bytes after it are ignored.
    let mut cursor = RecordCursor::new(0, 0, 30, ScanDepth::Full);
    assert_eq!(
        cursor.step(&file),
        CursorStep::Damage(Damage {
            kind: CorruptionKind::Truncated {
                needed: 31,
                available: 30
            },
            position: 0,
        })
    );
    // Asking for more than the end holds is damage, never a need.
    let mut cursor = RecordCursor::new(0, 0, 20, ScanDepth::Full);
    assert_eq!(
        cursor.step(&file[..10]),
        CursorStep::Damage(Damage {
            kind: CorruptionKind::Truncated {
                needed: 28,
                available: 20
            },
            position: 0,
        })
    );
}
