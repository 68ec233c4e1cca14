//! Bytes of the `key` file: a shard directory's exact [`ShardKey`].
//!
//! A shard directory's name is a lossy rendering of its key (each text part
//! cut to 32 characters, everything outside `[A-Za-z0-9-]` replaced by `_`)
//! plus a hash, so the key cannot be read back from the name. The store
//! writes the exact key into the directory when it creates the shard, so a
//! broker can list its store's keys without a catalogue of its own.
//!
//! This file is an addition of felix storage to format v2 (see
//! `docs/storage-format.md`); the reference implementation writes none, and
//! readers that do not know it see a stray file and lose nothing.
//!
//! Layout (big-endian): magic `FLSK` (4), version (2), flags (2, zero),
//! `body_len` (4), `crc` (4) — the CRC-32 of the header's first 12 bytes
//! followed by the body — then the body: for each of tenant, namespace and
//! stream a `u16` byte length and that many bytes of UTF-8, then the shard
//! number (`u32`).
//!
//! Decoding checks, in order: the header's length, magic, version and
//! flags; `body_len` against its bound and against the bytes present; the
//! CRC; and only then the lengths inside the body (each part within the
//! body and within [`MAX_KEY_PART_BYTES`], valid UTF-8, nothing left over).
//! No length is acted on before the CRC covering it has been verified.
//! Decoding borrows the input and allocates nothing.

use alloc::vec::Vec;
use core::fmt;

use crate::ShardKey;
use crate::side_file::{
    SideFileBody, SideFileChecksum, SideFileDefect, SideFileError, SideFileKind, SideFileLayout,
    SideFileVersion,
};

/// Magic of the `key` file: ASCII `FLSK`, "Felix Shard Key".
pub const KEY_FILE_MAGIC: u32 = u32::from_be_bytes(*b"FLSK");
/// Version of the key file layout.
pub const KEY_FILE_VERSION: u16 = 1;
/// Length of the key file header.
pub const KEY_FILE_HEADER_LEN: usize = 16;
/// The longest text part (tenant, namespace or stream) a key file holds,
/// in UTF-8 bytes. A store refuses to create a shard whose key has a longer
/// part, before anything is written.
pub const MAX_KEY_PART_BYTES: usize = 4096;
/// The longest valid body: three parts of [`MAX_KEY_PART_BYTES`] with their
/// `u16` lengths, and the `u32` shard number.
pub const MAX_KEY_FILE_BODY_LEN: usize = 3 * (2 + MAX_KEY_PART_BYTES) + 4;
/// The largest valid key file: what a reader reads at most.
pub const MAX_KEY_FILE_LEN: usize = KEY_FILE_HEADER_LEN + MAX_KEY_FILE_BODY_LEN;

/// A field of the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyPart {
    /// [`ShardKey::tenant`].
    Tenant,
    /// [`ShardKey::namespace`].
    Namespace,
    /// [`ShardKey::stream`].
    Stream,
    /// [`ShardKey::shard`].
    Shard,
}

impl KeyPart {
    /// The field's name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Tenant => "tenant",
            Self::Namespace => "namespace",
            Self::Stream => "stream",
            Self::Shard => "shard",
        }
    }
}

impl fmt::Display for KeyPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What is wrong with one part of a key file's body.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyPartProblem {
    /// The body ends before the part (or its length) does.
    #[error("it needs {needed} bytes, but only {available} are left in the body")]
    Truncated {
        /// Bytes the part (or its length field) needs.
        needed: usize,
        /// Bytes left in the body.
        available: usize,
    },
    /// The part is longer than [`MAX_KEY_PART_BYTES`].
    #[error("it is {len} bytes long; at most {max} are allowed")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// [`MAX_KEY_PART_BYTES`].
        max: usize,
    },
    /// The part's bytes are not UTF-8.
    #[error("it is not UTF-8 (valid up to byte {valid_up_to})")]
    NotUtf8 {
        /// Bytes of the part that are valid UTF-8.
        valid_up_to: usize,
    },
}

