//! Clean-shutdown decoding on arbitrary bytes: never panics, and anything
//! accepted re-encodes to exactly its input (so no two files mean the same).
#![no_main]

use felix_format::clean::{decode_clean_shutdown, encode_clean_shutdown};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(segments) = decode_clean_shutdown(data) {
        let mut again = Vec::new();
        encode_clean_shutdown(&segments, &mut again).expect("accepted segments re-encode");
        assert_eq!(again, data);
    }
});
