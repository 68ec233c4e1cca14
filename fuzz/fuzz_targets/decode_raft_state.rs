//! Raft-state decoding on arbitrary bytes: never panics, and anything
//! accepted re-encodes to exactly its input (so no two files mean the same
//! vote, purge, committed id and log encoding): a version-1 file (44
//! bytes) by the version-1 encoder, a version-2 file by the current one.
#![no_main]

use felix_format::raft_state::{
    RAFT_STATE_V1_FILE_LEN, decode_raft_state, encode_raft_state, encode_raft_state_v1,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(state) = decode_raft_state(data) {
        let again = if data.len() == RAFT_STATE_V1_FILE_LEN {
            encode_raft_state_v1(&state).map(|bytes| bytes.to_vec())
        } else {
            Some(encode_raft_state(&state).to_vec())
        };
        assert_eq!(again.as_deref(), Some(data));
    }
});
