//! The key file codec: any key within the bounds round trips, arbitrary
//! bytes never panic, and every single-bit flip of a valid file is caught.

use felix_format::ShardKey;
use felix_format::key_file::{MAX_KEY_FILE_LEN, decode_key_file, encode_key_file};
use felix_format::side_file::{SideFileDefect as D, SideFileError, SideFileKind};
use proptest::prelude::*;

fn error(defect: D) -> SideFileError {
    SideFileError::new(SideFileKind::KeyFile, defect)
}

fn key() -> impl Strategy<Value = ShardKey> {
    (".{0,40}", ".{0,40}", ".{0,40}", any::<u32>())
        .prop_map(|(t, n, s, shard)| ShardKey::new(t, n, s, shard))
}

fn encoded(key: &ShardKey) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_key_file(key, &mut bytes).unwrap();
    bytes
}

proptest! {
    #[test]
    fn encode_key_file_any_key_round_trips(key in key()) {
        let bytes = encoded(&key);
        prop_assert_eq!(
            bytes.len(),
            16 + 3 * 2 + key.tenant.len() + key.namespace.len() + key.stream.len() + 4
        );
        let view = decode_key_file(&bytes).unwrap();
        prop_assert!(view.is(&key));
        prop_assert_eq!(view.to_key(), key);
    }

    #[test]
    fn decode_key_file_arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
        let _ = decode_key_file(&bytes);
    }

    /// With a valid header in front, arbitrary bodies reach the body checks.
    #[test]
    fn decode_key_file_arbitrary_body_under_a_valid_crc_never_panics(body in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut bytes = encoded(&ShardKey::new("", "", "", 0));
        bytes.truncate(16);
        bytes[8..12].copy_from_slice(&(body.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&body);
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&bytes[..12]);
        hasher.update(&bytes[16..]);
        let crc = hasher.finalize();
        bytes[12..16].copy_from_slice(&crc.to_be_bytes());
        match decode_key_file(&bytes) {
            Ok(view) => {
                // Whatever decodes re-encodes to the same bytes.
                prop_assert_eq!(encoded(&view.to_key()), bytes);
            }
            Err(err) => prop_assert!(
                matches!(
                    err,
                    SideFileError {
                        kind: SideFileKind::KeyFile,
                        defect: D::KeyPart { .. } | D::TrailingBytes { .. },
                        embedded: None,
                    }
                ),
                "{err:?}"
            ),
        }
    }

    #[test]
    fn decode_key_file_any_bit_flip_is_rejected(key in key(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut bytes = encoded(&key);
        let i = at.index(bytes.len());
        bytes[i] ^= 1 << bit;
        let err = decode_key_file(&bytes).unwrap_err();
        // Each header field is checked before the CRC; the CRC covers the
        // length and the body, so a flip there is a checksum mismatch.
        let SideFileError { kind: SideFileKind::KeyFile, defect, embedded: None } = err else {
            return Err(TestCaseError::fail(format!("not a key file's error: {err:?}")));
        };
        let kind_ok = match i {
            0..4 => matches!(defect, D::Magic { .. }),
            4..6 => matches!(defect, D::Version { .. }),
            6..8 => matches!(defect, D::Flags { .. }),
            8..12 => matches!(
                defect,
                D::BodyTooLong { .. } | D::LengthMismatch { .. }
            ),
            _ => matches!(defect, D::Checksum { .. }),
        };
        prop_assert!(kind_ok, "flip of bit {} at byte {}: {:?}", bit, i, err);
    }
}

#[test]
fn decode_key_file_every_truncation_is_rejected() {
    let bytes = encoded(&ShardKey::new("acme", "default", "orders", 0));
    for len in 0..bytes.len() {
        let err = decode_key_file(&bytes[..len]).unwrap_err();
        let expected = if len < 16 {
            error(D::Short {
                len,
                header_len: 16,
            })
        } else {
            error(D::LengthMismatch {
                declared: 27,
                found: len - 16,
            })
        };
        assert_eq!(err, expected, "cut at {len}");
    }
}

#[test]
fn max_key_file_len_is_the_bound_a_reader_reads() {
    assert_eq!(MAX_KEY_FILE_LEN, 16 + 3 * (2 + 4096) + 4);
}
