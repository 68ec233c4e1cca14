//! Bytes of the `raft-state` file: what a Raft log kept in a shard needs
//! beyond its entries — the vote (durable before a node answers a vote
//! request) and the id of the last entry purged (term included, which the
//! `log-start` file, an offset only, cannot say).
//!
//! felix-raft writes this file; felix storage only knows its name, so a
//! shard directory holding one is not reported as holding a stray. It is an
//! addition of felix storage to format v2 (see `docs/storage-format.md`).
//!
//! Layout (big-endian, 44 bytes): magic `FLRS` (4), version (2), flags (2),
//! `vote_term` (8), `voted_for` (8), `purged_term` (8), `purged_index` (8),
//! `crc` (4) — the CRC-32 of bytes 0..40. Flags: bit 0 a vote is present,
//! bit 1 the vote is committed (a leader's), bit 2 the vote names a
//! candidate (`voted_for`), bit 3 a purged id is present; the other bits
//! are zero. A field whose flag is clear is zero, and so is a committed or
//! candidate bit without a vote.
//!
//! The vote is openraft's with one leader per term (`single-term-leader`):
//! a term and the node voted for, if any; node ids are `u64`.

use crate::bytes_be::{put, u16_at, u32_at, u64_at};
use crate::checksum::crc32;

/// Magic of the `raft-state` file: ASCII `FLRS`, "Felix Raft State".
pub const RAFT_STATE_MAGIC: u32 = u32::from_be_bytes(*b"FLRS");
/// Version of the raft-state layout.
pub const RAFT_STATE_VERSION: u16 = 1;
/// Length of the file: it has no variable part.
pub const RAFT_STATE_FILE_LEN: usize = 44;

/// The first byte of a record of a felix Raft log (log encoding 2): a
/// normal entry, whose payload is the producer's bytes after this byte.
pub const RAFT_ENTRY_NORMAL: u8 = 1;
/// The first byte of a record of a felix Raft log: a blank entry (a new
/// leader's), nothing after this byte.
pub const RAFT_ENTRY_BLANK: u8 = 2;
/// The first byte of a record of a felix Raft log: a membership entry, the
/// membership (postcard of openraft's `Membership`) after this byte.
pub const RAFT_ENTRY_MEMBERSHIP: u8 = 3;

/// The name of an entry kind byte (`normal`, `blank`, `membership`), or
/// `None` for a byte no entry starts with.
///
/// ```
/// use felix_format::raft_state::{RAFT_ENTRY_BLANK, raft_entry_kind_name};
///
/// assert_eq!(raft_entry_kind_name(RAFT_ENTRY_BLANK), Some("blank"));
/// assert_eq!(raft_entry_kind_name(0), None);
/// ```
pub const fn raft_entry_kind_name(kind: u8) -> Option<&'static str> {
    match kind {
        RAFT_ENTRY_NORMAL => Some("normal"),
        RAFT_ENTRY_BLANK => Some("blank"),
        RAFT_ENTRY_MEMBERSHIP => Some("membership"),
        _ => None,
    }
}

const VOTE: u16 = 1 << 0;
const COMMITTED: u16 = 1 << 1;
const VOTED_FOR: u16 = 1 << 2;
const PURGED: u16 = 1 << 3;
const KNOWN_FLAGS: u16 = VOTE | COMMITTED | VOTED_FOR | PURGED;

/// A Raft vote: the term, the node voted for, and whether that node won
/// (a committed vote is a leader's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RaftVote {
    /// The term voted in.
    pub term: u64,
    /// The candidate voted for in that term, if any.
    pub voted_for: Option<u64>,
    /// Whether a quorum granted the vote: its candidate leads the term.
    pub committed: bool,
}

/// The id of a Raft log entry: the term of the leader that wrote it and its
/// index (which is the entry's felix offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RaftLogId {
    /// The term of the leader that wrote the entry.
    pub term: u64,
    /// The entry's index in the log.
    pub index: u64,
}

/// What the file records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RaftState {
    /// The last vote saved, if any.
    pub vote: Option<RaftVote>,
    /// The id of the last entry purged, if any: every entry up to its index
    /// is gone, or about to be (see felix-raft's write order).
    pub last_purged: Option<RaftLogId>,
}

