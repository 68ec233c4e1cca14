//! CRC-32 (IEEE) helpers shared by every checksummed structure.

/// CRC-32 (IEEE) of one contiguous range.
#[inline]
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// CRC-32 (IEEE) of `prefix` followed by each of `parts`, given
/// `prefix_crc`, the CRC of `prefix`: hashing continues where it stopped.
///
/// A record's checksum covers its header bytes 0..24, whose first 20 bytes
/// the header CRC already covered, then its payload; continuing from that
/// CRC hashes each of those bytes once instead of twice, and one hasher for
/// both ranges sets up (and detects the CPU's CRC instructions) once, on
/// the path every append and every verified read takes.
#[inline]
pub(crate) fn crc32_continue(prefix_crc: u32, parts: &[&[u8]]) -> u32 {
    let mut hasher = crc32fast::Hasher::new_with_initial(prefix_crc);
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_continue_equals_hashing_the_concatenation() {
        let data: [u8; 200] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        for cut in [0, 1, 20, 24, 64, 199, 200] {
            let (a, b) = data.split_at(cut);
            assert_eq!(crc32_continue(crc32(a), &[b]), crc32(&data), "cut at {cut}");
        }
    }

    #[test]
    fn crc32_continue_over_several_parts_equals_hashing_them_joined() {
        let data: [u8; 200] = core::array::from_fn(|i| (i * 11 + 5) as u8);
        let (prefix, rest) = data.split_at(20);
        for cut in [0, 4, 100, 180] {
            let (a, b) = rest.split_at(cut);
            assert_eq!(
                crc32_continue(crc32(prefix), &[a, b]),
                crc32(&data),
                "cut at {cut}"
            );
        }
        assert_eq!(crc32_continue(crc32(&data), &[]), crc32(&data));
    }
}
