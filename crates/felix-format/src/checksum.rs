//! CRC-32 (IEEE) helpers shared by every checksummed structure.

/// CRC-32 (IEEE) of one contiguous range.
#[inline]
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// CRC-32 (IEEE) of `prefix` followed by each of `parts`, given
/// `prefix_crc`, the CRC of `prefix`: hashing continues where it stopped.
///
/// A file whose checksum covers a header and then a body continues from
/// the header's CRC rather than hashing the header twice; one hasher for
/// every part sets up (and detects the CPU's CRC instructions) once. (A
/// record's checksum, on the path every append and every verified read
/// takes, has its own: [`record_checksum`].)
#[inline]
pub(crate) fn crc32_continue(prefix_crc: u32, parts: &[&[u8]]) -> u32 {
    let mut hasher = crc32fast::Hasher::new_with_initial(prefix_crc);
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize()
}

/// A record's checksum: the CRC-32 of its header bytes 0..24 followed by
/// its payload, given `header_crc`, the CRC of header bytes 0..20, which
/// bytes 20..24 hold (big-endian). The same value as
/// `crc32_continue(header_crc, &[&header_crc.to_be_bytes(), payload])`,
/// one table step cheaper than hashing those four bytes: it runs for every
/// record appended and every record read.
#[inline]
pub(crate) fn record_checksum(header_crc: u32, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new_with_initial(crc32_through_own_crc(header_crc));
    hasher.update(payload);
    hasher.finalize()
}

/// The CRC-32 of some bytes followed by their own CRC, `crc`, big-endian:
/// `crc32_continue(crc, &[&crc.to_be_bytes()])`.
///
/// Hashing four bytes that are themselves a function of `crc` gives a
/// result that depends on `crc` alone, and affinely (CRC is linear over
/// GF(2): the state in and the bytes hashed each enter by XOR). So it is
/// the value at `crc = 0` XORed with one table entry per byte of `crc`,
/// four independent look-ups where hashing takes a dependent chain and a
/// hasher's set-up (about 5 ns of a record's 23, measured on 128-byte
/// payloads; docs/performance.md, "The record checksum").
#[inline]
fn crc32_through_own_crc(crc: u32) -> u32 {
    // A byte always indexes a 256-entry table: the compiler drops the
    // `None` arm.
    let entry = |table: &[u32; 256], byte: u8| table.get(usize::from(byte)).copied().unwrap_or(0);
    let [t0, t1, t2, t3] = &THROUGH_OWN_CRC;
    let [b3, b2, b1, b0] = crc.to_be_bytes();
    THROUGH_OWN_CRC_AT_ZERO ^ entry(t0, b0) ^ entry(t1, b1) ^ entry(t2, b2) ^ entry(t3, b3)
}

/// The reflected CRC-32 (IEEE) polynomial.
const POLY: u32 = 0xEDB8_8320;

/// CRC-32 (IEEE) of `prefix` followed by `bytes`, given `crc`, the CRC of
/// `prefix`, bit by bit: slow, for building tables at compile time.
// Indexing in a `const fn` run at compile time: out of range would stop
// the build, never a run.
#[allow(clippy::indexing_slicing)]
const fn crc32_bitwise_continue(crc: u32, bytes: &[u8]) -> u32 {
    let mut state = !crc;
    let mut i = 0;
    while i < bytes.len() {
        state ^= bytes[i] as u32;
        let mut bit = 0;
        while bit < 8 {
            state = if state & 1 == 1 {
                (state >> 1) ^ POLY
            } else {
                state >> 1
            };
            bit += 1;
        }
        i += 1;
    }
    !state
}

/// [`crc32_through_own_crc`] computed bit by bit.
const fn through_own_crc_bitwise(crc: u32) -> u32 {
    crc32_bitwise_continue(crc, &crc.to_be_bytes())
}

const THROUGH_OWN_CRC_AT_ZERO: u32 = through_own_crc_bitwise(0);

/// `table(k)[b]`: what byte `k` (from the least significant) of a CRC
/// equal to `b` adds to [`crc32_through_own_crc`].
#[allow(clippy::indexing_slicing)]
const fn through_own_crc_table(k: u32) -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = through_own_crc_bitwise((b as u32) << (8 * k)) ^ THROUGH_OWN_CRC_AT_ZERO;
        b += 1;
    }
    table
}

static THROUGH_OWN_CRC: [[u32; 256]; 4] = [
    through_own_crc_table(0),
    through_own_crc_table(1),
    through_own_crc_table(2),
    through_own_crc_table(3),
];

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_bitwise_crc_is_crc32_ieee() {
        // The check value of CRC-32/ISO-HDLC.
        assert_eq!(crc32_bitwise_continue(0, b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32_bitwise_continue(0, b"123456789"), crc32(b"123456789"));
    }

    #[test]
    fn hashing_through_a_crc_by_table_equals_hashing_its_bytes_for_every_byte_of_it() {
        // Every entry of every table: each byte value in each position,
        // alone and over a background, so that no entry goes unchecked.
        for position in 0..4 {
            for byte in 0..=255u32 {
                for background in [0, 0xFFFF_FFFF, 0x1234_5678] {
                    let crc = background ^ (byte << (8 * position));
                    assert_eq!(
                        crc32_through_own_crc(crc),
                        crc32_continue(crc, &[&crc.to_be_bytes()]),
                        "crc {crc:#010x}"
                    );
                }
            }
        }
    }

    proptest! {
        #[test]
        fn hashing_through_a_crc_by_table_equals_hashing_its_bytes(crc: u32) {
            prop_assert_eq!(
                crc32_through_own_crc(crc),
                crc32_continue(crc, &[&crc.to_be_bytes()])
            );
        }

        #[test]
        fn a_record_checksum_equals_hashing_its_header_and_payload(
            header in proptest::array::uniform20(any::<u8>()),
            payload in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let header_crc = crc32(&header);
            let mut whole = header.to_vec();
            whole.extend_from_slice(&header_crc.to_be_bytes());
            whole.extend_from_slice(&payload);
            prop_assert_eq!(record_checksum(header_crc, &payload), crc32(&whole));
        }
    }

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
