//! Incompressible payloads and the bytes a record occupies on disk.

use bytes::Bytes;

/// Distinct payloads a run cycles through: enough that consecutive records
/// differ, few enough to generate up front.
pub const PAYLOAD_POOL: usize = 64;

/// `len` bytes from a seeded xorshift64* generator: incompressible, so a
/// compressing file system or peer cannot flatter a figure, and the same
/// for every implementation.
pub fn xorshift_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A record's payload when a run does not say (`--payload-bytes`): 128
/// bytes, a small event as brokers see them.
pub const DEFAULT_PAYLOAD_BYTES: usize = 128;

/// The run's `--payload-bytes` ([`DEFAULT_PAYLOAD_BYTES`] when not given):
/// every implementation and limit of a run reads it from here, so none
/// measures another size than the others.
pub fn payload_bytes(args: &crate::args::Args) -> Result<usize, String> {
    args.get("payload-bytes", DEFAULT_PAYLOAD_BYTES)
}

/// [`PAYLOAD_POOL`] payloads of `len` bytes for thread `thread`.
pub fn payload_pool(thread: usize, len: usize) -> Vec<Bytes> {
    (0..PAYLOAD_POOL)
        .map(|i| {
            // Spread consecutive seeds over the whole state space.
            let seed = ((thread * PAYLOAD_POOL + i) as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            Bytes::from(xorshift_bytes(seed, len))
        })
        .collect()
}

/// The pool's payloads framed as felix records (28-byte header, then the
/// payload), offsets `0..PAYLOAD_POOL`: the exact bytes and sizes felix
/// writes, for the limits, which write them without encoding anything in
/// the measured loop.
pub fn framed_pool(pool: &[Bytes]) -> Vec<Vec<u8>> {
    pool.iter()
        .enumerate()
        .map(|(i, payload)| {
            let header = felix_format::encode_record_header(i as u64, 1, payload)
                .unwrap_or([0; felix_format::RECORD_HEADER_LEN]);
            let mut framed = header.to_vec();
            framed.extend_from_slice(payload);
            framed
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xorshift_bytes_is_deterministic_and_incompressible_looking() {
        let a = xorshift_bytes(42, 1000);
        assert_eq!(a, xorshift_bytes(42, 1000));
        assert_ne!(a, xorshift_bytes(44, 1000));
        let distinct: std::collections::BTreeSet<u8> = a.iter().copied().collect();
        assert!(distinct.len() > 200, "{}", distinct.len());
    }

    #[test]
    fn framed_pool_is_header_then_payload() {
        let pool = payload_pool(0, 128);
        let framed = framed_pool(&pool);
        assert_eq!(framed[3].len(), 156);
        let view = felix_format::decode_record(&framed[3], Some(3)).unwrap();
        assert_eq!(view.payload, &pool[3][..]);
    }
}
