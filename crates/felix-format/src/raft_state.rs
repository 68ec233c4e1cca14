//! Bytes of the `raft-state` file: what a Raft log kept in a shard needs
//! beyond its entries — the vote (durable before a node answers a vote
//! request) and the id of the last entry purged (term included, which the
//! `log-start` file, an offset only, cannot say).
//!
//! felix-raft writes this file; felix storage only knows its name, so a
//! shard directory holding one is not reported as holding a stray. It is an
//! addition of felix storage to format v2 (see `docs/storage-format.md`).
//!
//! Layout, version 2 (big-endian, 64 bytes): magic `FLRS` (4), version
//! (2), flags (2), `vote_term` (8), `voted_for` (8), `purged_term` (8),
//! `purged_index` (8), `committed_term` (8), `committed_index` (8),
//! `log_encoding` (2), reserved (2, zero), `crc` (4) — the CRC-32 of bytes
//! 0..60. Flags: bit 0 a vote is present, bit 1 the vote is committed (a
//! leader's), bit 2 the vote names a candidate (`voted_for`), bit 3 a
//! purged id is present, bit 4 a committed id is present; the other bits
//! are zero. A field whose flag is clear is zero, and so is a committed or
//! candidate bit without a vote. `log_encoding` names how the shard's
//! records hold Raft entries: 2 is one kind byte ([`RAFT_ENTRY_NORMAL`],
//! [`RAFT_ENTRY_BLANK`], [`RAFT_ENTRY_MEMBERSHIP`], [`RAFT_ENTRY_LOG_START`])
//! then the body.
//!
//! Version 1 (44 bytes), written by felix-raft on openraft 0.9: the same
//! up to `purged_index`, then the CRC of bytes 0..40; flags bits 0 to 3.
//! It has no committed id and no `log_encoding`: its shard's records are
//! log encoding 1 (each a postcard-encoded openraft `Entry`). It decodes
//! (as log encoding 1) so that tools can say what it is; felix-raft refuses
//! to open such a log.
//!
//! The vote is openraft's with one leader per term (`leader_id_std`): a
//! term and the node voted for, if any; node ids are `u64`.

use crate::bytes_be::{put, u16_at, u64_at};
use crate::side_file::{
    SideFileBody, SideFileChecksum, SideFileDefect, SideFileError, SideFileKind, SideFileLayout,
    SideFileVersion,
};

/// Magic of the `raft-state` file: ASCII `FLRS`, "Felix Raft State".
pub const RAFT_STATE_MAGIC: u32 = u32::from_be_bytes(*b"FLRS");
/// Version of the raft-state layout this build writes.
pub const RAFT_STATE_VERSION: u16 = 2;
/// Length of a version-2 file, the longest layout (no variable part): a
/// reader need never read more.
pub const RAFT_STATE_FILE_LEN: usize = 64;
/// Length of a version-1 file (felix-raft on openraft 0.9).
pub const RAFT_STATE_V1_FILE_LEN: usize = 44;
/// The log encoding this build writes: each record one kind byte then the
/// entry's body (see the module docs).
pub const RAFT_LOG_ENCODING: u16 = 2;
/// The log encoding of a version-1 file's shard: each record a
/// postcard-encoded openraft `Entry`.
pub const RAFT_LOG_ENCODING_POSTCARD: u16 = 1;

/// The first byte of a record of a felix Raft log (log encoding 2): a
/// normal entry, whose payload is the producer's bytes after this byte.
pub const RAFT_ENTRY_NORMAL: u8 = 1;
/// The first byte of a record of a felix Raft log: a blank entry (a new
/// leader's), nothing after this byte.
pub const RAFT_ENTRY_BLANK: u8 = 2;
/// The first byte of a record of a felix Raft log: a membership entry, the
/// membership (postcard of openraft's `Membership`) after this byte.
pub const RAFT_ENTRY_MEMBERSHIP: u8 = 3;

/// The first byte of a record of a felix Raft log: a log-start entry, the
/// new log start (`u64`, big-endian) after this byte. Applying it deletes
/// the records before that start on every replica.
pub const RAFT_ENTRY_LOG_START: u8 = 4;

/// The name of an entry kind byte (`normal`, `blank`, `membership`,
/// `log-start`), or
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
        RAFT_ENTRY_LOG_START => Some("log-start"),
        _ => None,
    }
}

