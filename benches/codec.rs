//! The codec alone, in messages per second: frame encode/decode, batch pack/unpack, CRC32C.
//!
//! ```text
//! CARGO_TARGET_DIR=/tmp/bench-target cargo bench --bench codec
//! CARGO_TARGET_DIR=/tmp/bench-target cargo bench --bench codec -- --quick   # a few seconds
//! ```
//!
//! Every group reports `Throughput::Elements` = messages, so criterion prints `Kelem/s` /
//! `Melem/s` = thousands / millions of messages per second. Payloads are 100 B (the issue's
//! small message) unless the name says otherwise; a batch is 1000 messages, the batching limit
//! every client in `python -m benches.compare` uses. Only the public API of the `magnetar` crate
//! is used, so this measures exactly what the engine runs.

use bytes::{Bytes, BytesMut};
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};

use magnetar::protocol::batch::{decode_entries, encode_entry};
use magnetar::protocol::commands::send;
use magnetar::protocol::frame::{decode, encode_payload_command, DEFAULT_MAX_MESSAGE_SIZE, FRAME_PADDING};
use magnetar::protocol::pb::{
    base_command::Type, BaseCommand, CommandMessage, MessageIdData, MessageMetadata, SingleMessageMetadata,
};

const BATCH: usize = 1000;
const MAX_FRAME: usize = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING;

fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| b'A' + (i % 26) as u8).collect()
}

/// Metadata as a producer fills it for one (non-batched) message or for a batch of `n`.
fn metadata(sequence_id: u64, n: usize, size: usize) -> MessageMetadata {
    MessageMetadata {
        producer_name: "standalone-0-42".to_string(),
        sequence_id,
        publish_time: 1_732_000_000_000 + sequence_id,
        num_messages_in_batch: if n > 1 { Some(n as i32) } else { None },
        uncompressed_size: Some(size as u32),
        ..Default::default()
    }
}

/// The per-entry metadata of a batch: what magnetar writes for a plain `send(payload)`.
fn entry_meta(size: usize, sequence_id: u64) -> SingleMessageMetadata {
    SingleMessageMetadata {
        payload_size: size as i32,
        sequence_id: Some(sequence_id),
        ..Default::default()
    }
}

fn batch_body(n: usize, size: usize) -> Bytes {
    let p = payload(size);
    let mut buf = BytesMut::with_capacity(n * (size + 16));
    for i in 0..n {
        encode_entry(&entry_meta(size, i as u64), &p, &mut buf);
    }
    buf.freeze()
}