/// The key file's frame: 16-byte header with flags (none defined),
/// `body_len` at byte 8 (at most [`MAX_KEY_FILE_BODY_LEN`]), the CRC at 12
/// over the header's first 12 bytes and the body.
pub const KEY_FILE_LAYOUT: SideFileLayout = SideFileLayout {
    kind: SideFileKind::KeyFile,
    name: "KeyFile",
    file: "key file",
    field: "key file",
    entries: "",
    magic: KEY_FILE_MAGIC,
    versions: &[SideFileVersion {
        version: KEY_FILE_VERSION,
        header_len: KEY_FILE_HEADER_LEN,
        known_flags: 0,
    }],
    has_flags: true,
    body: SideFileBody::Bytes {
        len_at: 8,
        max: MAX_KEY_FILE_BODY_LEN,
    },
    checksum: SideFileChecksum::HeaderAndBody,
};

const fn error(defect: SideFileDefect) -> SideFileError {
    SideFileError::new(SideFileKind::KeyFile, defect)
}

/// A decoded key file, borrowing the bytes it was decoded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyFileView<'a> {
    /// The tenant.
    pub tenant: &'a str,
    /// The namespace.
    pub namespace: &'a str,
    /// The stream.
    pub stream: &'a str,
    /// The shard number.
    pub shard: u32,
}

impl KeyFileView<'_> {
    /// The key as an owned [`ShardKey`].
    pub fn to_key(&self) -> ShardKey {
        ShardKey::new(self.tenant, self.namespace, self.stream, self.shard)
    }

    /// Whether this is `key`, compared without allocating.
    pub fn is(&self, key: &ShardKey) -> bool {
        self.tenant == key.tenant
            && self.namespace == key.namespace
            && self.stream == key.stream
            && self.shard == key.shard
    }
}

/// Appends the key file of `key` to `out`.
///
/// Fails, writing nothing, when a text part is longer than
/// [`MAX_KEY_PART_BYTES`]: no reader should ever be handed a file that
/// [`decode_key_file`] rejects.
///
/// ```
/// use felix_format::ShardKey;
/// use felix_format::key_file::{decode_key_file, encode_key_file};
///
/// let key = ShardKey::new("acme", "default", "ünï/orders", 3);
/// let mut bytes = Vec::new();
/// encode_key_file(&key, &mut bytes)?;
/// assert_eq!(bytes.len(), 16 + (2 + 4) + (2 + 7) + (2 + 12) + 4);
/// assert_eq!(decode_key_file(&bytes)?.to_key(), key);
/// # Ok::<(), felix_format::side_file::SideFileError>(())
/// ```
pub fn encode_key_file(key: &ShardKey, out: &mut Vec<u8>) -> Result<(), SideFileError> {
    let parts = [
        (KeyPart::Tenant, &key.tenant),
        (KeyPart::Namespace, &key.namespace),
        (KeyPart::Stream, &key.stream),
    ];
    for (part, text) in parts {
        if text.len() > MAX_KEY_PART_BYTES {
            return Err(error(SideFileDefect::KeyPart {
                part,
                problem: KeyPartProblem::TooLong {
                    len: text.len(),
                    max: MAX_KEY_PART_BYTES,
                },
            }));
        }
    }
    let start = KEY_FILE_LAYOUT.begin(KEY_FILE_VERSION, 0, out);
    for (_, text) in parts {
        // At most MAX_KEY_PART_BYTES, checked above.
        out.extend_from_slice(&(text.len() as u16).to_be_bytes());
        out.extend_from_slice(text.as_bytes());
    }
    out.extend_from_slice(&key.shard.to_be_bytes());
    KEY_FILE_LAYOUT.seal(out.get_mut(start..).unwrap_or_default());
    Ok(())
}

