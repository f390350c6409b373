//! Harness bodies for the coverage-guided fuzzers in `fuzz/`, kept here so that plain
//! `cargo test` replays their minimised corpora (`tests/fuzz_corpus.rs`) with no fuzzing
//! toolchain. Each takes arbitrary bytes and panics only when an invariant of the protocol layer
//! breaks: a panic here is a bug found.
//!
//! - [`frames`]: the streaming frame decoder, fed in pieces whose sizes come from the input,
//!   must decode exactly what it decodes from the whole stream at once, and never reserve past
//!   its size limit.
//! - [`message`]: the consumer's message path. Records in the input describe `Message` frames;
//!   the harness writes them with correct sizes and CRC32C (unless a record asks otherwise) so
//!   the fuzzer reaches metadata, codecs, batches and chunk reassembly, then decodes them as the
//!   consumer does. Well-formed records must come back byte for byte.
//! - [`command`]: `BaseCommand` decoding, re-encoding and framing.
//!
//! [`seeds`] builds starting corpora from the crate's own encoders.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message as _;

use super::chunks::{ChunkAssembler, ChunkIn, ChunkLimits, ChunkOutcome};
use super::entry::{self, MAX_BATCH_MESSAGES};
use super::frame::{self, Frame, MAGIC_BROKER_ENTRY_METADATA, MAGIC_CRC32C};
use super::pb::{self, base_command::Type, BaseCommand, CompressionType};
use super::{batch, commands, compression, ProtocolError};

/// Frame size limit of the harnesses: small, so oversized frames are found quickly.
const MAX_FRAME: usize = 1 << 20;
/// Decompression limit of the message harness.
const MAX_UNCOMPRESSED: usize = 256 << 10;
/// Largest reassembled chunked message in the message harness.
const MAX_CHUNKED: usize = 64 << 10;
/// Records read from one input, so one input cannot run for long.
const MAX_RECORDS: usize = 64;

/// Reads values off the input; an exhausted input reads as zeros, so every input is valid.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    fn byte(&mut self) -> u8 {
        let (first, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        *first
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        head
    }
}

/// What a decode result must agree on; commands hold doubles, so they compare as their bytes.
fn fingerprint(r: &Result<Frame, ProtocolError>) -> Result<(Vec<u8>, Option<Vec<u8>>), ProtocolError> {
    let f = r.as_ref().map_err(Clone::clone)?;
    let payload = f.payload.as_ref().map(|p| {
        let mut v = p.metadata.encode_to_vec();
        v.extend_from_slice(&p.data);
        v.extend(p.broker_entry_metadata.map(|b| b.encode_to_vec()).unwrap_or_default());
        v.extend(format!("{:?}", p.corruption).bytes());
        v
    });
    Ok((f.command.encode_to_vec(), payload))
}

/// Decodes until the stream needs more bytes or fails; a failure ends the stream, as it closes
/// the connection.
fn drain(buf: &mut BytesMut, limit: usize, out: &mut Vec<Result<Frame, ProtocolError>>) -> bool {
    loop {
        match frame::decode(buf, limit) {
            Ok(Some(f)) => out.push(Ok(f)),
            Ok(None) => return true,
            Err(e) => {
                out.push(Err(e));
                return false;
            }
        }
    }
}

/// Input: `[n][n piece sizes][limit byte][stream]`. The stream is decoded whole, then fed in
/// pieces of the given sizes (cycling); both must yield the same frames and the same error.
pub fn frames(data: &[u8]) {
    let mut input = Input(data);
    let sizes: Vec<usize> = (0..input.byte() % 8 + 1).map(|_| input.byte() as usize + 1).collect();
    let limit = 64 + input.byte() as usize * 64;
    let stream = input.0;

    let mut whole = Vec::new();
    drain(&mut BytesMut::from(stream), limit, &mut whole);

    let mut pieces = Vec::new();
    let mut buf = BytesMut::new();
    let mut at = 0;
    for size in sizes.iter().cycle() {
        if at >= stream.len() {
            break;
        }
        let end = (at + size).min(stream.len());
        buf.extend_from_slice(&stream[at..end]);
        at = end;
        if !drain(&mut buf, limit, &mut pieces) {
            break;
        }
        // Reservations follow declared sizes only once they are under the limit.
        assert!(
            buf.capacity() <= 2 * (stream.len() + limit + 8) + 4096,
            "capacity {} for a {}-byte stream under a {limit}-byte limit",
            buf.capacity(),
            stream.len()
        );
    }
    let a: Vec<_> = whole.iter().map(fingerprint).collect();
    let b: Vec<_> = pieces.iter().map(fingerprint).collect();
    assert_eq!(a, b, "streamed decode differs from whole decode");
}

