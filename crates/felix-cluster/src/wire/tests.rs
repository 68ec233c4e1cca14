use super::*;

fn append(records: Vec<Vec<u8>>) -> RequestFrame {
    RequestFrame {
        id: 7,
        request: Request::Append {
            shard: ShardName::from(&ShardKey::new("acme", "default", "orders", 3)),
            records,
        },
    }
}

#[test]
fn a_request_frame_round_trips_through_the_codecs() {
    let mut bytes = BytesMut::new();
    ClientCodec::client()
        .encode(append(vec![b"a".to_vec(), vec![0; 300]]), &mut bytes)
        .unwrap();
    // A big-endian length, then the body.
    let len = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
    assert_eq!(len, bytes.len() - 4);
    let frame = ServerCodec::server().decode(&mut bytes).unwrap().unwrap();
    assert_eq!(frame.id, 7);
    assert!(matches!(
        frame.request,
        Request::Append { ref shard, ref records }
            if shard.stream == "orders" && shard.shard == 3 && records.len() == 2 && records[1].len() == 300
    ));
    assert!(bytes.is_empty());
}

#[test]
fn a_partial_frame_waits_for_the_rest() {
    let mut whole = BytesMut::new();
    ClientCodec::client()
        .encode(append(vec![b"abc".to_vec()]), &mut whole)
        .unwrap();
    let mut codec = ServerCodec::server();
    let mut part = BytesMut::from(&whole[..whole.len() - 1]);
    assert!(codec.decode(&mut part).unwrap().is_none());
    part.extend_from_slice(&whole[whole.len() - 1..]);
    assert_eq!(codec.decode(&mut part).unwrap().unwrap().id, 7);
}

#[test]
fn a_length_above_the_limit_is_refused_from_the_header_alone() {
    let mut bytes = BytesMut::new();
    bytes.extend_from_slice(&u32::try_from(MAX_FRAME + 1).unwrap().to_be_bytes());
    let err = ServerCodec::server().decode(&mut bytes).unwrap_err();
    assert!(matches!(err, WireError::Io(ref e) if e.kind() == std::io::ErrorKind::InvalidData));
    // Nothing was reserved for the body.
    assert!(bytes.capacity() < 1 << 20);
}

#[test]
fn a_body_that_is_no_message_is_malformed_with_its_length() {
    let mut bytes = BytesMut::new();
    bytes.extend_from_slice(&5u32.to_be_bytes());
    bytes.extend_from_slice(&[0, 200, 1, 2, 3]);
    let err = ServerCodec::server().decode(&mut bytes).unwrap_err();
    assert!(matches!(err, WireError::Malformed { len: 5, .. }), "{err}");
}

#[test]
fn a_response_round_trips_with_its_error() {
    let mut bytes = BytesMut::new();
    let error = RemoteError::NotLeader {
        node: 2,
        shard: "acme/default/orders/3".into(),
        leader: Some((1, "127.0.0.1:7101".into())),
    };
    ServerCodec::server()
        .encode(
            ResponseFrame {
                id: 9,
                response: Response::Error(error.clone()),
            },
            &mut bytes,
        )
        .unwrap();
    let frame = ClientCodec::client().decode(&mut bytes).unwrap().unwrap();
    assert!(matches!(frame.response, Response::Error(ref e) if *e == error));
    assert_eq!(
        error.to_string(),
        "node 2 does not lead shard acme/default/orders/3; leader: node 1 at 127.0.0.1:7101"
    );
}

#[test]
fn the_fuzz_seed_frames_decode_as_the_messages_they_are_named_for() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/decode_frame");
    let read = |name: &str| BytesMut::from(&std::fs::read(dir.join(name)).unwrap()[..]);
    let decode = |mut bytes: BytesMut| ServerCodec::server().decode(&mut bytes).unwrap().unwrap();
    assert!(matches!(
        decode(read("hello")).request,
        Request::Hello {
            protocol: PROTOCOL_VERSION,
            node: Some(2)
        }
    ));
    assert!(matches!(decode(read("status")).request, Request::Status));
    assert!(matches!(
        decode(read("append")).request,
        Request::Append { ref shard, ref records } if shard.stream == "c" && records == &[b"hi".to_vec()]
    ));
}

#[test]
fn records_decode_as_slices_of_the_frame_not_copies() {
    let bytes = Bytes::from(vec![5u8; 1000]);
    let mut frame = BytesMut::new();
    ServerCodec::server()
        .encode(
            ResponseFrame {
                id: 3,
                response: Response::Records {
                    runs: vec![WireRun {
                        first_offset: 10,
                        position: 32,
                        bytes: bytes.clone(),
                    }],
                    next: 12,
                    offsets: ShardOffsets::default(),
                },
            },
            &mut frame,
        )
        .unwrap();
    let received = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
    let decoded = ClientCodec::client().decode(&mut frame).unwrap().unwrap();
    let Response::Records { runs, next, .. } = decoded.response else {
        panic!("not records: {:?}", decoded.response);
    };
    assert_eq!((runs.len(), next), (1, 12));
    assert_eq!((runs[0].first_offset, runs[0].position), (10, 32));
    assert_eq!(runs[0].bytes, bytes);
    let at = runs[0].bytes.as_ptr() as usize;
    assert!(received.contains(&at) && received.contains(&(at + 999)));
}