const VOTE: u16 = 1 << 0;
const COMMITTED: u16 = 1 << 1;
const VOTED_FOR: u16 = 1 << 2;
const PURGED: u16 = 1 << 3;
const COMMITTED_ID: u16 = 1 << 4;
const KNOWN_FLAGS_V1: u16 = VOTE | COMMITTED | VOTED_FOR | PURGED;
const KNOWN_FLAGS: u16 = KNOWN_FLAGS_V1 | COMMITTED_ID;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RaftState {
    /// The last vote saved, if any.
    pub vote: Option<RaftVote>,
    /// The id of the last entry purged, if any: every entry up to its index
    /// is gone, or about to be (see felix-raft's write order).
    pub last_purged: Option<RaftLogId>,
    /// The id of the last entry known committed, as saved (possibly behind
    /// the true one: saving it is optional), if any. Always `None` from a
    /// version-1 file.
    pub committed: Option<RaftLogId>,
    /// How the shard's records hold entries. Default:
    /// [`RAFT_LOG_ENCODING`]; a version-1 file's is
    /// [`RAFT_LOG_ENCODING_POSTCARD`].
    pub log_encoding: u16,
}

impl Default for RaftState {
    /// No vote, nothing purged, no committed id, the current log encoding.
    fn default() -> Self {
        Self {
            vote: None,
            last_purged: None,
            committed: None,
            log_encoding: RAFT_LOG_ENCODING,
        }
    }
}

/// The raft-state file's frame: no body, 44 bytes for version 1 and 64
/// for version 2 (the length names the version), the CRC in the last four
/// bytes over all before it.
pub const RAFT_STATE_LAYOUT: SideFileLayout = SideFileLayout {
    kind: SideFileKind::RaftState,
    name: "RaftState",
    file: "raft-state file",
    field: "raft-state",
    entries: "",
    magic: RAFT_STATE_MAGIC,
    versions: &[
        SideFileVersion {
            version: 1,
            header_len: RAFT_STATE_V1_FILE_LEN,
            known_flags: KNOWN_FLAGS_V1,
        },
        SideFileVersion {
            version: RAFT_STATE_VERSION,
            header_len: RAFT_STATE_FILE_LEN,
            known_flags: KNOWN_FLAGS,
        },
    ],
    has_flags: true,
    body: SideFileBody::None,
    checksum: SideFileChecksum::HeaderAndBody,
};

/// The file's 64 bytes (version 2).
///
/// ```
/// use felix_format::raft_state::{RaftLogId, RaftState, RaftVote, decode_raft_state, encode_raft_state};
///
/// let state = RaftState {
///     vote: Some(RaftVote { term: 5, voted_for: Some(2), committed: true }),
///     last_purged: Some(RaftLogId { term: 4, index: 1_000 }),
///     committed: Some(RaftLogId { term: 5, index: 1_200 }),
///     ..RaftState::default()
/// };
/// let bytes = encode_raft_state(&state);
/// assert_eq!(&bytes[..4], b"FLRS");
/// assert_eq!(decode_raft_state(&bytes), Ok(state));
/// ```
pub fn encode_raft_state(state: &RaftState) -> [u8; RAFT_STATE_FILE_LEN] {
    let mut out = [0u8; RAFT_STATE_FILE_LEN];
    let mut flags = common_fields(&mut out, state);
    if let Some(committed) = state.committed {
        flags |= COMMITTED_ID;
        put(&mut out, 40, &committed.term.to_be_bytes());
        put(&mut out, 48, &committed.index.to_be_bytes());
    }
    put(&mut out, 56, &state.log_encoding.to_be_bytes());
    seal(&mut out, RAFT_STATE_VERSION, flags);
    out
}

/// The 44 bytes of a version-1 file (felix-raft on openraft 0.9) holding
/// `state`'s vote and purged id, or `None` when `state` holds what version
/// 1 cannot: a committed id, or a log encoding other than
/// [`RAFT_LOG_ENCODING_POSTCARD`]. For tools and tests that make old
/// files; nothing writes this layout any more.
///
/// ```
/// use felix_format::raft_state::{RAFT_LOG_ENCODING_POSTCARD, RaftState, decode_raft_state, encode_raft_state_v1};
///
/// let state = RaftState { log_encoding: RAFT_LOG_ENCODING_POSTCARD, ..RaftState::default() };
/// let bytes = encode_raft_state_v1(&state).unwrap();
/// assert_eq!(decode_raft_state(&bytes), Ok(state));
/// assert_eq!(encode_raft_state_v1(&RaftState::default()), None);
/// ```
pub fn encode_raft_state_v1(state: &RaftState) -> Option<[u8; RAFT_STATE_V1_FILE_LEN]> {
    if state.committed.is_some() || state.log_encoding != RAFT_LOG_ENCODING_POSTCARD {
        return None;
    }
    let mut out = [0u8; RAFT_STATE_V1_FILE_LEN];
    let flags = common_fields(&mut out, state);
    seal(&mut out, 1, flags);
    Some(out)
}

