//! Time index decoding on arbitrary bytes: never panics, everything
//! accepted holds the invariants a lookup relies on (entries ascend in both
//! fields, the first at the base offset, all below the next offset), and it
//! re-encodes to exactly its input (so no two files mean the same entries).
#![no_main]

use felix_format::time_index::{decode_time_index, encode_time_index};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(view) = decode_time_index(data) {
        let entries: Vec<_> = view.iter().collect();
        assert_eq!(entries.len(), view.len());
        if let Some(first) = entries.first() {
            assert_eq!(first.offset, view.header.base_offset);
        }
        for pair in entries.windows(2) {
            assert!(pair[0].offset < pair[1].offset);
            assert!(pair[0].timestamp_micros < pair[1].timestamp_micros);
        }
        assert!(entries.iter().all(|e| e.offset < view.header.next_offset));
        assert_eq!(
            view.max_timestamp_micros(),
            entries.last().map(|e| e.timestamp_micros)
        );
        let mut again = Vec::new();
        encode_time_index(&view.header, &entries, &mut again).expect("accepted entries re-encode");
        assert_eq!(again, data);
    }
});
