//! felix-cluster's frame decoders on arbitrary bytes, as a peer or a
//! client could send them: never a panic, never an allocation a frame's
//! header did not bound; a decoded frame re-encodes and decodes to the
//! same frame id.
#![no_main]

use bytes::BytesMut;
use felix_cluster::wire::{ClientCodec, ServerCodec};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::{Decoder, Encoder};

fuzz_target!(|data: &[u8]| {
    // As a node reads a connection: frame after frame until an error.
    let mut bytes = BytesMut::from(data);
    let mut server = ServerCodec::server();
    while let Ok(Some(frame)) = server.decode(&mut bytes) {
        let id = frame.id;
        let mut again = BytesMut::new();
        if ClientCodec::client().encode(frame, &mut again).is_ok() {
            let back = ServerCodec::server().decode(&mut again);
            assert!(matches!(back, Ok(Some(ref f)) if f.id == id));
        }
    }
    // As the connecting side reads the answers.
    let mut bytes = BytesMut::from(data);
    let mut client = ClientCodec::client();
    while let Ok(Some(_)) = client.decode(&mut bytes) {}
});
