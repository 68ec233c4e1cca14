//! Tiered manifest decoding on arbitrary bytes: never panics, and anything
//! accepted re-encodes to exactly its input (so no two objects mean the
//! same manifest).
#![no_main]

use felix_format::tier_manifest::{decode_manifest, encode_manifest};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(view) = decode_manifest(data) {
        let mut out = Vec::new();
        encode_manifest(&view.to_manifest(), &mut out).expect("a decoded manifest encodes");
        assert_eq!(out[..], data[..]);
    }
});
