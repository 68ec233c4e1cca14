//! `prepare-crash` then `crash-open`, as the suite's crash rows run them
//! but small: the prepared shard has the sealed segments it was asked for
//! and a newest segment that never rolled, and the open after the torn
//! tail recovers every whole record.

use felix_bench::{Args, felix};
use felix_format::{SEGMENT_HEADER_LEN, record_encoded_len};

fn args(line: &str, dir: &std::path::Path) -> Args {
    let mut words: Vec<String> = line.split_whitespace().map(String::from).collect();
    words.push("--dir".into());
    words.push(dir.display().to_string());
    Args::parse(words).expect("valid arguments")
}

#[test]
fn prepare_crash_then_crash_open_recovers_every_whole_record() {
    for sealed in [0u64, 2] {
        let dir = tempfile::tempdir().unwrap();
        let newest_bytes = 1u64 << 20;
        let prepared = felix::prepare_crash(&args(
            &format!(
                "prepare-crash felix --sealed {sealed} --segment-bytes 262144 --newest-bytes {newest_bytes}"
            ),
            dir.path(),
        ))
        .unwrap();
        assert_eq!(prepared.notes["segments"], sealed + 1, "sealed {sealed}");
        let opened = felix::crash_open(&args("crash-open felix", dir.path())).unwrap();
        let per_record = record_encoded_len(128);
        let newest_records = (newest_bytes - SEGMENT_HEADER_LEN as u64) / per_record;
        let per_segment = (262_144 - SEGMENT_HEADER_LEN as u64) / per_record / 256 * 256;
        assert_eq!(
            opened.records,
            sealed * per_segment + newest_records,
            "sealed {sealed}"
        );
        assert_eq!(opened.notes["recovery_actions"], 1, "sealed {sealed}");
    }
}
