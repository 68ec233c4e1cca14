//! Payloads the tool writes: the reference implementation's pattern, which
//! lets any reader check content and not only checksums, and incompressible
//! bytes for benchmarks.

/// The reference pattern's prefix before the 20-digit offset.
const PREFIX: &str = "felix-record-";

/// The payload of the record at `offset`, `len` bytes long, in the
/// reference implementation's pattern (see the interop corpus README): the
/// ASCII `felix-record-` + the offset as 20 zero-padded digits + `-`
/// (34 bytes), then byte `(offset % 251 + i) % 256` for each index `i` from
/// 34. A `len` under 34 keeps the first `len` bytes of the prefix.
pub(crate) fn reference_payload(offset: u64, len: usize) -> Vec<u8> {
    let mut payload = format!("{PREFIX}{offset:020}-").into_bytes();
    let start = payload.len();
    payload.truncate(len);
    let rotation = (offset % 251) as usize;
    payload.extend((start..len).map(|i| ((rotation + i) % 256) as u8));
    payload
}

#[cfg(test)]
/// Whether `payload` is exactly what [`reference_payload`] writes for
/// `offset`.
pub(crate) fn is_reference_payload(offset: u64, payload: &[u8]) -> bool {
    payload == reference_payload(offset, payload.len()).as_slice()
}

/// `len` incompressible bytes from a seeded xorshift64 generator, so a
/// benchmark measures the disk rather than a compressing file system, and
/// two runs with the same seed write the same bytes.
pub(crate) fn xorshift_bytes(seed: u64, len: usize) -> Vec<u8> {
    // Zero is xorshift's one fixed point; any other seed works.
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_payload_prefix_and_tail_follow_the_interop_rule() {
        let payload = reference_payload(300, 40);
        assert_eq!(&payload[..34], b"felix-record-00000000000000000300-");
        // 300 % 251 = 49; byte 34 is (49 + 34) % 256 = 83.
        assert_eq!(&payload[34..], &[83, 84, 85, 86, 87, 88]);
        assert!(is_reference_payload(300, &payload));
        assert!(!is_reference_payload(301, &payload));
    }

    #[test]
    fn reference_payload_shorter_than_prefix_is_cut() {
        assert_eq!(reference_payload(7, 5), b"felix");
        assert_eq!(reference_payload(7, 0), b"");
    }

    #[test]
    fn reference_payload_wraps_at_256() {
        let payload = reference_payload(250, 300);
        assert_eq!(payload[34], ((250 + 34) % 256) as u8);
        assert_eq!(payload[299], ((250 + 299) % 256) as u8);
    }

    #[test]
    fn xorshift_bytes_is_seeded_and_exact_length() {
        assert_eq!(xorshift_bytes(1, 13), xorshift_bytes(1, 13));
        assert_ne!(xorshift_bytes(1, 13), xorshift_bytes(2, 13));
        assert_eq!(xorshift_bytes(5, 13).len(), 13);
    }
}
