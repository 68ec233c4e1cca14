//! Record decoding: check order, every truncation, every bit flip.

use felix_format::{
    CorruptionKind, MAX_PAYLOAD_BYTES, RECORD_HEADER_LEN, decode_record, decode_record_header,
    encode_record_header, record_encoded_len,
};
use proptest::prelude::*;

fn encode(offset: u64, timestamp: u64, payload: &[u8]) -> Vec<u8> {
    let mut bytes = encode_record_header(offset, timestamp, payload)
        .unwrap()
        .to_vec();
    bytes.extend_from_slice(payload);
    bytes
}

/// Rewrites a header's length field and re-seals its header CRC, producing a
/// header that verifies but claims `payload_len`.
fn with_verified_len(mut bytes: Vec<u8>, payload_len: u32) -> Vec<u8> {
    bytes[0..4].copy_from_slice(&payload_len.to_be_bytes());
    let crc = crc32fast::hash(&bytes[..20]);
    bytes[20..24].copy_from_slice(&crc.to_be_bytes());
    bytes
}

#[test]
fn decode_record_empty_payload_round_trips() {
    let bytes = encode(0, 0, b"");
    assert_eq!(bytes.len(), RECORD_HEADER_LEN);
    let record = decode_record(&bytes, Some(0)).unwrap();
    assert_eq!(record.payload, b"");
    assert_eq!(record.encoded_len(), 28);
}

#[test]
fn decode_record_ignores_bytes_after_the_record() {
    let mut bytes = encode(5, 6, b"abc");
    bytes.extend_from_slice(b"next record starts here");
    let record = decode_record(&bytes, None).unwrap();
    assert_eq!(record.payload, b"abc");
    assert_eq!(record.encoded_len(), 31);
}

#[test]
fn decode_record_header_too_large_is_reported_before_truncation() {
    let bytes = with_verified_len(encode(1, 1, b"x"), MAX_PAYLOAD_BYTES + 1);
    assert_eq!(
        decode_record(&bytes, Some(1)),
        Err(CorruptionKind::RecordTooLarge {
            payload_len: MAX_PAYLOAD_BYTES + 1,
            max: MAX_PAYLOAD_BYTES
        })
    );
}

#[test]
fn decode_record_max_payload_len_header_is_truncated_not_too_large() {
    let bytes = with_verified_len(encode(1, 1, b"x"), MAX_PAYLOAD_BYTES);
    assert_eq!(
        decode_record(&bytes, Some(1)),
        Err(CorruptionKind::Truncated {
            needed: record_encoded_len(MAX_PAYLOAD_BYTES),
            available: 29
        })
    );
}

#[test]
fn decode_record_header_checksum_is_checked_before_length() {
    // A flipped length bit must never be mistaken for an unfinished write.
    let mut bytes = encode(1, 1, b"hello");
    bytes[3] ^= 0x40;
    assert_eq!(decode_record(&bytes, Some(1)), Err(flip_error(&bytes)));
    assert!(matches!(
        flip_error(&bytes),
        CorruptionKind::RecordHeaderChecksum { .. }
    ));
}