/// Why bytes are not a valid raft-state file.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RaftStateDecodeError {
    /// The file is not exactly 44 bytes (a torn write, or not ours).
    #[error("raft-state file is {len} bytes, not 44")]
    Length {
        /// Bytes present.
        len: usize,
    },
    /// The file does not start with `FLRS`.
    #[error("raft-state magic is {found:#010x}, expected 0x464c5253 (FLRS)")]
    Magic {
        /// The four bytes found, big-endian.
        found: u32,
    },
    /// A version this build does not read.
    #[error("raft-state file version {found} is not supported (this build reads version 1)")]
    Version {
        /// The version found.
        found: u16,
    },
    /// Flags this build does not know.
    #[error("raft-state flags are {found:#06x}; only bits 0 to 3 are defined")]
    Flags {
        /// The flags found.
        found: u16,
    },
    /// The CRC does not match.
    #[error("raft-state checksum mismatch: stored {expected:#010x}, computed {found:#010x}")]
    Checksum {
        /// The CRC stored in the file.
        expected: u32,
        /// The CRC computed.
        found: u32,
    },
    /// The checksum holds but the flags and fields disagree: a field whose
    /// flag is clear is not zero, or a vote's bit is set without a vote.
    /// Not written by this codec.
    #[error("raft-state flags {flags:#06x} disagree with its fields")]
    Inconsistent {
        /// The flags found.
        flags: u16,
    },
}

impl RaftStateDecodeError {
    /// A stable name for the kind of damage, for reports and scripts.
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Length { .. } => "RaftStateLength",
            Self::Magic { .. } => "RaftStateMagic",
            Self::Version { .. } => "RaftStateVersion",
            Self::Flags { .. } => "RaftStateFlags",
            Self::Checksum { .. } => "RaftStateChecksum",
            Self::Inconsistent { .. } => "RaftStateInconsistent",
        }
    }
}

/// The file's 44 bytes.
///
/// ```
/// use felix_format::raft_state::{RaftLogId, RaftState, RaftVote, decode_raft_state, encode_raft_state};
///
/// let state = RaftState {
///     vote: Some(RaftVote { term: 5, voted_for: Some(2), committed: true }),
///     last_purged: Some(RaftLogId { term: 4, index: 1_000 }),
/// };
/// let bytes = encode_raft_state(&state);
/// assert_eq!(&bytes[..4], b"FLRS");
/// assert_eq!(decode_raft_state(&bytes), Ok(state));
/// ```
pub fn encode_raft_state(state: &RaftState) -> [u8; RAFT_STATE_FILE_LEN] {
    let mut out = [0u8; RAFT_STATE_FILE_LEN];
    let mut flags = 0u16;
    if let Some(vote) = state.vote {
        flags |= VOTE;
        if vote.committed {
            flags |= COMMITTED;
        }
        put(&mut out, 8, &vote.term.to_be_bytes());
        if let Some(node) = vote.voted_for {
            flags |= VOTED_FOR;
            put(&mut out, 16, &node.to_be_bytes());
        }
    }
    if let Some(purged) = state.last_purged {
        flags |= PURGED;
        put(&mut out, 24, &purged.term.to_be_bytes());
        put(&mut out, 32, &purged.index.to_be_bytes());
    }
    put(&mut out, 0, &RAFT_STATE_MAGIC.to_be_bytes());
    put(&mut out, 4, &RAFT_STATE_VERSION.to_be_bytes());
    put(&mut out, 6, &flags.to_be_bytes());
    let crc = crc32(out.get(..40).unwrap_or_default());
    put(&mut out, 40, &crc.to_be_bytes());
    out
}

