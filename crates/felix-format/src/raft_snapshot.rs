//! Bytes of the `raft-snapshot` file: the snapshot of a Raft log kept in a
//! shard whose state machine is the stream itself (felix-cluster's). Such
//! a snapshot holds no data: the records are the log. It is the id of the
//! last entry it covers and the membership in force there, which is what
//! a node needs once the entries below its log start are gone: to restart
//! (the membership cannot be read back from purged entries) and to bring a
//! replica that needs those entries up to the log start (the replica
//! installs the snapshot and restarts its shard just past it).
//!
//! felix-raft writes this file, durably, before the log is purged up to
//! the snapshot; felix storage only knows its name, so a shard directory
//! holding one is not reported as holding a stray. It is an addition of
//! felix storage to format v2 (see `docs/storage-format.md`).
//!
//! Layout, version 1 (big-endian): magic `FLSN` (4), version (2), flags
//! (2), `last_term` (8), `last_index` (8), `membership_term` (8),
//! `membership_index` (8), `body_len` (4), `crc` (4) — the CRC-32 of the
//! header's first 44 bytes followed by the body — then the body: the
//! membership, `body_len` bytes (at most [`MAX_RAFT_SNAPSHOT_BODY_LEN`]) as
//! a membership entry's record holds it after its kind byte (postcard of
//! openraft's `Membership`; felix storage does not read inside it). Flag
//! bit 0: the membership names the entry it was written in
//! (`membership_term`, `membership_index`), which is at or below the last
//! entry; with the bit clear both are zero (the initial membership). The
//! other bits are zero.
//!
//! Decoding checks, in order: the header's length, magic, version and
//! flags; `body_len` against its bound and the bytes present; the CRC; and
//! then the agreement of flags and fields. Decoding borrows the input.

use alloc::vec::Vec;

use crate::bytes_be::u64_at;
use crate::raft_state::RaftLogId;
use crate::side_file::{
    SideFileBody, SideFileChecksum, SideFileDefect, SideFileError, SideFileKind, SideFileLayout,
    SideFileVersion,
};

/// Magic of the `raft-snapshot` file: ASCII `FLSN`, "Felix Log SNapshot".
pub const RAFT_SNAPSHOT_MAGIC: u32 = u32::from_be_bytes(*b"FLSN");
/// Version of the raft-snapshot layout.
pub const RAFT_SNAPSHOT_VERSION: u16 = 1;
/// Length of the raft-snapshot header.
pub const RAFT_SNAPSHOT_HEADER_LEN: usize = 48;
/// The longest membership a raft-snapshot file holds, in bytes: thousands
/// of nodes with their addresses. Longer is refused when written, before
/// anything is.
pub const MAX_RAFT_SNAPSHOT_BODY_LEN: usize = 1 << 20;
/// The largest valid raft-snapshot file: what a reader reads at most.
pub const MAX_RAFT_SNAPSHOT_FILE_LEN: usize = RAFT_SNAPSHOT_HEADER_LEN + MAX_RAFT_SNAPSHOT_BODY_LEN;

const MEMBERSHIP_ID: u16 = 1 << 0;

/// The raft-snapshot file's frame: 48-byte header with flags, `body_len`
/// at byte 40 (at most [`MAX_RAFT_SNAPSHOT_BODY_LEN`]), the CRC at 44 over
/// the header's first 44 bytes and the body.
pub const RAFT_SNAPSHOT_LAYOUT: SideFileLayout = SideFileLayout {
    kind: SideFileKind::RaftSnapshot,
    name: "RaftSnapshot",
    file: "raft-snapshot file",
    field: "raft-snapshot",
    entries: "",
    magic: RAFT_SNAPSHOT_MAGIC,
    versions: &[SideFileVersion {
        version: RAFT_SNAPSHOT_VERSION,
        header_len: RAFT_SNAPSHOT_HEADER_LEN,
        known_flags: MEMBERSHIP_ID,
    }],
    has_flags: true,
    body: SideFileBody::Bytes {
        len_at: 40,
        max: MAX_RAFT_SNAPSHOT_BODY_LEN,
    },
    checksum: SideFileChecksum::HeaderAndBody,
};

/// A snapshot of a stream: the last entry it covers and the membership in
/// force there. Borrows the membership's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RaftSnapshot<'a> {
    /// The id of the last entry the snapshot covers: the log holds the
    /// entries after it.
    pub last: RaftLogId,
    /// The id of the entry the membership was written in, or `None` for
    /// the initial membership. At or below [`last`](Self::last).
    pub membership_id: Option<RaftLogId>,
    /// The membership, as a membership entry's record holds it after its
    /// kind byte.
    pub membership: &'a [u8],
}

