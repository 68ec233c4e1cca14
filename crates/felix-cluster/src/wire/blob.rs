//! serde for byte payloads as byte strings: one length and the bytes, not
//! a sequence of one-byte elements (which postcard would encode and decode
//! a byte at a time).

use serde::de::{Error, SeqAccess, Visitor};
use serde::{Deserializer, Serializer};

struct BlobVisitor;

impl<'de> Visitor<'de> for BlobVisitor {
    type Value = Vec<u8>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a byte string")
    }
    fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }
    fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(b) = seq.next_element::<u8>()? {
            out.push(b);
        }
        Ok(out)
    }
}

pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(bytes)
}

pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    d.deserialize_byte_buf(BlobVisitor)
}

thread_local! {
    /// The frame being decoded on this thread, if any ([`in_frame`]).
    static FRAME: std::cell::RefCell<Option<bytes::Bytes>> = const { std::cell::RefCell::new(None) };
}

/// Runs `decode` on `frame`'s bytes with `frame` at hand, so that a
/// [`shared`] blob borrowed from it becomes a slice of it, not a copy.
pub(super) fn in_frame<T>(frame: &bytes::Bytes, decode: impl FnOnce() -> T) -> T {
    /// Puts back the frame held before, however `decode` ends (a panic
    /// included), so no frame stays pinned on the thread.
    struct Restore(Option<bytes::Bytes>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let held = self.0.take();
            FRAME.with(|f| f.replace(held));
        }
    }
    let _restore = Restore(FRAME.with(|f| f.replace(Some(frame.clone()))));
    decode()
}

/// The same for bytes shared without a copy ([`Bytes`](bytes::Bytes)):
/// a blob of the frame being decoded ([`in_frame`]) becomes a slice of
/// that frame; any other is copied.
pub(super) mod shared {
    use bytes::Bytes;
    use serde::de::{Error, Visitor};
    use serde::{Deserializer, Serializer};

    pub(in crate::wire) fn serialize<S: Serializer>(
        bytes: &Bytes,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytes)
    }

    struct SharedVisitor;

    impl<'de> Visitor<'de> for SharedVisitor {
        type Value = Bytes;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a byte string")
        }
        fn visit_borrowed_bytes<E: Error>(self, v: &'de [u8]) -> Result<Bytes, E> {
            let within = |frame: &Bytes| {
                let (at, end) = (
                    frame.as_ptr() as usize,
                    frame.as_ptr() as usize + frame.len(),
                );
                let v_at = v.as_ptr() as usize;
                v_at >= at && v_at + v.len() <= end
            };
            Ok(super::FRAME.with(|f| match &*f.borrow() {
                Some(frame) if within(frame) => frame.slice_ref(v),
                _ => Bytes::copy_from_slice(v),
            }))
        }
        fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Bytes, E> {
            Ok(Bytes::copy_from_slice(v))
        }
        fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
            Ok(Bytes::from(v))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Bytes, A::Error> {
            super::BlobVisitor.visit_seq(seq).map(Bytes::from)
        }
    }

    pub(in crate::wire) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        d.deserialize_bytes(SharedVisitor)
    }
}

/// The same for a list of payloads.
pub(super) mod list {
    use serde::de::{SeqAccess, Visitor};
    use serde::ser::SerializeSeq;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    struct Ref<'a>(#[serde(with = "super")] &'a Vec<u8>);

    #[derive(Deserialize)]
    struct Owned(#[serde(with = "super")] Vec<u8>);

    pub(in crate::wire) fn serialize<S: Serializer>(
        list: &[Vec<u8>],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(list.len()))?;
        for bytes in list {
            seq.serialize_element(&Ref(bytes))?;
        }
        seq.end()
    }

    struct ListVisitor;

    impl<'de> Visitor<'de> for ListVisitor {
        type Value = Vec<Vec<u8>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of byte strings")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Vec<u8>>, A::Error> {
            // A hostile length is not trusted for the allocation.
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(Owned(bytes)) = seq.next_element()? {
                out.push(bytes);
            }
            Ok(out)
        }
    }

    pub(in crate::wire) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<Vec<u8>>, D::Error> {
        d.deserialize_seq(ListVisitor)
    }
}
