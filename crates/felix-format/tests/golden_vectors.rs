//! The spec's golden vectors, byte for byte. Changing either is a format change.

use felix_format::{
    CorruptionKind, RecordHeader, SegmentHeader, decode_record, encode_record_header,
};

#[rustfmt::skip]
const SEGMENT_HEADER_1_2: [u8; 32] = [
    0x46, 0x4C, 0x53, 0x47,                         // magic "FLSG"
    0x00, 0x02,                                     // version 2
    0x00, 0x00,                                     // flags
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, // base_offset 1
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, // created_at_micros 2
    0x7A, 0x09, 0xE5, 0xB1,                         // header_crc over 0..24
    0x00, 0x00, 0x00, 0x00,                         // reserved
];

#[rustfmt::skip]
const RECORD_7_9_HI: [u8; 30] = [
    0x00, 0x00, 0x00, 0x02,                         // payload_len 2
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, // offset 7
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, // timestamp_micros 9
    0xC6, 0x54, 0xDE, 0x27,                         // header_crc over 0..20
    0x24, 0x02, 0x15, 0x2C,                         // checksum over 0..24 + payload
    0x68, 0x69,                                     // payload "hi"
];

#[test]
fn encode_segment_header_matches_golden_vector() {
    assert_eq!(SegmentHeader::new(1, 2).encode(), SEGMENT_HEADER_1_2);
}

#[test]
fn decode_segment_header_golden_vector_gives_its_fields() {
    assert_eq!(
        SegmentHeader::decode(&SEGMENT_HEADER_1_2),
        Ok(SegmentHeader::new(1, 2))
    );
}

#[test]
fn encode_record_matches_golden_vector() {
    let header = encode_record_header(7, 9, b"hi").unwrap();
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(b"hi");
    assert_eq!(bytes, RECORD_7_9_HI);
}

#[test]
fn decode_record_golden_vector_gives_its_fields() {
    let record = decode_record(&RECORD_7_9_HI, Some(7)).unwrap();
    assert_eq!(
        record.header,
        RecordHeader {
            payload_len: 2,
            offset: 7,
            timestamp_micros: 9,
            header_crc: 0xC654_DE27,
            checksum: 0x2402_152C,
        }
    );
    assert_eq!(record.payload, b"hi");
}

#[test]
fn decode_record_golden_vector_with_other_expected_offset_is_out_of_order() {
    assert_eq!(
        decode_record(&RECORD_7_9_HI, Some(8)),
        Err(CorruptionKind::OffsetOutOfOrder {
            expected: 8,
            found: 7
        })
    );
}