/// Writes the vote and purged id (bytes 8..40) and returns their flags.
fn common_fields<const N: usize>(out: &mut [u8; N], state: &RaftState) -> u16 {
    let mut flags = 0u16;
    if let Some(vote) = state.vote {
        flags |= VOTE;
        if vote.committed {
            flags |= COMMITTED;
        }
        put(out, 8, &vote.term.to_be_bytes());
        if let Some(node) = vote.voted_for {
            flags |= VOTED_FOR;
            put(out, 16, &node.to_be_bytes());
        }
    }
    if let Some(purged) = state.last_purged {
        flags |= PURGED;
        put(out, 24, &purged.term.to_be_bytes());
        put(out, 32, &purged.index.to_be_bytes());
    }
    flags
}

/// Writes magic, version and flags, then the CRC of all before it in its
/// last four bytes.
fn seal<const N: usize>(out: &mut [u8; N], version: u16, flags: u16) {
    RAFT_STATE_LAYOUT.write_preamble(version, flags, out);
    RAFT_STATE_LAYOUT.seal(out);
}

/// Decodes a raft-state file of either version: its length (44 or 64),
/// magic, version (the one of its length), flags, the CRC, then the
/// agreement of flags and fields.
///
/// ```
/// use felix_format::raft_state::decode_raft_state;
/// use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
///
/// let length = SideFileDefect::Length { len: 4 };
/// assert_eq!(decode_raft_state(b"FLRS"), Err(SideFileError::new(SideFileKind::RaftState, length)));
/// ```
pub fn decode_raft_state(bytes: &[u8]) -> Result<RaftState, SideFileError> {
    let frame = RAFT_STATE_LAYOUT.decode(bytes)?;
    let (version, flags) = (frame.version, frame.flags);
    let (vote_term, voted_for) = (u64_at(bytes, 8), u64_at(bytes, 16));
    let (purged_term, purged_index) = (u64_at(bytes, 24), u64_at(bytes, 32));
    let (committed_term, committed_index, log_encoding, reserved) = if version == 1 {
        (0, 0, RAFT_LOG_ENCODING_POSTCARD, 0)
    } else {
        (
            u64_at(bytes, 40),
            u64_at(bytes, 48),
            u16_at(bytes, 56),
            u16_at(bytes, 58),
        )
    };
    let has = |bit: u16| flags & bit != 0;
    let consistent = (has(VOTE) || (!has(COMMITTED) && !has(VOTED_FOR) && vote_term == 0))
        && (has(VOTED_FOR) || voted_for == 0)
        && (has(PURGED) || (purged_term == 0 && purged_index == 0))
        && (has(COMMITTED_ID) || (committed_term == 0 && committed_index == 0))
        && reserved == 0;
    if !consistent {
        return Err(SideFileError::new(
            SideFileKind::RaftState,
            SideFileDefect::Inconsistent { flags },
        ));
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
        committed: has(COMMITTED_ID).then_some(RaftLogId {
            term: committed_term,
            index: committed_index,
        }),
        log_encoding,
    })
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::side_file::SideFileDefect as D;

    const fn error(defect: D) -> SideFileError {
        SideFileError::new(SideFileKind::RaftState, defect)
    }

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
        committed: Some(RaftLogId {
            term: 4,
            index: 0x2122_2324_2526_2728,
        }),
        log_encoding: RAFT_LOG_ENCODING,
    };

    const V1_STATE: RaftState = RaftState {
        committed: None,
        log_encoding: RAFT_LOG_ENCODING_POSTCARD,
        ..STATE
    };

    fn reseal(bytes: &mut [u8]) {
        let n = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..n]);
        bytes[n..].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn encode_writes_the_documented_bytes() {
        #[rustfmt::skip]
        let mut expected: Vec<u8> = [
            &b"FLRS"[..],
            &[0, 2],                          // version
            &[0, 0b1_1111],                   // flags: vote, committed, voted_for, purged, committed id
            &[1, 2, 3, 4, 5, 6, 7, 8],        // vote_term
            &9u64.to_be_bytes(),              // voted_for
            &3u64.to_be_bytes(),              // purged_term
            &[0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18], // purged_index
            &4u64.to_be_bytes(),              // committed_term
            &[0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28], // committed_index
            &[0, 2],                          // log_encoding
            &[0, 0],                          // reserved
            &[0; 4],                          // crc
        ]
        .concat();
        reseal(&mut expected);
        assert_eq!(encode_raft_state(&STATE).to_vec(), expected);
    }

    #[test]
    fn encode_v1_writes_the_old_layout() {
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
        reseal(&mut expected);
        assert_eq!(
            encode_raft_state_v1(&V1_STATE).map(|b| b.to_vec()),
            Some(expected)
        );
        assert_eq!(encode_raft_state_v1(&STATE), None);
        let encoding_2 = RaftState {
            log_encoding: RAFT_LOG_ENCODING,
            ..V1_STATE
        };
        assert_eq!(encode_raft_state_v1(&encoding_2), None);
    }

    #[test]
    fn a_version_1_file_decodes_as_log_encoding_1_without_a_committed_id() {
        let bytes = encode_raft_state_v1(&V1_STATE).unwrap();
        let state = decode_raft_state(&bytes).unwrap();
        assert_eq!(state, V1_STATE);
        assert_eq!(state.log_encoding, RAFT_LOG_ENCODING_POSTCARD);
        assert_eq!(state.committed, None);
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
        let ids = [None, Some(RaftLogId::default()), STATE.last_purged];
        for vote in votes {
            for last_purged in ids {
                for committed in ids {
                    for log_encoding in [0, RAFT_LOG_ENCODING_POSTCARD, RAFT_LOG_ENCODING] {
                        let state = RaftState {
                            vote,
                            last_purged,
                            committed,
                            log_encoding,
                        };
                        assert_eq!(decode_raft_state(&encode_raft_state(&state)), Ok(state));
                        if let Some(v1) = encode_raft_state_v1(&state) {
                            assert_eq!(decode_raft_state(&v1), Ok(state));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn decode_rejects_fields_that_disagree_with_the_flags() {
        for (at, value, flags) in [
            (23, 1, 0),                // voted_for without its flag
            (7, COMMITTED, COMMITTED), // committed without a vote
            (47, 1, 0),                // committed_term without its flag
            (55, 1, 0),                // committed_index without its flag
            (59, 1, 0),                // reserved
        ] {
            let mut bytes = encode_raft_state(&RaftState::default());
            bytes[at] = value as u8;
            reseal(&mut bytes);
            assert_eq!(
                decode_raft_state(&bytes),
                Err(error(D::Inconsistent { flags })),
                "byte {at}"
            );
        }
        let mut bytes = encode_raft_state_v1(&V1_STATE).unwrap();
        bytes[7] = COMMITTED_ID as u8; // version 1 has no committed id
        reseal(&mut bytes);
        assert_eq!(
            decode_raft_state(&bytes),
            Err(error(D::Flags {
                found: COMMITTED_ID,
                known: KNOWN_FLAGS_V1
            }))
        );
    }

    #[test]
    fn a_version_in_a_file_of_the_other_length_is_refused() {
        let mut v2 = encode_raft_state(&STATE);
        v2[5] = 1;
        reseal(&mut v2);
        assert_eq!(
            decode_raft_state(&v2),
            Err(error(D::Version {
                expected: RAFT_STATE_VERSION,
                found: 1
            }))
        );
        let mut v1 = encode_raft_state_v1(&V1_STATE).unwrap();
        v1[5] = 2;
        reseal(&mut v1);
        assert_eq!(
            decode_raft_state(&v1),
            Err(error(D::Version {
                expected: 1,
                found: 2
            }))
        );
    }

    fn rejects_every_truncation_and_every_bit_flip(bytes: &[u8], known: u16) {
        let n = bytes.len();
        for len in 0..n {
            if len == RAFT_STATE_V1_FILE_LEN {
                continue;
            }
            assert_eq!(
                decode_raft_state(&bytes[..len]),
                Err(error(D::Length { len }))
            );
        }
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert_eq!(
            decode_raft_state(&longer),
            Err(error(D::Length { len: n + 1 }))
        );
        let stored = u32::from_be_bytes(bytes[n - 4..].try_into().unwrap());
        for bit in 0..n * 8 {
            let mut flipped = bytes.to_vec();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let field = |at: usize, k: usize| {
                flipped[at..at + k]
                    .iter()
                    .fold(0u32, |acc, &b| (acc << 8) | u32::from(b))
            };
            let flags = field(6, 2) as u16;
            let expected = match bit / 8 {
                0..4 => error(D::Magic {
                    expected: RAFT_STATE_MAGIC,
                    found: field(0, 4),
                }),
                4..6 => error(D::Version {
                    expected: if n == RAFT_STATE_V1_FILE_LEN {
                        1
                    } else {
                        RAFT_STATE_VERSION
                    },
                    found: field(4, 2) as u16,
                }),
                6..8 if flags & !known != 0 => error(D::Flags {
                    found: flags,
                    known,
                }),
                b if b >= n - 4 => error(D::Checksum {
                    expected: field(n - 4, 4),
                    found: stored,
                }),
                _ => error(D::Checksum {
                    expected: stored,
                    found: crc32fast::hash(&flipped[..n - 4]),
                }),
            };
            assert_eq!(decode_raft_state(&flipped), Err(expected), "bit {bit}");
        }
    }

    #[test]
    fn decode_rejects_every_truncation_and_every_bit_flip_naming_the_field() {
        rejects_every_truncation_and_every_bit_flip(&encode_raft_state(&STATE), KNOWN_FLAGS);
        rejects_every_truncation_and_every_bit_flip(
            &encode_raft_state_v1(&V1_STATE).unwrap(),
            KNOWN_FLAGS_V1,
        );
    }
}