/// A broker -> consumer `Message` frame carrying `body` (one message, or a batch of `n`).
fn message_frame(n: usize, body: &[u8], dst: &mut BytesMut) {
    let cmd = BaseCommand {
        r#type: Type::Message as i32,
        message: Some(CommandMessage {
            consumer_id: 1,
            message_id: MessageIdData {
                ledger_id: 12,
                entry_id: 345,
                ..Default::default()
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    encode_payload_command(&cmd, &metadata(7, n, body.len()), body, dst);
}

/// One `Message` frame holding a batch of `n` entries of `size` bytes.
fn batch_frame(n: usize, size: usize) -> Bytes {
    let mut frame = BytesMut::new();
    message_frame(n, &batch_body(n, size), &mut frame);
    frame.freeze()
}

fn frame_encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("frame_encode");
    // One Send frame per message (batching off).
    let p = payload(100);
    let meta = metadata(1, 1, p.len());
    g.throughput(Throughput::Elements(1));
    g.bench_function("single_100B", |b| {
        let mut buf = BytesMut::with_capacity(64 * 1024);
        let mut seq = 0u64;
        b.iter(|| {
            seq += 1;
            encode_payload_command(&send(1, seq, 1), black_box(&meta), black_box(&p), &mut buf);
            if buf.len() > 60 * 1024 {
                buf.clear();
            }
        })
    });
    // One Send frame around an already packed batch of 1000 (header, metadata, CRC over 100 KiB).
    let body = batch_body(BATCH, 100);
    let meta = metadata(1, BATCH, body.len());
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("batch_1000x100B", |b| {
        let mut buf = BytesMut::with_capacity(2 * body.len());
        b.iter(|| {
            buf.clear();
            encode_payload_command(&send(1, 1, BATCH as i32), black_box(&meta), black_box(&body), &mut buf);
        })
    });
    g.finish();
}

fn frame_decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("frame_decode");
    // 1000 single-message frames back to back, as a socket read would deliver them.
    let p = payload(100);
    let mut wire = BytesMut::new();
    for _ in 0..BATCH {
        message_frame(1, &p, &mut wire);
    }
    let wire = wire.freeze();
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("single_100B", |b| {
        b.iter_batched(
            || BytesMut::from(&wire[..]),
            |mut src| {
                let mut n = 0;
                while let Some(f) = decode(&mut src, MAX_FRAME).unwrap() {
                    n += f.payload.map_or(0, |p| p.data.len());
                }
                n
            },
            BatchSize::SmallInput,
        )
    });
    // One frame holding a batch of 1000: header + CRC + metadata (entries are split below).
    let one = batch_frame(BATCH, 100);
    g.bench_function("batch_1000x100B", |b| {
        b.iter_batched(
            || BytesMut::from(&one[..]),
            |mut src| decode(&mut src, MAX_FRAME).unwrap().unwrap(),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn batch_pack(c: &mut Criterion) {
    let mut g = c.benchmark_group("batch_pack");
    for size in [100usize, 1024] {
        let p = payload(size);
        g.throughput(Throughput::Elements(BATCH as u64));
        g.bench_with_input(BenchmarkId::new("entries_1000", format!("{size}B")), &p, |b, p| {
            let mut buf = BytesMut::with_capacity(BATCH * (size + 16));
            b.iter(|| {
                buf.clear();
                for i in 0..BATCH {
                    encode_entry(&entry_meta(size, i as u64), black_box(p), &mut buf);
                }
            })
        });
    }
    g.finish();
}

fn batch_unpack(c: &mut Criterion) {
    let mut g = c.benchmark_group("batch_unpack");
    for size in [100usize, 1024] {
        let body = batch_body(BATCH, size);
        g.throughput(Throughput::Elements(BATCH as u64));
        g.bench_with_input(
            BenchmarkId::new("entries_1000", format!("{size}B")),
            &body,
            |b, body| b.iter(|| decode_entries(black_box(body.clone()), BATCH).unwrap()),
        );
    }
    g.finish();
}

/// The full receive path of one batched frame: frame decode (CRC, metadata) + entry split.
fn receive_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("receive_path");
    let one = batch_frame(BATCH, 100);
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("frame_plus_entries_1000x100B", |b| {
        b.iter_batched(
            || BytesMut::from(&one[..]),
            |mut src| {
                let f = decode(&mut src, MAX_FRAME).unwrap().unwrap();
                let p = f.payload.unwrap();
                decode_entries(p.data, p.metadata.num_messages_in_batch.unwrap_or(1) as usize).unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn crc32c(c: &mut Criterion) {
    let mut g = c.benchmark_group("crc32c");
    // Per message of 100 B and 1 KiB, and per 1000-message batch of 100 B (~112 KB checked).
    for (name, bytes, msgs) in [
        ("msg_100B", 100usize, 1u64),
        ("msg_1KiB", 1024, 1),
        ("batch_1000x100B", batch_body(BATCH, 100).len(), BATCH as u64),
    ] {
        let data = payload(bytes);
        g.throughput(Throughput::Elements(msgs));
        g.bench_with_input(BenchmarkId::from_parameter(name), &data, |b, d| {
            b.iter(|| ::crc32c::crc32c(black_box(d)))
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    frame_encode,
    frame_decode,
    batch_pack,
    batch_unpack,
    receive_path,
    crc32c
);
criterion_main!(benches);
