use super::*;
use crate::protocol::commands;
use crate::protocol::pb::{self, KeyValue};

fn metadata() -> MessageMetadata {
    MessageMetadata {
        producer_name: "p".into(),
        sequence_id: 3,
        publish_time: 1_700_000_000_000,
        properties: vec![KeyValue {
            key: "a".into(),
            value: "b".into(),
        }],
        ..Default::default()
    }
}

fn payload_frame(payload: &[u8]) -> BytesMut {
    let mut buf = BytesMut::new();
    encode_payload_command(&commands::send(1, 3, 1), &metadata(), payload, &mut buf);
    buf
}

#[test]
fn simple_frame_has_both_size_fields() {
    let cmd = commands::ping();
    let mut buf = BytesMut::new();
    encode_command(&cmd, &mut buf);
    let cmd_size = cmd.encoded_len();
    assert_eq!(buf.len(), 8 + cmd_size);
    assert_eq!(u32::from_be_bytes(buf[0..4].try_into().unwrap()) as usize, 4 + cmd_size);
    assert_eq!(u32::from_be_bytes(buf[4..8].try_into().unwrap()) as usize, cmd_size);
    let frame = decode(&mut buf, 1 << 20).unwrap().unwrap();
    assert_eq!(frame.command, cmd);
    assert!(frame.payload.is_none());
    assert!(buf.is_empty());
}

#[test]
fn payload_frame_layout_magic_and_crc() {
    let cmd = commands::send(1, 3, 1);
    let meta = metadata();
    let body = b"hello pulsar";
    let buf = payload_frame(body);
    let cmd_size = cmd.encoded_len();
    let meta_size = meta.encoded_len();
    let total = u32::from_be_bytes(buf[0..4].try_into().unwrap()) as usize;
    assert_eq!(total, 4 + cmd_size + 2 + 4 + 4 + meta_size + body.len());
    assert_eq!(buf.len(), 4 + total);
    let at = 8 + cmd_size;
    assert_eq!(&buf[at..at + 2], &[0x0e, 0x01]);
    let crc = u32::from_be_bytes(buf[at + 2..at + 6].try_into().unwrap());
    // The checksum covers the metadata size field, the metadata and the payload.
    assert_eq!(crc, crc32c::crc32c(&buf[at + 6..]));
    assert_eq!(
        u32::from_be_bytes(buf[at + 6..at + 10].try_into().unwrap()) as usize,
        meta_size
    );
    let mut b = buf.clone();
    let frame = decode(&mut b, 1 << 20).unwrap().unwrap();
    let p = frame.payload.unwrap();
    assert_eq!(p.corruption, None);
    assert_eq!(p.metadata, meta);
    assert_eq!(&p.data[..], body);
}

#[test]
fn crc32c_known_vector() {
    // RFC 3720 test vector: 32 bytes of zeros.
    assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8a91_36aa);
}

#[test]
fn corrupt_payload_is_flagged_not_fatal() {
    let mut buf = payload_frame(b"hello pulsar");
    let last = buf.len() - 1;
    buf[last] ^= 0xff;
    let frame = decode(&mut buf, 1 << 20).unwrap().unwrap();
    let p = frame.payload.unwrap();
    assert!(matches!(p.corruption, Some(ProtocolError::ChecksumMismatch { .. })));
}

#[test]
fn broker_entry_metadata_is_read_before_the_checksum() {
    let cmd = commands::send(1, 3, 1);
    let meta = metadata();
    let bem = BrokerEntryMetadata {
        broker_timestamp: Some(5),
        index: Some(77),
    };
    let mut inner = BytesMut::new();
    encode_payload_command(&cmd, &meta, b"x", &mut inner);
    // Splice 0x0e02 + size + BrokerEntryMetadata in after the command and fix the total.
    let cmd_end = 8 + cmd.encoded_len();
    let mut buf = BytesMut::new();
    let extra = 2 + 4 + bem.encoded_len();
    let total = u32::from_be_bytes(inner[0..4].try_into().unwrap()) as usize + extra;
    buf.put_u32(total as u32);
    buf.put_slice(&inner[4..cmd_end]);
    buf.put_u16(MAGIC_BROKER_ENTRY_METADATA);
    buf.put_u32(bem.encoded_len() as u32);
    bem.encode(&mut buf).unwrap();
    buf.put_slice(&inner[cmd_end..]);
    let p = decode(&mut buf, 1 << 20).unwrap().unwrap().payload.unwrap();
    assert_eq!(p.broker_entry_metadata, Some(bem));
    assert_eq!(p.corruption, None);
    assert_eq!(&p.data[..], b"x");
}

