//! Starting corpora for the fuzz targets, built with the crate's own encoders so the fuzzers
//! begin from valid frames, commands and messages.

use bytes::BytesMut;
use prost::Message as _;

use super::{flag, frame, message_frame};
use crate::protocol::pb::{self, base_command::Type, BaseCommand, CompressionType};
use crate::protocol::{batch, commands, compression};

/// Starting corpora built with the crate's own encoders: `(target, input)` pairs for the
/// `frames`, `message` and `command` targets.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    let cmds = seed_commands();
    for cmd in &cmds {
        out.push(("command", cmd.encode_to_vec()));
    }
    // A stream of simple and payload frames, fed one byte at a time, in pieces of 1, 7 and 64,
    // and whole; under a limit that admits them all and one that does not.
    let mut stream = BytesMut::new();
    for cmd in cmds.iter().take(6) {
        frame::encode_command(cmd, &mut stream);
    }
    let meta = pb::MessageMetadata {
        producer_name: "p".into(),
        sequence_id: 1,
        publish_time: 1,
        ..Default::default()
    };
    frame::encode_payload_command(&commands::send(1, 1, 1), &meta, b"hello pulsar", &mut stream);
    stream.extend_from_slice(&message_frame(
        3,
        Some(&[8, 1, 16, 2]),
        &meta.encode_to_vec(),
        b"x",
        false,
    ));
    for (sizes, limit) in [(&[0u8][..], 255u8), (&[0, 6, 63], 255), (&[255], 255), (&[3], 0)] {
        let mut input = vec![sizes.len() as u8 - 1];
        input.extend_from_slice(sizes);
        input.push(limit);
        input.extend_from_slice(&stream);
        out.push(("frames", input));
    }
    for input in seed_messages() {
        out.push(("message", input));
    }
    out
}

fn seed_commands() -> Vec<BaseCommand> {
    use pb::command_ack::AckType;
    let id = pb::MessageIdData {
        ledger_id: 7,
        entry_id: 9,
        batch_index: Some(2),
        ..Default::default()
    };
    let mut cmds = vec![
        commands::ping(),
        commands::pong(),
        commands::connect(Some("token"), Some(b"secret".to_vec()), None),
        commands::lookup("persistent://public/default/t", 1, false, None),
        commands::subscribe("t", "s", pb::command_subscribe::SubType::Shared, 1, 2),
        commands::flow(1, 1000),
        commands::ack(1, AckType::Individual, vec![id.clone()], None, Some(3)),
        commands::redeliver(1, vec![id.clone()]),
        commands::seek(1, 4, Some(id.clone()), None),
        commands::send(1, 2, 10),
    ];
    let mut base = |kind: Type, fill: &dyn Fn(&mut BaseCommand)| {
        let mut cmd = BaseCommand {
            r#type: kind as i32,
            ..Default::default()
        };
        fill(&mut cmd);
        cmds.push(cmd);
    };
    base(Type::Message, &|c| {
        c.message = Some(pb::CommandMessage {
            consumer_id: 1,
            message_id: id.clone(),
            redelivery_count: Some(1),
            ack_set: vec![-1, 5],
            consumer_epoch: Some(2),
        })
    });
    base(Type::Success, &|c| {
        c.success = Some(pb::CommandSuccess {
            request_id: 5,
            schema: None,
        })
    });
    base(Type::Connected, &|c| {
        c.connected = Some(pb::CommandConnected {
            server_version: "Pulsar".into(),
            protocol_version: Some(21),
            max_message_size: Some(5 << 20),
            ..Default::default()
        })
    });
    base(Type::SendReceipt, &|c| {
        c.send_receipt = Some(pb::CommandSendReceipt {
            producer_id: 1,
            sequence_id: 2,
            message_id: Some(id.clone()),
            highest_sequence_id: Some(2),
        })
    });
    base(Type::Error, &|c| {
        c.error = Some(pb::CommandError {
            request_id: 6,
            error: 1,
            message: "no".into(),
        })
    });
    base(Type::ConsumerStatsResponse, &|c| {
        c.consumer_stats_response = Some(pb::CommandConsumerStatsResponse {
            request_id: 7,
            msg_rate_out: Some(1.5),
            ..Default::default()
        })
    });
    cmds
}

/// Appends one structured, non-chunked record (see `read_record` for the layout).
fn seed_record(out: &mut Vec<u8>, flags: u8, codec: CompressionType, body: &[u8]) {
    out.extend_from_slice(&[flags, 1, codec as u8]);
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(body);
}