const fn error(defect: SideFileDefect) -> SideFileError {
    SideFileError::new(SideFileKind::RaftSnapshot, defect)
}

/// Appends the raft-snapshot file of `snapshot` to `out`.
///
/// Fails, writing nothing, when the membership is longer than
/// [`MAX_RAFT_SNAPSHOT_BODY_LEN`] or its id is past the last entry: no
/// reader should ever be handed a file that [`decode_raft_snapshot`]
/// rejects.
///
/// ```
/// use felix_format::raft_snapshot::{RaftSnapshot, decode_raft_snapshot, encode_raft_snapshot};
/// use felix_format::raft_state::RaftLogId;
///
/// let snapshot = RaftSnapshot {
///     last: RaftLogId { term: 3, index: 999 },
///     membership_id: Some(RaftLogId { term: 1, index: 0 }),
///     membership: b"members",
/// };
/// let mut bytes = Vec::new();
/// encode_raft_snapshot(&snapshot, &mut bytes)?;
/// assert_eq!(&bytes[..4], b"FLSN");
/// assert_eq!(bytes.len(), 48 + 7);
/// assert_eq!(decode_raft_snapshot(&bytes)?, snapshot);
/// # Ok::<(), felix_format::side_file::SideFileError>(())
/// ```
pub fn encode_raft_snapshot(
    snapshot: &RaftSnapshot<'_>,
    out: &mut Vec<u8>,
) -> Result<(), SideFileError> {
    let len = snapshot.membership.len();
    if len > MAX_RAFT_SNAPSHOT_BODY_LEN {
        return Err(error(SideFileDefect::BodyTooLong {
            declared: u32::try_from(len).unwrap_or(u32::MAX),
            max: MAX_RAFT_SNAPSHOT_BODY_LEN,
        }));
    }
    let mut flags = 0;
    if let Some(id) = snapshot.membership_id {
        if id.index > snapshot.last.index {
            return Err(error(SideFileDefect::Inconsistent {
                flags: MEMBERSHIP_ID,
            }));
        }
        flags |= MEMBERSHIP_ID;
    }
    let start = RAFT_SNAPSHOT_LAYOUT.begin(RAFT_SNAPSHOT_VERSION, flags, out);
    let header = out.get_mut(start..).unwrap_or_default();
    put(header, 8, &snapshot.last.term.to_be_bytes());
    put(header, 16, &snapshot.last.index.to_be_bytes());
    if let Some(id) = snapshot.membership_id {
        put(header, 24, &id.term.to_be_bytes());
        put(header, 32, &id.index.to_be_bytes());
    }
    out.extend_from_slice(snapshot.membership);
    RAFT_SNAPSHOT_LAYOUT.seal(out.get_mut(start..).unwrap_or_default());
    Ok(())
}

/// Writes `value` at `at` of `header` (within the header `begin` made).
fn put(header: &mut [u8], at: usize, value: &[u8; 8]) {
    if let Some(dst) = header.get_mut(at..at + value.len()) {
        dst.copy_from_slice(value);
    }
}

