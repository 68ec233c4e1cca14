//! The crash states docs/storage-format.md says a default open still
//! refuses although only unacknowledged writes produced them, recognised
//! from the bytes alone (not through recovery's code), so the sweep can
//! tell the documented limit from a regression.
//!
//! Both are a record meeting a 4 KiB block a power loss left unwritten
//! where the zeros prove nothing about it: part of a header, or a payload,
//! may legitimately be zeros, so the record may be an acknowledged one that
//! rotted elsewhere.

use felix_format::{RECORD_HEADER_LEN, decode_record_header};
use felix_io::sim::BLOCK_BYTES;

const HEADER: u64 = RECORD_HEADER_LEN as u64;

/// A refused state's shape, when it is one the rule leaves refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Residual {
    /// A block boundary cuts the damaged header, the bytes on one side of
    /// it zeros (from the header's start to the boundary, or from the
    /// boundary through a block that the rest of the file does not continue
    /// to its end) and on the other not: the header is neither all zeros
    /// nor verified, so its length, and the next header's position, is
    /// unknown.
    HeaderCutByBlock,
    /// The record's header verified, its bytes from a block boundary inside
    /// it are zeros for a whole block, but those zeros neither hold the
    /// whole next header nor reach the end of the file.
    RecordIntoZeroBlock,
}

fn all_zero(bytes: &[u8], from: u64, to: u64) -> bool {
    bytes
        .get(from as usize..to.min(bytes.len() as u64) as usize)
        .is_some_and(|b| b.iter().all(|&x| x == 0))
}

/// Block boundaries strictly inside `(from, to)`.
fn boundaries(from: u64, to: u64) -> impl Iterator<Item = u64> {
    let first = (from / BLOCK_BYTES + 1) * BLOCK_BYTES;
    (first..to).step_by(BLOCK_BYTES as usize)
}

/// Whether the bytes from `from` on are zeros to the end of the block
/// starting there (or the file), and not to the end of the file.
fn zero_block_not_to_end(bytes: &[u8], from: u64) -> bool {
    let len = bytes.len() as u64;
    all_zero(bytes, from, from + BLOCK_BYTES) && !all_zero(bytes, from, len)
}

/// The residual shape of damage at `position` in the newest segment's
/// `bytes`, if it has one; `header_verified` says which kind was reported.
pub(crate) fn residual(bytes: &[u8], position: u64, header_verified: bool) -> Option<Residual> {
    let header_end = position + HEADER;
    if !header_verified {
        let cut = boundaries(position, header_end).any(|b| {
            let before = all_zero(bytes, position, b);
            let after = all_zero(bytes, b, header_end);
            (before && !after) || (!before && zero_block_not_to_end(bytes, b))
        });
        return cut.then_some(Residual::HeaderCutByBlock);
    }
    let header = bytes
        .get(position as usize..header_end as usize)
        .and_then(|h| decode_record_header(h).ok())?;
    let next = position + header.encoded_len();
    let len = bytes.len() as u64;
    // The zeros that would prove the record unsynced: from the boundary
    // through the next header to the block boundary after it.
    let next_end = (next + HEADER).div_ceil(BLOCK_BYTES) * BLOCK_BYTES;
    let into_zeros = boundaries(position, next).any(|b| {
        let covers_next = next + HEADER <= len && all_zero(bytes, b, next_end.min(len));
        zero_block_not_to_end(bytes, b) && !covers_next
    });
    into_zeros.then_some(Residual::RecordIntoZeroBlock)
}
