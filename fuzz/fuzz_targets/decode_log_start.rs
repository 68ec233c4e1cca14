//! Log-start decoding on arbitrary bytes: never panics, and anything
//! accepted re-encodes to exactly its input (so no two files mean the same
//! start).
#![no_main]

use felix_format::log_start::{decode_log_start, encode_log_start};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(start) = decode_log_start(data) {
        assert_eq!(encode_log_start(&start)[..], data[..]);
    }
});