/// Decodes a raft-snapshot file: its frame, then the agreement of flags
/// and fields (a membership id at or below the last entry; zeros where its
/// flag is clear).
///
/// ```
/// use felix_format::raft_snapshot::decode_raft_snapshot;
/// use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
///
/// let short = SideFileDefect::Short { len: 4, header_len: 48 };
/// assert_eq!(decode_raft_snapshot(b"FLSN"), Err(SideFileError::new(SideFileKind::RaftSnapshot, short)));
/// ```
pub fn decode_raft_snapshot(bytes: &[u8]) -> Result<RaftSnapshot<'_>, SideFileError> {
    let frame = RAFT_SNAPSHOT_LAYOUT.decode(bytes)?;
    let flags = frame.flags;
    let header = frame.header;
    let last = RaftLogId {
        term: u64_at(header, 8),
        index: u64_at(header, 16),
    };
    let (membership_term, membership_index) = (u64_at(header, 24), u64_at(header, 32));
    let membership_id = (flags & MEMBERSHIP_ID != 0).then_some(RaftLogId {
        term: membership_term,
        index: membership_index,
    });
    let consistent = match membership_id {
        Some(id) => id.index <= last.index,
        None => membership_term == 0 && membership_index == 0,
    };
    if !consistent {
        return Err(error(SideFileDefect::Inconsistent { flags }));
    }
    Ok(RaftSnapshot {
        last,
        membership_id,
        membership: frame.body,
    })
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::side_file::SideFileDefect as D;

    const SNAPSHOT: RaftSnapshot<'static> = RaftSnapshot {
        last: RaftLogId {
            term: 0x0102_0304_0506_0708,
            index: 0x1112_1314_1516_1718,
        },
        membership_id: Some(RaftLogId { term: 2, index: 7 }),
        membership: b"abc",
    };

    fn encode(snapshot: &RaftSnapshot<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        encode_raft_snapshot(snapshot, &mut out).unwrap();
        out
    }

    fn reseal(bytes: &mut [u8]) {
        let crc = crc32fast::hash(&[&bytes[..44], &bytes[48..]].concat());
        bytes[44..48].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn encode_writes_the_documented_bytes() {
        #[rustfmt::skip]
        let mut expected: Vec<u8> = [
            &b"FLSN"[..],
            &[0, 1],                          // version
            &[0, 1],                          // flags: membership id
            &[1, 2, 3, 4, 5, 6, 7, 8],        // last_term
            &[0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18], // last_index
            &2u64.to_be_bytes(),              // membership_term
            &7u64.to_be_bytes(),              // membership_index
            &3u32.to_be_bytes(),              // body_len
            &[0; 4],                          // crc
            b"abc",                           // membership
        ]
        .concat();
        reseal(&mut expected);
        assert_eq!(encode(&SNAPSHOT), expected);
        assert_eq!(decode_raft_snapshot(&expected), Ok(SNAPSHOT));
    }

    #[test]
    fn the_initial_membership_has_no_id_and_zero_fields() {
        let initial = RaftSnapshot {
            membership_id: None,
            ..SNAPSHOT
        };
        let bytes = encode(&initial);
        assert_eq!(&bytes[6..8], &[0, 0]);
        assert_eq!(&bytes[24..40], &[0; 16]);
        assert_eq!(decode_raft_snapshot(&bytes), Ok(initial));
    }

    #[test]
    fn a_membership_id_past_the_last_entry_is_refused_when_written_and_read() {
        let past = RaftSnapshot {
            last: RaftLogId { term: 2, index: 6 },
            ..SNAPSHOT
        };
        let mut out = vec![9];
        assert_eq!(
            encode_raft_snapshot(&past, &mut out),
            Err(error(D::Inconsistent { flags: 1 }))
        );
        assert_eq!(out, [9], "nothing written");
        let mut bytes = encode(&SNAPSHOT);
        bytes[8..24].copy_from_slice(&[0; 16]);
        bytes[23] = 6;
        reseal(&mut bytes);
        assert_eq!(
            decode_raft_snapshot(&bytes),
            Err(error(D::Inconsistent { flags: 1 }))
        );
    }

    #[test]
    fn membership_fields_without_their_flag_are_inconsistent() {
        let mut bytes = encode(&SNAPSHOT);
        bytes[7] = 0;
        reseal(&mut bytes);
        assert_eq!(
            decode_raft_snapshot(&bytes),
            Err(error(D::Inconsistent { flags: 0 }))
        );
    }

    #[test]
    fn a_membership_longer_than_the_bound_is_refused_before_writing() {
        let long = vec![0u8; MAX_RAFT_SNAPSHOT_BODY_LEN + 1];
        let snapshot = RaftSnapshot {
            membership: &long,
            ..SNAPSHOT
        };
        let mut out = Vec::new();
        assert_eq!(
            encode_raft_snapshot(&snapshot, &mut out),
            Err(error(D::BodyTooLong {
                declared: (MAX_RAFT_SNAPSHOT_BODY_LEN + 1) as u32,
                max: MAX_RAFT_SNAPSHOT_BODY_LEN,
            }))
        );
        assert!(out.is_empty());
    }

    #[test]
    fn a_flipped_bit_anywhere_is_refused() {
        let bytes = encode(&SNAPSHOT);
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(
                decode_raft_snapshot(&damaged).is_err(),
                "a flip at byte {at} went unnoticed"
            );
        }
    }

    #[test]
    fn a_cut_file_is_refused_with_its_lengths() {
        let bytes = encode(&SNAPSHOT);
        assert_eq!(
            decode_raft_snapshot(&bytes[..50]),
            Err(error(D::LengthMismatch {
                declared: 3,
                found: 2
            }))
        );
    }
}
