//! Record decoding on arbitrary bytes: never panics, and anything accepted
//! re-encodes to exactly the bytes it was decoded from (so it passed both
//! checksums over those bytes).
#![no_main]

use felix_format::{decode_record, decode_record_header, encode_record_header};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let header = decode_record_header(data);
    match decode_record(data, None) {
        Ok(record) => {
            let header = header.expect("a decoded record has a decodable header");
            assert_eq!(record.header, header);
            let len = record.encoded_len() as usize;
            assert!(len <= data.len());
            let again =
                encode_record_header(header.offset, header.timestamp_micros, record.payload)
                    .expect("an accepted payload is within the limit");
            assert_eq!(&again[..], &data[..28]);
            assert_eq!(record.payload, &data[28..len]);
        }
        Err(_) => {}
    }
});