/// Decodes a key file.
///
/// ```
/// use felix_format::key_file::decode_key_file;
/// use felix_format::side_file::{SideFileDefect, SideFileError, SideFileKind};
///
/// let short = SideFileDefect::Short { len: 4, header_len: 16 };
/// assert_eq!(decode_key_file(b"FLSK"), Err(SideFileError::new(SideFileKind::KeyFile, short)));
/// ```
pub fn decode_key_file(bytes: &[u8]) -> Result<KeyFileView<'_>, SideFileError> {
    let mut rest = KEY_FILE_LAYOUT.decode(bytes)?.body;
    let tenant = take_text(&mut rest, KeyPart::Tenant)?;
    let namespace = take_text(&mut rest, KeyPart::Namespace)?;
    let stream = take_text(&mut rest, KeyPart::Stream)?;
    let Some((shard, rest)) = rest.split_first_chunk::<4>() else {
        return Err(error(SideFileDefect::KeyPart {
            part: KeyPart::Shard,
            problem: KeyPartProblem::Truncated {
                needed: 4,
                available: rest.len(),
            },
        }));
    };
    if !rest.is_empty() {
        return Err(error(SideFileDefect::TrailingBytes { count: rest.len() }));
    }
    Ok(KeyFileView {
        tenant,
        namespace,
        stream,
        shard: u32::from_be_bytes(*shard),
    })
}