#[test]
fn frames_split_across_reads_decode_once_complete() {
    let mut wire = BytesMut::new();
    encode_command(&commands::ping(), &mut wire);
    wire.extend_from_slice(&payload_frame(b"abc"));
    encode_command(&commands::pong(), &mut wire);
    let whole = wire.freeze();
    // Feed one byte at a time: every prefix either yields nothing or whole frames.
    let mut buf = BytesMut::new();
    let mut kinds = Vec::new();
    for b in whole.iter() {
        buf.put_u8(*b);
        while let Some(f) = decode(&mut buf, 1 << 20).unwrap() {
            kinds.push(f.command.r#type);
        }
    }
    assert_eq!(kinds, vec![Type::Ping as i32, Type::Send as i32, Type::Pong as i32]);
    assert!(buf.is_empty());
}

#[test]
fn the_5mb_limit_is_enforced_before_reading_the_body() {
    let limit = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING;
    // A 5 MB payload fits under the padded limit.
    let mut ok = payload_frame(&vec![1u8; DEFAULT_MAX_MESSAGE_SIZE]);
    assert!(decode(&mut ok, limit).unwrap().is_some());
    // Only the 4-byte size is present: the error comes before any body arrives.
    let mut buf = BytesMut::new();
    buf.put_u32((limit + 1) as u32);
    assert_eq!(
        decode(&mut buf, limit),
        Err(ProtocolError::FrameTooLarge { size: limit + 1, limit })
    );
}

#[test]
fn malformed_frames_are_errors() {
    // total < 4
    let mut b = BytesMut::from(&[0u8, 0, 0, 2, 0, 0][..]);
    assert!(decode(&mut b, 1 << 20).is_err());
    // command size larger than the frame
    let mut b = BytesMut::new();
    b.put_u32(8);
    b.put_u32(100);
    b.put_u32(0);
    assert_eq!(
        decode(&mut b, 1 << 20),
        Err(ProtocolError::Malformed("command size exceeds the frame"))
    );
    // garbage protobuf
    let mut b = BytesMut::new();
    b.put_u32(7);
    b.put_u32(3);
    b.put_slice(&[0xff, 0xff, 0xff]);
    assert!(matches!(decode(&mut b, 1 << 20), Err(ProtocolError::Protobuf { .. })));
    // unknown command type
    let mut b = BytesMut::new();
    encode_command(
        &pb::BaseCommand {
            r#type: 999,
            ..Default::default()
        },
        &mut b,
    );
    assert_eq!(decode(&mut b, 1 << 20), Err(ProtocolError::UnknownCommand(999)));
    // bad magic
    let mut b = payload_frame(b"abc");
    let at = 8 + commands::send(1, 3, 1).encoded_len();
    b[at] = 0x0f;
    assert_eq!(decode(&mut b, 1 << 20), Err(ProtocolError::BadMagic(0x0f01)));
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

        /// Arbitrary bytes never panic the decoder and never make it allocate past the limit.
        #[test]
        fn decoder_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut buf = BytesMut::from(&data[..]);
            while let Ok(Some(_)) = decode(&mut buf, 4096) {}
        }

        /// Mutating one byte of a valid payload frame yields an error, a flagged payload, or a
        /// frame; never a panic.
        #[test]
        fn mutated_frames_never_panic(at in 0usize..64, byte in any::<u8>()) {
            let mut buf = payload_frame(b"hello pulsar");
            let at = at % buf.len();
            buf[at] = byte;
            let _ = decode(&mut buf, 1 << 20);
        }

        #[test]
        fn batch_decoder_never_panics(data in proptest::collection::vec(any::<u8>(), 0..256), n in 0usize..1000) {
            let _ = crate::protocol::batch::decode_entries(Bytes::from(data), n);
        }
    }
}
