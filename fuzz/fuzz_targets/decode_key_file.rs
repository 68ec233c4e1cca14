//! Key file decoding on arbitrary bytes: never panics, and anything
//! accepted re-encodes to exactly its input (so no two files mean the same
//! key, and no key is read from bytes its encoder would not write).
#![no_main]

use felix_format::key_file::{decode_key_file, encode_key_file};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(view) = decode_key_file(data) {
        let key = view.to_key();
        assert!(view.is(&key));
        let mut again = Vec::new();
        encode_key_file(&key, &mut again).expect("an accepted key re-encodes");
        assert_eq!(again, data);
    }
});