/// What a record with one bit flipped must be rejected as: the header CRC
/// (stored against computed) when the flip is in bytes 0..24, else the
/// record CRC over bytes 0..24 and the payload.
fn flip_error(flipped: &[u8]) -> CorruptionKind {
    let u32_at = |at: usize| u32::from_be_bytes(flipped[at..at + 4].try_into().unwrap());
    let header_crc = crc32fast::hash(&flipped[..20]);
    if header_crc != u32_at(20) {
        return CorruptionKind::RecordHeaderChecksum {
            expected: u32_at(20),
            found: header_crc,
        };
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(&flipped[..24]);
    crc.update(&flipped[28..]);
    CorruptionKind::RecordChecksum {
        expected: u32_at(24),
        found: crc.finalize(),
    }
}

#[test]
fn decode_record_header_ignores_payload() {
    let mut bytes = encode(3, 4, b"payload");
    bytes[30] ^= 1;
    let header = decode_record_header(&bytes).unwrap();
    assert_eq!(
        (header.offset, header.timestamp_micros, header.payload_len),
        (3, 4, 7)
    );
    assert_eq!(decode_record(&bytes, None), Err(flip_error(&bytes)));
    assert!(matches!(
        flip_error(&bytes),
        CorruptionKind::RecordChecksum { .. }
    ));
}

#[test]
fn encode_record_header_over_limit_is_rejected() {
    let payload = vec![0u8; MAX_PAYLOAD_BYTES as usize + 1];
    assert_eq!(
        encode_record_header(0, 0, &payload),
        Err(CorruptionKind::RecordTooLarge {
            payload_len: MAX_PAYLOAD_BYTES + 1,
            max: MAX_PAYLOAD_BYTES
        })
    );
    let payload = &payload[..MAX_PAYLOAD_BYTES as usize];
    let header = encode_record_header(0, 0, payload).unwrap();
    assert_eq!(
        decode_record_header(&header).map(|h| h.payload_len),
        Ok(MAX_PAYLOAD_BYTES)
    );
}

#[test]
fn decode_record_every_truncation_of_a_record_is_truncated() {
    let bytes = encode(9, 10, b"0123456789");
    for len in 0..bytes.len() {
        let needed = if len < RECORD_HEADER_LEN { 28 } else { 38 };
        assert_eq!(
            decode_record(&bytes[..len], Some(9)),
            Err(CorruptionKind::Truncated {
                needed,
                available: len as u64
            }),
            "cut at {len}"
        );
    }
}

#[test]
fn decode_record_every_bit_flip_is_detected_with_the_right_kind() {
    let bytes = encode(9, 10, b"0123456789");
    for bit in 0..bytes.len() * 8 {
        let mut flipped = bytes.clone();
        let byte = bit / 8;
        flipped[byte] ^= 1 << (bit % 8);
        let result = decode_record(&flipped, Some(9));
        assert_eq!(result, Err(flip_error(&flipped)), "flip of bit {bit}");
        // Bytes covered by the header CRC, and the CRC itself, fail the
        // header's check; the record checksum field and the payload, the
        // record's.
        let header_kind = matches!(result, Err(CorruptionKind::RecordHeaderChecksum { .. }));
        assert_eq!(header_kind, byte < 24, "flip of bit {bit} gave {result:?}");
    }
}

proptest! {
    #[test]
    fn record_round_trips(
        offset in any::<u64>(),
        timestamp in any::<u64>(),
        payload in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let bytes = encode(offset, timestamp, &payload);
        let record = decode_record(&bytes, Some(offset)).unwrap();
        prop_assert_eq!(record.header.offset, offset);
        prop_assert_eq!(record.header.timestamp_micros, timestamp);
        prop_assert_eq!(record.payload, &payload[..]);
        prop_assert_eq!(record.encoded_len(), bytes.len() as u64);
    }

    #[test]
    fn decode_record_any_single_bit_flip_is_detected(
        payload in proptest::collection::vec(any::<u8>(), 0..256),
        bit_seed in any::<usize>(),
    ) {
        let bytes = encode(42, 43, &payload);
        let bit = bit_seed % (bytes.len() * 8);
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        prop_assert_eq!(decode_record(&flipped, Some(42)), Err(flip_error(&flipped)));
    }

    #[test]
    fn decode_record_any_truncation_reports_needed_and_available(
        payload in proptest::collection::vec(any::<u8>(), 0..256),
        cut_seed in any::<usize>(),
    ) {
        let bytes = encode(1, 2, &payload);
        let cut = cut_seed % bytes.len();
        let needed = if cut < RECORD_HEADER_LEN { RECORD_HEADER_LEN } else { bytes.len() };
        prop_assert_eq!(
            decode_record(&bytes[..cut], Some(1)),
            Err(CorruptionKind::Truncated { needed: needed as u64, available: cut as u64 })
        );
    }

    #[test]
    fn decode_record_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        if let Ok(record) = decode_record(&bytes, None) {
            // Anything accepted is internally consistent.
            prop_assert!(record.encoded_len() <= bytes.len() as u64);
        }
    }
}
