//! Panic-free big-endian field access, for every decoder of the crate.
//!
//! Fixed headers are decoded from arrays whose length the type system
//! already knows, and variable bodies (the tier manifest's) only after
//! their length was checked, so a read out of range never happens; these
//! helpers exist so that no decoder needs an index expression that could
//! panic.

/// Reads a big-endian `u16` at `at`, or 0 if out of range.
#[inline]
pub(crate) fn u16_at(bytes: &[u8], at: usize) -> u16 {
    bytes
        .get(at..at + 2)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u16::from_be_bytes)
}

/// Reads a big-endian `u32` at `at`, or 0 if out of range.
#[inline]
pub(crate) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    bytes
        .get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_be_bytes)
}

/// Reads a big-endian `u64` at `at`, or 0 if out of range.
#[inline]
pub(crate) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    bytes
        .get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

/// Copies `value` into `out` at `at`; out-of-range writes are dropped, which
/// the fixed layouts of this crate never request.
#[inline]
pub(crate) fn put<const N: usize>(out: &mut [u8; N], at: usize, value: &[u8]) {
    if let Some(dst) = out.get_mut(at..at + value.len()) {
        dst.copy_from_slice(value);
    }
}
