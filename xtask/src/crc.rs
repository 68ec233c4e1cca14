//! CRC-32 (IEEE) for re-sealing damaged fixtures.
//!
//! `felix-format` keeps its CRC private, and its encoders refuse to produce
//! the damage some fixtures model: a wrong field under a *valid* CRC (an
//! impossible length, a v1 header, a flag bit). This is the one place xtask
//! computes a checksum itself, with the same crate the format uses.
//! Generation re-decodes every re-sealed structure with `felix-format`, and a
//! test pins it to the spec's golden vectors.

/// CRC-32 (IEEE) of `bytes`.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// CRC-32 of two ranges as if concatenated (a record's header prefix and its
/// payload are not contiguous in the generator's hands either).
pub(crate) fn crc32_pair(first: &[u8], second: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(first);
    hasher.update(second);
    hasher.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;
    use felix_format::{SegmentHeader, encode_record_header};

    #[test]
    fn crc32_segment_header_golden_vector_matches_stored_crc() {
        let header = SegmentHeader::new(1, 2).encode();
        assert_eq!(crc32(&header[..24]), 0x7A09_E5B1);
    }

    #[test]
    fn crc32_record_golden_vector_matches_both_stored_crcs() {
        let header = encode_record_header(7, 9, b"hi").unwrap();
        assert_eq!(crc32(&header[..20]), 0xC654_DE27);
        assert_eq!(crc32_pair(&header[..24], b"hi"), 0x2402_152C);
    }
}
