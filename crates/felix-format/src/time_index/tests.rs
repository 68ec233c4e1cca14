//! The time index codec against its documented bytes and every damage.
#![allow(clippy::indexing_slicing)]
use super::*;
use crate::side_file::SideFileDefect as D;

fn header() -> TimeIndexHeader {
    TimeIndexHeader {
        base_offset: 100,
        next_offset: 105,
        segment_len: 32 + 5 * 40,
    }
}

fn entries() -> [TimeIndexEntry; 2] {
    [
        TimeIndexEntry {
            timestamp_micros: 7,
            offset: 100,
        },
        TimeIndexEntry {
            timestamp_micros: 9,
            offset: 103,
        },
    ]
}

fn encoded() -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_time_index(&header(), &entries(), &mut bytes).unwrap();
    bytes
}

#[test]
fn encode_writes_the_documented_bytes() {
    #[rustfmt::skip]
    let mut expected: Vec<u8> = [
        &b"FLTI"[..],
        &[0, 1, 0, 0],
        &100u64.to_be_bytes(),
        &105u64.to_be_bytes(),
        &232u64.to_be_bytes(),
        &2u32.to_be_bytes(),
        &[0; 4],
        &7u64.to_be_bytes(), &100u64.to_be_bytes(),
        &9u64.to_be_bytes(), &103u64.to_be_bytes(),
    ]
    .concat();
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&expected[..36]);
    hasher.update(&expected[40..]);
    expected[36..40].copy_from_slice(&hasher.finalize().to_be_bytes());
    assert_eq!(encoded(), expected);
}

#[test]
fn decode_rejects_every_truncation_and_every_bit_flip() {
    let bytes = encoded();
    for len in 0..bytes.len() {
        let got = decode_time_index(&bytes[..len]).unwrap_err();
        let expected = if len < TIME_INDEX_HEADER_LEN {
            error(D::Short {
                len,
                header_len: TIME_INDEX_HEADER_LEN,
            })
        } else {
            error(D::CountMismatch {
                count: 2,
                expected: 32,
                found: len - TIME_INDEX_HEADER_LEN,
            })
        };
        assert_eq!(got, expected, "cut at {len}");
    }
    for bit in 0..bytes.len() * 8 {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        // The check that catches a flip is the first one its field
        // reaches; the CRC catches whatever the earlier checks pass.
        let allowed: &[&str] = match bit / 8 {
            0..4 => &["TimeIndexMagic"],
            4..6 => &["TimeIndexVersion"],
            6..8 => &["TimeIndexFlags"],
            8..32 => &["TimeIndexExtent", "TimeIndexCount", "TimeIndexChecksum"],
            32..36 => &["TimeIndexCount", "TimeIndexCountMismatch"],
            _ => &["TimeIndexChecksum"],
        };
        let got = decode_time_index(&flipped).unwrap_err();
        assert!(allowed.contains(&got.name()), "bit {bit}: {got:?}");
    }
}

#[test]
fn decode_names_what_is_wrong() {
    let bytes = encoded();
    let mut flags = bytes.clone();
    flags[7] = 1;
    assert_eq!(
        decode_time_index(&flags),
        Err(error(D::Flags { found: 1, known: 0 }))
    );
    let mut version = bytes.clone();
    version[5] = 2;
    assert_eq!(
        decode_time_index(&version),
        Err(error(D::Version {
            found: 2,
            expected: TIME_INDEX_VERSION
        }))
    );
    let mut count = bytes.clone();
    count[35] = 6;
    assert_eq!(
        decode_time_index(&count),
        Err(error(D::EntriesForRecords {
            count: 6,
            records: 5
        }))
    );
    let mut crc = bytes.clone();
    crc[41] ^= 1;
    assert!(matches!(
        decode_time_index(&crc),
        Err(SideFileError {
            kind: SideFileKind::TimeIndex,
            defect: D::Checksum { .. },
            embedded: None,
        })
    ));
}

#[test]
fn encode_refuses_entries_no_reader_accepts() {
    let mut out = Vec::new();
    let [a, b] = entries();
    let cases: [(&[TimeIndexEntry], SideFileError); 5] = [
        (
            &[],
            error(D::EntriesForRecords {
                count: 0,
                records: 5,
            }),
        ),
        (
            &[b],
            error(D::TimeEntry {
                entry: 0,
                timestamp_micros: 9,
                offset: 103,
            }),
        ),
        (
            &[a, a],
            error(D::TimeEntry {
                entry: 1,
                timestamp_micros: 7,
                offset: 100,
            }),
        ),
        (
            &[
                a,
                TimeIndexEntry {
                    timestamp_micros: 7,
                    offset: 101,
                },
            ],
            error(D::TimeEntry {
                entry: 1,
                timestamp_micros: 7,
                offset: 101,
            }),
        ),
        (
            &[
                a,
                TimeIndexEntry {
                    timestamp_micros: 8,
                    offset: 105,
                },
            ],
            error(D::TimeEntry {
                entry: 1,
                timestamp_micros: 8,
                offset: 105,
            }),
        ),
    ];
    for (list, expected) in cases {
        assert_eq!(
            encode_time_index(&header(), list, &mut out),
            Err(expected),
            "{list:?}"
        );
    }
    let short = TimeIndexHeader {
        segment_len: 32 + 5 * 28 - 1,
        ..header()
    };
    assert_eq!(
        encode_time_index(&short, &entries(), &mut out),
        Err(error(D::Extent {
            base_offset: 100,
            next_offset: 105,
            segment_len: 171
        }))
    );
    assert!(out.is_empty(), "nothing written on refusal");
}

#[test]
fn decode_an_empty_segment_has_no_entries() {
    let empty = TimeIndexHeader {
        base_offset: 4,
        next_offset: 4,
        segment_len: 32,
    };
    let mut bytes = Vec::new();
    encode_time_index(&empty, &[], &mut bytes).unwrap();
    let view = decode_time_index(&bytes).unwrap();
    assert!(view.is_empty());
    assert_eq!(view.max_timestamp_micros(), None);
}