/// Decodes a raft-state file: its length, magic, version, flags, the CRC,
/// then the agreement of flags and fields.
///
/// ```
/// use felix_format::raft_state::{RaftStateDecodeError, decode_raft_state};
///
/// assert_eq!(decode_raft_state(b"FLRS"), Err(RaftStateDecodeError::Length { len: 4 }));
/// ```
pub fn decode_raft_state(bytes: &[u8]) -> Result<RaftState, RaftStateDecodeError> {
    let Ok(raw) = <&[u8; RAFT_STATE_FILE_LEN]>::try_from(bytes) else {
        return Err(RaftStateDecodeError::Length { len: bytes.len() });
    };
    let magic = u32_at(raw, 0);
    if magic != RAFT_STATE_MAGIC {
        return Err(RaftStateDecodeError::Magic { found: magic });
    }
    let version = u16_at(raw, 4);
    if version != RAFT_STATE_VERSION {
        return Err(RaftStateDecodeError::Version { found: version });
    }
    let flags = u16_at(raw, 6);
    if flags & !KNOWN_FLAGS != 0 {
        return Err(RaftStateDecodeError::Flags { found: flags });
    }
    let expected = u32_at(raw, 40);
    let found = crc32(raw.get(..40).unwrap_or_default());
    if expected != found {
        return Err(RaftStateDecodeError::Checksum { expected, found });
    }
    let (vote_term, voted_for) = (u64_at(raw, 8), u64_at(raw, 16));
    let (purged_term, purged_index) = (u64_at(raw, 24), u64_at(raw, 32));
    let has = |bit: u16| flags & bit != 0;
    let consistent = (has(VOTE) || (!has(COMMITTED) && !has(VOTED_FOR) && vote_term == 0))
        && (has(VOTED_FOR) || voted_for == 0)
        && (has(PURGED) || (purged_term == 0 && purged_index == 0));
    if !consistent {
        return Err(RaftStateDecodeError::Inconsistent { flags });
    }
    Ok(RaftState {
        vote: has(VOTE).then_some(RaftVote {
            term: vote_term,
            voted_for: has(VOTED_FOR).then_some(voted_for),
            committed: has(COMMITTED),
        }),
        last_purged: has(PURGED).then_some(RaftLogId {
            term: purged_term,
            index: purged_index,
        }),
    })
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    const STATE: RaftState = RaftState {
        vote: Some(RaftVote {
            term: 0x0102_0304_0506_0708,
            voted_for: Some(9),
            committed: true,
        }),
        last_purged: Some(RaftLogId {
            term: 3,
            index: 0x1112_1314_1516_1718,
        }),
    };

    #[test]
    fn encode_writes_the_documented_bytes() {
        #[rustfmt::skip]
        let mut expected: Vec<u8> = [
            &b"FLRS"[..],
            &[0, 1],                          // version
            &[0, 0b1111],                     // flags: vote, committed, voted_for, purged
            &[1, 2, 3, 4, 5, 6, 7, 8],        // vote_term
            &9u64.to_be_bytes(),              // voted_for
            &3u64.to_be_bytes(),              // purged_term
            &[0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18], // purged_index
            &[0; 4],                          // crc
        ]
        .concat();
        let crc = crc32fast::hash(&expected[..40]);
        expected[40..].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(encode_raft_state(&STATE).to_vec(), expected);
    }

    #[test]
    fn encode_decode_round_trips_every_shape() {
        let votes = [
            None,
            Some(RaftVote::default()),
            Some(RaftVote {
                term: 7,
                voted_for: Some(0),
                committed: false,
            }),
            Some(RaftVote {
                term: u64::MAX,
                voted_for: Some(u64::MAX),
                committed: true,
            }),
        ];
        let purged = [None, Some(RaftLogId::default()), STATE.last_purged];
        for vote in votes {
            for last_purged in purged {
                let state = RaftState { vote, last_purged };
                assert_eq!(decode_raft_state(&encode_raft_state(&state)), Ok(state));
            }
        }
    }

    #[test]
    fn decode_rejects_fields_that_disagree_with_the_flags() {
        let mut bytes = encode_raft_state(&RaftState::default());
        bytes[23] = 1; // voted_for without its flag
        let crc = crc32fast::hash(&bytes[..40]);
        bytes[40..].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            decode_raft_state(&bytes),
            Err(RaftStateDecodeError::Inconsistent { flags: 0 })
        );
        let mut bytes = encode_raft_state(&RaftState::default());
        bytes[7] = COMMITTED as u8; // committed without a vote
        let crc = crc32fast::hash(&bytes[..40]);
        bytes[40..].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(
            decode_raft_state(&bytes),
            Err(RaftStateDecodeError::Inconsistent { flags: COMMITTED })
        );
    }

    #[test]
    fn decode_rejects_every_truncation_and_every_bit_flip_naming_the_field() {
        let bytes = encode_raft_state(&STATE);
        for len in 0..bytes.len() {
            assert_eq!(
                decode_raft_state(&bytes[..len]),
                Err(RaftStateDecodeError::Length { len })
            );
        }
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert_eq!(
            decode_raft_state(&longer),
            Err(RaftStateDecodeError::Length { len: 45 })
        );
        let stored = u32::from_be_bytes(bytes[40..].try_into().unwrap());
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes;
            flipped[bit / 8] ^= 1 << (bit % 8);
            let field = |at: usize, n: usize| {
                flipped[at..at + n]
                    .iter()
                    .fold(0u32, |acc, &b| (acc << 8) | u32::from(b))
            };
            let flags = field(6, 2) as u16;
            let expected = match bit / 8 {
                0..4 => RaftStateDecodeError::Magic { found: field(0, 4) },
                4..6 => RaftStateDecodeError::Version {
                    found: field(4, 2) as u16,
                },
                6..8 if flags & !KNOWN_FLAGS != 0 => RaftStateDecodeError::Flags { found: flags },
                40..44 => RaftStateDecodeError::Checksum {
                    expected: field(40, 4),
                    found: stored,
                },
                _ => RaftStateDecodeError::Checksum {
                    expected: stored,
                    found: crc32fast::hash(&flipped[..40]),
                },
            };
            assert_eq!(decode_raft_state(&flipped), Err(expected), "bit {bit}");
        }
    }
}
