//! CRC-32 (IEEE) helpers shared by every checksummed structure.

/// CRC-32 (IEEE) of one contiguous range.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// CRC-32 (IEEE) of two ranges as if they were concatenated.
///
/// Records checksum their 24-byte header prefix followed by the payload; the
/// two are not contiguous in the writer's hands, so hashing them in two steps
/// avoids copying the payload.
pub(crate) fn crc32_pair(first: &[u8], second: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(first);
    hasher.update(second);
    hasher.finalize()
}
