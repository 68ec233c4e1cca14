//! Raft-state decoding on arbitrary bytes: never panics, and anything
//! accepted re-encodes to exactly its input (so no two files mean the same
//! vote and purge).
#![no_main]

use felix_format::raft_state::{decode_raft_state, encode_raft_state};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(state) = decode_raft_state(data) {
        assert_eq!(encode_raft_state(&state)[..], data[..]);
    }
});
