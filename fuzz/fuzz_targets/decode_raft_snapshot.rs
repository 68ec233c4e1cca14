//! Raft-snapshot decoding on arbitrary bytes: never panics, never reads a
//! body its bound does not allow, and anything accepted re-encodes to
//! exactly its input (so no two files mean the same snapshot).
#![no_main]

use felix_format::raft_snapshot::{decode_raft_snapshot, encode_raft_snapshot};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(snapshot) = decode_raft_snapshot(data) {
        let mut again = Vec::new();
        encode_raft_snapshot(&snapshot, &mut again).expect("a decoded snapshot encodes");
        assert_eq!(again, data);
    }
});