fn seed_batch(out: &mut Vec<u8>, flags: u8, codec: CompressionType, payloads: &[&[u8]]) {
    out.extend_from_slice(&[flags | flag::BATCH, 1, codec as u8, payloads.len() as u8]);
    for p in payloads {
        out.push(p.len() as u8);
        out.extend_from_slice(p);
        out.push(1);
    }
    out.push(0);
}

fn seed_messages() -> Vec<Vec<u8>> {
    let text: Vec<u8> = b"the quick brown fox jumps over the lazy dog ".repeat(8);
    let mut all = Vec::new();
    for codec in 0..5 {
        let codec = CompressionType::try_from(codec).expect("known codec");
        let mut single = Vec::new();
        seed_record(&mut single, flag::COMPRESS, codec, &text);
        let mut batched = Vec::new();
        seed_batch(&mut batched, flag::COMPRESS, codec, &[b"one", b"", b"three"]);
        // Chunked by the harness: three chunks in order; then with a resend and a redelivery.
        let mut chunked = Vec::new();
        seed_record(&mut chunked, flag::COMPRESS | flag::SPLIT, codec, &text);
        chunked.extend_from_slice(&[1, 0, 0, 0]);
        seed_record(&mut chunked, flag::SPLIT, codec, &text);
        chunked.extend_from_slice(&[1, 0, 5, 6, 0, 0]);
        all.extend([single, batched, chunked]);
    }
    // Broker entry metadata, a bad checksum, a wrong declared size, explicit chunk headers.
    let mut misc = Vec::new();
    seed_record(
        &mut misc,
        flag::BEM,
        CompressionType::None,
        b"with broker entry metadata",
    );
    misc.push(0);
    seed_record(&mut misc, flag::BAD_CRC, CompressionType::None, b"corrupt");
    seed_record(&mut misc, flag::COMPRESS | flag::SIZE_RAW, CompressionType::Lz4, &text);
    misc.extend_from_slice(&u32::MAX.to_be_bytes());
    for (chunk_id, part) in [(0u8, &text[..100]), (1, &text[100..])] {
        seed_record(&mut misc, flag::CHUNK_HEADER, CompressionType::None, part);
        misc.extend_from_slice(&[2, chunk_id, 2]);
        misc.extend_from_slice(&(text.len() as u16).to_be_bytes());
    }
    all.push(misc);
    // Raw metadata bytes: a batch of two under zlib.
    let mut raw = BytesMut::new();
    for p in [&b"raw one"[..], b"raw two"] {
        let single = pb::SingleMessageMetadata {
            payload_size: p.len() as i32,
            ..Default::default()
        };
        batch::encode_entry(&single, p, &mut raw);
    }
    let packed = compression::compress(CompressionType::Zlib, &raw).expect("compresses");
    let meta = pb::MessageMetadata {
        producer_name: "raw".into(),
        compression: Some(CompressionType::Zlib as i32),
        uncompressed_size: Some(raw.len() as u32),
        num_messages_in_batch: Some(2),
        ..Default::default()
    }
    .encode_to_vec();
    let mut input = vec![flag::RAW_META, 0];
    input.extend_from_slice(&(meta.len() as u16).to_be_bytes());
    input.extend_from_slice(&meta);
    input.extend_from_slice(&(packed.len() as u16).to_be_bytes());
    input.extend_from_slice(&packed);
    all.push(input);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::{command, frames, message, Reached};

    #[test]
    fn seeds_pass_their_harnesses() {
        for (target, input) in seeds() {
            match target {
                "frames" => frames(&input),
                "message" => {
                    message(&input);
                }
                "command" => command(&input),
                _ => unreachable!(),
            }
        }
    }

    #[test]
    fn well_formed_seed_messages_reach_the_oracle() {
        let seeds = seed_messages();
        let reached: Vec<Reached> = seeds.iter().map(|s| message(s)).collect();
        // Per codec: a single message, a batch of three, two chunked messages (the second with
        // a resend and a redelivery); then the misc and raw seeds.
        for r in &reached[..15] {
            assert!(r.unpacked_checked >= 1, "{r:?}");
        }
        for r in reached[..15].chunks(3) {
            assert_eq!(r[2].reassembled_checked, 2, "{r:?}");
        }
        assert!(
            reached[15].reassembled == 1 && reached[15].unpacked_checked >= 1,
            "{:?}",
            reached[15]
        );
        assert_eq!(reached[16].frames, 1);
        for input in &seeds {
            message(&input[..input.len() / 2]);
        }
    }
}