/// Input: a `BaseCommand`'s protobuf bytes. Whatever decodes must re-encode to bytes that decode
/// to the same command, and survive framing.
pub fn command(data: &[u8]) {
    let Ok(cmd) = BaseCommand::decode(data) else {
        return;
    };
    let bytes = cmd.encode_to_vec();
    let again = BaseCommand::decode(&bytes[..]).expect("re-encoded command decodes");
    assert_eq!(again.encode_to_vec(), bytes, "re-encoding is not stable");
    let _ = commands::response_request_id(&cmd);
    let mut buf = BytesMut::new();
    frame::encode_command(&cmd, &mut buf);
    match frame::decode(&mut buf, usize::MAX) {
        Ok(Some(f)) => {
            assert!(Type::try_from(cmd.r#type).is_ok());
            assert_eq!(f.command.encode_to_vec(), bytes);
            assert!(f.payload.is_none() && buf.is_empty());
        }
        Err(ProtocolError::UnknownCommand(t)) => assert_eq!(t, cmd.r#type),
        other => panic!("a framed command decoded as {other:?}"),
    }
}

/// Record flags of the message harness.
mod flag {
    pub const RAW_META: u8 = 1;
    pub const BATCH: u8 = 2;
    pub const COMPRESS: u8 = 4;
    pub const SIZE_RAW: u8 = 8;
    pub const CHUNK_HEADER: u8 = 16;
    pub const SPLIT: u8 = 32;
    pub const BEM: u8 = 64;
    pub const BAD_CRC: u8 = 128;
}

/// One `Message` frame to write, and what unpacking it must give when it is well-formed.
struct Record {
    meta: Vec<u8>,
    body: Bytes,
    bem: Option<Vec<u8>>,
    bad_crc: bool,
    oracle: Option<Vec<Bytes>>,
    /// Sent again at the entry of the record at this index (a broker redelivery), not a new one.
    same_entry_as: Option<usize>,
}

/// Writes a `Message` frame around `meta` bytes taken as they are, with correct sizes and
/// (unless `bad_crc`) checksum.
fn message_frame(entry_id: u64, bem: Option<&[u8]>, meta: &[u8], payload: &[u8], bad_crc: bool) -> BytesMut {
    let cmd = BaseCommand {
        r#type: Type::Message as i32,
        message: Some(pb::CommandMessage {
            consumer_id: 1,
            message_id: pb::MessageIdData {
                ledger_id: 1,
                entry_id,
                ..Default::default()
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut body = BytesMut::new();
    let cmd = cmd.encode_to_vec();
    body.put_u32(cmd.len() as u32);
    body.put_slice(&cmd);
    if let Some(bem) = bem {
        body.put_u16(MAGIC_BROKER_ENTRY_METADATA);
        body.put_u32(bem.len() as u32);
        body.put_slice(bem);
    }
    let mut checked = BytesMut::with_capacity(4 + meta.len() + payload.len());
    checked.put_u32(meta.len() as u32);
    checked.put_slice(meta);
    checked.put_slice(payload);
    body.put_u16(MAGIC_CRC32C);
    body.put_u32(crc32c::crc32c(&checked) ^ u32::from(bad_crc));
    body.put_slice(&checked);
    let mut out = BytesMut::with_capacity(4 + body.len());
    out.put_u32(body.len() as u32);
    out.put_slice(&body);
    out
}

/// Reads a structured message (not its chunking) and what it must unpack to.
fn structured(input: &mut Input<'_>, flags: u8) -> (pb::MessageMetadata, Bytes, Option<Vec<Bytes>>) {
    let codec_byte = input.byte() % 6;
    let codec = CompressionType::try_from(i32::from(codec_byte)).ok();
    let mut meta = pb::MessageMetadata {
        producer_name: "fuzz".into(),
        compression: Some(codec.map_or(7, |c| c as i32)),
        ..Default::default()
    };
    let mut well_formed = codec.is_some() && flags & flag::SIZE_RAW == 0;
    let (raw, expected) = if flags & flag::BATCH != 0 {
        let n = input.byte() % 9;
        let mut raw = BytesMut::new();
        let mut expected = Vec::new();
        for _ in 0..n {
            let len = input.byte() % 64;
            let payload = input.take(len.into());
            let skew = input.byte();
            let declared = if skew % 8 == 0 {
                well_formed = false;
                payload.len() as i32 + 1 + i32::from(skew)
            } else {
                payload.len() as i32
            };
            let single = pb::SingleMessageMetadata {
                payload_size: declared,
                partition_key: (skew % 3 == 0).then(|| "k".into()),
                ..Default::default()
            };
            batch::encode_entry(&single, payload, &mut raw);
            expected.push(Bytes::copy_from_slice(payload));
        }
        let count = match input.byte() % 4 {
            0 | 1 => i32::from(n),
            2 => i32::from(n) + 1,
            _ => input.u32() as i32,
        };
        well_formed &= count == i32::from(n) && n > 0;
        meta.num_messages_in_batch = Some(count);
        (raw.freeze(), expected)
    } else {
        let len = input.u16() % 2048;
        let body = Bytes::copy_from_slice(input.take(len.into()));
        (body.clone(), vec![body])
    };
    meta.uncompressed_size = Some(if flags & flag::SIZE_RAW != 0 {
        input.u32()
    } else {
        raw.len() as u32
    });
    let body = match codec {
        Some(c) if flags & flag::COMPRESS != 0 => Bytes::from(compress(c, &raw)),
        // Uncompressed bytes labelled with a codec: garbage for it, unless it is None.
        _ => {
            well_formed &= codec == Some(CompressionType::None);
            raw
        }
    };
    (meta, body, well_formed.then_some(expected))
}

/// Compresses as a producer would, reusing this thread's zlib and zstd contexts: making them
/// anew for every record would cost more than the code under test.
fn compress(codec: CompressionType, raw: &[u8]) -> Vec<u8> {
    use std::cell::RefCell;
    thread_local! {
        static ZLIB: RefCell<flate2::Compress> = RefCell::new(flate2::Compress::new(flate2::Compression::fast(), true));
        static ZSTD: RefCell<zstd::bulk::Compressor<'static>> =
            RefCell::new(zstd::bulk::Compressor::new(1).expect("zstd context"));
    }
    match codec {
        CompressionType::Zlib => ZLIB.with(|z| {
            let mut z = z.borrow_mut();
            z.reset();
            let mut out = Vec::with_capacity(raw.len() + 64);
            loop {
                let read = z.total_in() as usize;
                match z.compress_vec(&raw[read..], &mut out, flate2::FlushCompress::Finish) {
                    Ok(flate2::Status::StreamEnd) => return out,
                    Ok(_) => out.reserve(out.capacity()),
                    Err(e) => panic!("zlib: {e}"),
                }
            }
        }),
        CompressionType::Zstd => ZSTD.with(|z| z.borrow_mut().compress(raw).expect("zstd compresses")),
        _ => compression::compress(codec, raw).expect("compresses"),
    }
}

/// Reads the next record; `frames` receives its frames, `split` the uuid of a message the
/// harness chunked itself (whose reassembly must give `body` back).
fn read_record(input: &mut Input<'_>, flags: u8, serial: u64) -> (Vec<Record>, Option<(String, Bytes)>) {
    if flags & flag::RAW_META != 0 {
        let len = input.u16() % 1024;
        let meta = input.take(len.into()).to_vec();
        let len = input.u16() % 4096;
        let body = Bytes::copy_from_slice(input.take(len.into()));
        let record = Record {
            meta,
            body,
            bem: None,
            bad_crc: flags & flag::BAD_CRC != 0,
            oracle: None,
            same_entry_as: None,
        };
        return (vec![record], None);
    }
    let (mut meta, body, mut oracle) = structured(input, flags);
    let bem = (flags & flag::BEM != 0).then(|| {
        let mode = input.byte();
        if mode % 2 == 0 {
            pb::BrokerEntryMetadata {
                broker_timestamp: Some(u64::from(mode)),
                index: Some(serial),
            }
            .encode_to_vec()
        } else {
            input.take(usize::from(mode % 32)).to_vec()
        }
    });
    let bad_crc = flags & flag::BAD_CRC != 0;
    if flags & flag::CHUNK_HEADER != 0 {
        meta.uuid = Some(format!("u{}", input.byte() % 4));
        meta.chunk_id = Some(i32::from(input.byte() as i8));
        meta.num_chunks_from_msg = Some(i32::from(input.byte() as i8));
        let total = input.u16();
        meta.total_chunk_msg_size = (total != u16::MAX).then_some(i32::from(total));
        if meta.num_chunks_from_msg.unwrap_or(0) > 1 {
            oracle = None;
        }
        let record = Record {
            meta: meta.encode_to_vec(),
            body,
            bem,
            bad_crc,
            oracle,
            same_entry_as: None,
        };
        return (vec![record], None);
    }
    if flags & flag::SPLIT == 0 || body.len() < 2 {
        let meta = meta.encode_to_vec();
        return (
            vec![Record {
                meta,
                body,
                bem,
                bad_crc,
                oracle,
                same_entry_as: None,
            }],
            None,
        );
    }
    // Chunk the body as a producer would, then send the chunks in an order the input scripts:
    // in sequence, resent (new entry), redelivered from the start (same entries), or lost.
    let k = (2 + usize::from(input.byte() % 3)).min(body.len());
    let size = body.len().div_ceil(k);
    let k = body.len().div_ceil(size);
    let uuid = format!("s{serial}");
    meta.uuid = Some(uuid.clone());
    meta.num_chunks_from_msg = Some(k as i32);
    meta.total_chunk_msg_size = Some(body.len() as i32);
    // (chunk index, sent again at the entry of this earlier send)
    let mut sends: Vec<(usize, Option<usize>)> = Vec::new();
    let mut cursor = 0;
    while cursor < k && sends.len() < 4 * k {
        match input.byte() % 8 {
            5 if cursor > 0 => sends.push((cursor - 1, None)),
            6 => {
                // Everything sent so far, again at the same entries, as after a resubscribe.
                let again: Vec<_> = (0..sends.len())
                    .filter(|j| sends[*j].1.is_none())
                    .map(|j| (sends[j].0, Some(j)))
                    .collect();
                sends.extend(again);
            }
            7 => cursor += 1,
            _ => {
                sends.push((cursor, None));
                cursor += 1;
            }
        }
    }
    let out = sends
        .into_iter()
        .map(|(i, same_entry_as)| {
            let mut m = meta.clone();
            m.chunk_id = Some(i as i32);
            Record {
                meta: m.encode_to_vec(),
                body: body.slice(i * size..((i + 1) * size).min(body.len())),
                bem: bem.clone(),
                bad_crc: bad_crc && i == 0,
                oracle: oracle.clone(),
                same_entry_as,
            }
        })
        .collect();
    (out, Some((uuid, body)))
}

/// How deep one [`message`] input went, so tests can check that seeds reach the oracles.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reached {
    /// Frames that decoded with a sound payload section.
    pub frames: usize,
    /// Chunked messages reassembled.
    pub reassembled: usize,
    /// Reassembled messages checked against the body the harness chunked.
    pub reassembled_checked: usize,
    /// Entries unpacked and checked against what their record encoded.
    pub unpacked_checked: usize,
}

/// The consumer's path from an entry to its messages, with every invariant it relies on.
struct Consumer {
    chunks: ChunkAssembler,
    /// Bodies of messages the harness chunked itself, by uuid, while nothing else used the uuid.
    split: HashMap<String, Bytes>,
    /// Uuids that frames the harness did not chunk itself used: their chunks may mix.
    foreign: HashSet<String>,
    reached: Reached,
}

impl Consumer {
    fn on_frame(&mut self, frame: Frame, oracle: Option<&[Bytes]>, ours: bool, now: Instant) {
        let Some(payload) = frame.payload else {
            return;
        };
        if payload.corruption.is_some() {
            return;
        }
        self.reached.frames += 1;
        let meta = payload.metadata;
        let mut data = payload.data;
        if meta.num_chunks_from_msg.unwrap_or(0) > 1 {
            let uuid = meta.uuid.as_deref().unwrap_or("");
            if !ours {
                self.split.remove(uuid);
                self.foreign.insert(uuid.to_owned());
            }
            let id = &frame.command.message.as_ref().expect("a Message frame").message_id;
            let (outcome, _) = self.chunks.push(
                ChunkIn {
                    uuid,
                    chunk_id: meta.chunk_id.unwrap_or(0),
                    num_chunks: meta.num_chunks_from_msg.unwrap_or(0),
                    total_size: meta.total_chunk_msg_size.unwrap_or(-1),
                    entry: (id.ledger_id, id.entry_id),
                    data,
                },
                now,
            );
            assert!(self.chunks.pending() <= 3);
            assert!(self.chunks.buffered_bytes() <= 3 * MAX_CHUNKED);
            let ChunkOutcome::Complete { data: whole, entries } = outcome else {
                return;
            };
            assert!(whole.len() <= MAX_CHUNKED && entries.len() == meta.num_chunks_from_msg.unwrap_or(0) as usize);
            self.reached.reassembled += 1;
            if let Some(body) = self.split.get(uuid) {
                assert_eq!(&whole, body, "chunked message {uuid} reassembled wrong");
                self.reached.reassembled_checked += 1;
            }
            data = whole;
        }
        self.unpack(&meta, data, oracle);
    }

    fn unpack(&mut self, meta: &pb::MessageMetadata, data: Bytes, oracle: Option<&[Bytes]>) {
        match entry::unpack(meta, data.clone(), MAX_UNCOMPRESSED) {
            Ok(entries) => {
                assert!(entries.len() <= MAX_BATCH_MESSAGES);
                let total: usize = entries.iter().map(|e| e.payload.len()).sum();
                assert!(total <= data.len().max(MAX_UNCOMPRESSED));
                match meta.num_messages_in_batch {
                    Some(n) => assert!(entries.len() == n as usize && entries.iter().all(|e| e.single.is_some())),
                    None => assert!(entries.len() == 1 && entries[0].single.is_none()),
                }
                if let Some(expected) = oracle {
                    let got: Vec<&Bytes> = entries.iter().map(|e| &e.payload).collect();
                    assert_eq!(
                        got,
                        expected.iter().collect::<Vec<_>>(),
                        "well-formed entry unpacked wrong"
                    );
                    self.reached.unpacked_checked += 1;
                }
            }
            Err(e) => assert!(oracle.is_none(), "well-formed entry refused: {e}"),
        }
    }
}

/// Input: records (see [`flag`]), each one or more `Message` frames; see the module docs.
pub fn message(data: &[u8]) -> Reached {
    let mut input = Input(data);
    let mut consumer = Consumer {
        chunks: ChunkAssembler::new(ChunkLimits {
            max_pending: 3,
            expiry: Duration::from_secs(60),
            max_message_size: MAX_CHUNKED,
        }),
        split: HashMap::new(),
        foreign: HashSet::new(),
        reached: Reached::default(),
    };
    let mut now = Instant::now();
    let mut entry_id = 0;
    for serial in 0..MAX_RECORDS as u64 {
        if input.is_empty() {
            break;
        }
        let flags = input.byte();
        now += Duration::from_millis(u64::from(input.byte()) * 500);
        consumer.chunks.expire(now);
        let (records, split) = read_record(&mut input, flags, serial);
        let ours = split.is_some();
        if let Some((uuid, body)) = split {
            if !consumer.foreign.contains(&uuid) {
                consumer.split.insert(uuid, body);
            }
        }
        let mut sent: Vec<u64> = Vec::new();
        for r in records {
            let id = match r.same_entry_as {
                Some(j) => sent[j],
                None => {
                    entry_id += 1;
                    entry_id
                }
            };
            sent.push(id);
            let mut buf = message_frame(id, r.bem.as_deref(), &r.meta, &r.body, r.bad_crc);
            match frame::decode(&mut buf, MAX_FRAME) {
                Ok(Some(f)) => consumer.on_frame(f, r.oracle.as_deref(), ours, now),
                Ok(None) => panic!("a whole frame decoded as incomplete"),
                // Only raw broker entry metadata may fail to decode.
                Err(e) => assert!(r.bem.is_some() && matches!(e, ProtocolError::Protobuf { .. }), "{e}"),
            }
        }
    }
    consumer.chunks.expire(now + Duration::from_secs(3600));
    assert_eq!((consumer.chunks.pending(), consumer.chunks.buffered_bytes()), (0, 0));
    consumer.reached
}

#[path = "fuzzing_seeds.rs"]
mod seeds;
pub use seeds::seeds;
