//! Epochs decoding on arbitrary bytes: never panics, never accepts more than
//! the cap, and anything accepted re-encodes to exactly its input.
#![no_main]

use felix_format::epochs::{MAX_EPOCH_ENTRIES, decode_epochs, encode_epochs};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = decode_epochs(data) {
        let entries: Vec<_> = entries.collect();
        assert!(entries.len() <= MAX_EPOCH_ENTRIES);
        let mut again = Vec::new();
        encode_epochs(&entries, &mut again).expect("accepted entries re-encode");
        assert_eq!(again, data);
    }
    // The tolerant loader must take the same bytes without panicking.
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join(felix_format::EPOCHS_FILE_NAME), data).expect("write");
    let _ = felix_epochs::EpochsFile::new(&felix_io::FileSystem::os(), dir.path()).load();
});
