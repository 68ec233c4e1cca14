//! Index parsing on arbitrary bytes: never panics, and anything accepted is
//! strictly ascending and inside the segment it was checked against.
#![no_main]

use felix_format::{INDEX_ENTRY_LEN, INDEX_HEADER_LEN, parse_index};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u64, u64, &[u8])| {
    let (base, segment_len, bytes) = input;
    if let Ok(index) = parse_index(bytes, base, segment_len) {
        assert_eq!(
            index.len(),
            (bytes.len() - INDEX_HEADER_LEN) / INDEX_ENTRY_LEN
        );
        let entries: Vec<_> = index.iter().collect();
        for pair in entries.windows(2) {
            assert!(pair[0].offset < pair[1].offset && pair[0].position < pair[1].position);
        }
        for entry in entries {
            assert!(entry.offset >= base && entry.position >= 32 && entry.position < segment_len);
        }
    }
});