/// Takes one length-prefixed UTF-8 part off the front of `rest`.
fn take_text<'a>(rest: &mut &'a [u8], part: KeyPart) -> Result<&'a str, SideFileError> {
    let fail = |problem| error(SideFileDefect::KeyPart { part, problem });
    let Some((len, after)) = rest.split_first_chunk::<2>() else {
        return Err(fail(KeyPartProblem::Truncated {
            needed: 2,
            available: rest.len(),
        }));
    };
    let len = usize::from(u16::from_be_bytes(*len));
    if len > MAX_KEY_PART_BYTES {
        return Err(fail(KeyPartProblem::TooLong {
            len,
            max: MAX_KEY_PART_BYTES,
        }));
    }
    let Some((text, after)) = after.split_at_checked(len) else {
        return Err(fail(KeyPartProblem::Truncated {
            needed: len,
            available: after.len(),
        }));
    };
    let text = core::str::from_utf8(text).map_err(|e| {
        fail(KeyPartProblem::NotUtf8 {
            valid_up_to: e.valid_up_to(),
        })
    })?;
    *rest = after;
    Ok(text)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::checksum::{crc32, crc32_continue};
    use crate::side_file::SideFileDefect as D;

    fn checksum(file: &[u8]) -> u32 {
        crc32_continue(crc32(&file[..12]), &[&file[16..]])
    }

    fn encoded(key: &ShardKey) -> Vec<u8> {
        let mut bytes = Vec::new();
        encode_key_file(key, &mut bytes).unwrap();
        bytes
    }

    /// Recomputes the CRC after a deliberate edit, so the edit is the
    /// file's only defect.
    fn reseal(bytes: &mut [u8]) {
        let crc = checksum(bytes);
        bytes[12..16].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    #[rustfmt::skip]
    fn encode_key_file_golden_bytes() {
        let bytes = encoded(&ShardKey::new("a", "", "xy", 7));
        let mut expected: Vec<u8> = [
            0x46, 0x4C, 0x53, 0x4B,       // magic "FLSK"
            0x00, 0x01,                   // version 1
            0x00, 0x00,                   // flags
            0x00, 0x00, 0x00, 0x0D,       // body_len 13
            0, 0, 0, 0,                   // crc (filled in below)
            0x00, 0x01, b'a',             // tenant
            0x00, 0x00,                   // namespace (empty)
            0x00, 0x02, b'x', b'y',       // stream
            0x00, 0x00, 0x00, 0x07,       // shard 7
        ].to_vec();
        let crc = crc32_continue(crc32(&expected[..12]), &[&expected[16..]]);
        expected[12..16].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(bytes, expected);
    }

    #[test]
    fn encode_key_file_part_over_limit_writes_nothing() {
        let key = ShardKey::new("t", "n".repeat(MAX_KEY_PART_BYTES + 1), "s", 0);
        let mut out = b"kept".to_vec();
        assert_eq!(
            encode_key_file(&key, &mut out),
            Err(error(D::KeyPart {
                part: KeyPart::Namespace,
                problem: KeyPartProblem::TooLong {
                    len: MAX_KEY_PART_BYTES + 1,
                    max: MAX_KEY_PART_BYTES
                }
            }))
        );
        assert_eq!(out, b"kept");
    }

    #[test]
    fn encode_key_file_longest_parts_round_trip_at_the_bound() {
        let long = "é".repeat(MAX_KEY_PART_BYTES / 2);
        let key = ShardKey::new(long.as_str(), long.as_str(), long.as_str(), u32::MAX);
        let bytes = encoded(&key);
        assert_eq!(bytes.len(), MAX_KEY_FILE_LEN);
        assert_eq!(decode_key_file(&bytes).unwrap().to_key(), key);
    }

    #[test]
    fn decode_key_file_header_damage_in_check_order() {
        let good = encoded(&ShardKey::new("t", "n", "s", 1));
        let mut magic = good.clone();
        magic[3] = b'X';
        assert_eq!(
            decode_key_file(&magic),
            Err(error(D::Magic {
                found: 0x464c_5358,
                expected: KEY_FILE_MAGIC
            }))
        );
        let mut version = good.clone();
        version[5] = 2;
        assert_eq!(
            decode_key_file(&version),
            Err(error(D::Version {
                found: 2,
                expected: KEY_FILE_VERSION
            }))
        );
        let mut flags = good.clone();
        flags[7] = 1;
        assert_eq!(
            decode_key_file(&flags),
            Err(error(D::Flags { found: 1, known: 0 }))
        );
        let mut huge = good.clone();
        huge[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(
            decode_key_file(&huge),
            Err(error(D::BodyTooLong {
                declared: u32::MAX,
                max: MAX_KEY_FILE_BODY_LEN
            }))
        );
        assert_eq!(
            decode_key_file(&good[..good.len() - 1]),
            Err(error(D::LengthMismatch {
                declared: 13,
                found: 12
            }))
        );
        let mut flipped = good.clone();
        flipped[17] ^= 0x01;
        assert!(matches!(
            decode_key_file(&flipped),
            Err(SideFileError {
                kind: SideFileKind::KeyFile,
                defect: D::Checksum { .. },
                ..
            })
        ));
    }

    #[test]
    fn decode_key_file_body_damage_under_a_valid_crc() {
        let good = encoded(&ShardKey::new("t", "n", "s", 1));
        // Tenant length 200 inside a 13-byte body.
        let mut long = good.clone();
        long[16..18].copy_from_slice(&200u16.to_be_bytes());
        reseal(&mut long);
        assert_eq!(
            decode_key_file(&long),
            Err(error(D::KeyPart {
                part: KeyPart::Tenant,
                problem: KeyPartProblem::Truncated {
                    needed: 200,
                    available: 11
                }
            }))
        );
        let mut over = good.clone();
        over[16..18].copy_from_slice(&5000u16.to_be_bytes());
        reseal(&mut over);
        assert_eq!(
            decode_key_file(&over),
            Err(error(D::KeyPart {
                part: KeyPart::Tenant,
                problem: KeyPartProblem::TooLong {
                    len: 5000,
                    max: MAX_KEY_PART_BYTES
                }
            }))
        );
        let mut not_utf8 = good.clone();
        not_utf8[21] = 0xFF;
        reseal(&mut not_utf8);
        assert_eq!(
            decode_key_file(&not_utf8),
            Err(error(D::KeyPart {
                part: KeyPart::Namespace,
                problem: KeyPartProblem::NotUtf8 { valid_up_to: 0 }
            }))
        );
        let mut trailing = good.clone();
        trailing.push(0);
        trailing[8..12].copy_from_slice(&14u32.to_be_bytes());
        reseal(&mut trailing);
        assert_eq!(
            decode_key_file(&trailing),
            Err(error(D::TrailingBytes { count: 1 }))
        );
        let mut no_shard = good[..good.len() - 2].to_vec();
        no_shard[8..12].copy_from_slice(&11u32.to_be_bytes());
        reseal(&mut no_shard);
        assert_eq!(
            decode_key_file(&no_shard),
            Err(error(D::KeyPart {
                part: KeyPart::Shard,
                problem: KeyPartProblem::Truncated {
                    needed: 4,
                    available: 2
                }
            }))
        );
    }

    #[test]
    fn key_file_view_is_compares_every_part() {
        let key = ShardKey::new("t", "n", "s", 1);
        let bytes = encoded(&key);
        let view = decode_key_file(&bytes).unwrap();
        assert!(view.is(&key));
        assert!(!view.is(&ShardKey::new("t", "n", "s", 2)));
        assert!(!view.is(&ShardKey::new("t", "n", "S", 1)));
    }
}
