//! What a producer writes for its messages: the metadata of each entry, the compressed (and,
//! with end-to-end encryption, then encrypted) payload, and the `Send` frames, one per entry or
//! one per chunk of a message larger than the broker takes. No state but the producer's
//! settings and its data key; the actor decides when.

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};
use prost::Message as _;

use super::batch::TakenBatch;
use crate::client::crypto::ProducerCrypto;
use crate::client::error::Result;
use crate::client::message::OutgoingMessage;
use crate::client::options::ProducerOptions;
use crate::client::timer::now_ms;
use crate::client::transaction::TxnId;
use crate::protocol::pb::{BaseCommand, CompressionType, MessageMetadata};
use crate::protocol::{commands, compression, frame};

/// Encodes the entries of one producer.
pub(super) struct Encoder {
    producer_id: u64,
    compression: CompressionType,
    chunking: bool,
    /// Most payload bytes per chunk, below what the broker's limit allows.
    chunk_max_size: Option<usize>,
    /// The version the registry gave the producer's schema; every entry carries it.
    pub schema_version: Option<Bytes>,
    /// End-to-end encryption, when the producer names keys.
    crypto: Option<ProducerCrypto>,
}

impl Encoder {
    /// Fails when encryption is on and a key cannot be had: the producer is not created.
    pub fn new(producer_id: u64, opts: &ProducerOptions) -> Result<Encoder> {
        let crypto = match &opts.crypto_key_reader {
            Some(reader) if !opts.encryption_keys.is_empty() => {
                Some(ProducerCrypto::new(&opts.encryption_keys, reader.clone())?)
            }
            _ => None,
        };
        Ok(Encoder {
            producer_id,
            compression: opts.compression,
            chunking: opts.chunking,
            chunk_max_size: opts.chunk_max_size,
            schema_version: None,
            crypto,
        })
    }

    /// The frames of one message sent on its own: one, or, when chunking is on and the
    /// (compressed) payload exceeds `max_message_size`, one per chunk in order.
    pub fn single(
        &mut self,
        producer_name: String,
        msg: &OutgoingMessage,
        sequence_id: u64,
        max_message_size: usize,
    ) -> Result<Vec<Bytes>> {
        let mut meta = metadata(producer_name, sequence_id);
        meta.schema_version = self.schema_version.clone();
        meta.partition_key = msg.key.clone();
        meta.partition_key_b64_encoded = msg.key_b64.then_some(true);
        meta.ordering_key = msg.ordering_key.clone().map(Into::into);
        meta.properties = commands::key_values(&msg.properties);
        meta.event_time = msg.event_time;
        meta.deliver_at_time = msg.deliver_at;
        meta.replicate_to = msg.replication_clusters.clone();
        meta.null_value = msg.null_value.then_some(true);
        let txn = msg.txn.as_ref().map(|t| t.id());
        in_txn(None, &mut meta, txn);
        let payload = self.compress(&msg.payload, &mut meta)?;
        let overhead = self.crypto.as_ref().map_or(0, ProducerCrypto::overhead);
        let over_cap = self.chunk_max_size.is_some_and(|cap| payload.len() > cap);
        if self.chunking && (payload.len() + overhead > max_message_size || over_cap) {
            return self.chunks(meta, &payload, sequence_id, max_message_size, txn);
        }
        let mut cmd = commands::send(self.producer_id, sequence_id, 1);
        in_txn(Some(&mut cmd), &mut meta, txn);
        let payload = self.encrypt(&mut meta, payload)?;
        Ok(vec![encode(&cmd, &meta, &payload)])
    }

    /// Splits a (compressed) payload into chunks that share the sequence id and a uuid;
    /// consumers reassemble them. With encryption each chunk is encrypted on its own (under
    /// its own IV), as the Java and C++ clients do, and consumers decrypt before reassembling.
    fn chunks(
        &mut self,
        meta: MessageMetadata,
        payload: &[u8],
        sequence_id: u64,
        max: usize,
        txn: Option<TxnId>,
    ) -> Result<Vec<Bytes>> {
        // Leave room for the metadata (and the encryption's keys, IV and tag), as the broker's
        // limit covers the whole entry.
        let overhead = self.crypto.as_ref().map_or(0, ProducerCrypto::overhead);
        let chunk_size = max
            .saturating_sub(meta.encoded_len() + overhead + 64)
            .max(1024)
            .min(self.chunk_max_size.unwrap_or(usize::MAX));
        let total = payload.len();
        let count = total.div_ceil(chunk_size);
        let uuid = format!("{}-{}", meta.producer_name, sequence_id);
        let mut cmd = commands::send(self.producer_id, sequence_id, 1);
        if let Some(s) = cmd.send.as_mut() {
            s.is_chunk = Some(true);
        }
        let mut meta = meta;
        in_txn(Some(&mut cmd), &mut meta, txn);
        (0..count)
            .map(|i| {
                let mut m = meta.clone();
                m.uuid = Some(uuid.clone());
                m.num_chunks_from_msg = Some(count as i32);
                m.total_chunk_msg_size = Some(total as i32);
                m.chunk_id = Some(i as i32);
                let chunk = Cow::Borrowed(&payload[i * chunk_size..((i + 1) * chunk_size).min(total)]);
                let chunk = self.encrypt(&mut m, chunk)?;
                Ok(encode(&cmd, &m, &chunk))
            })
            .collect()
    }

    /// The frame of a batch entry. A key-based batch carries its key, as Key_Shared dispatch
    /// reads the entry's key.
    pub fn batch(
        &mut self,
        producer_name: String,
        taken: &TakenBatch,
        key: Option<String>,
        ordering_key: Option<Vec<u8>>,
    ) -> Result<Bytes> {
        let (first_seq, last_seq) = (taken.first_seq, taken.last_seq);
        let n = taken.callbacks.len() as i32;
        let mut meta = metadata(producer_name, first_seq);
        meta.schema_version = self.schema_version.clone();
        meta.num_messages_in_batch = Some(n);
        meta.partition_key = key;
        meta.ordering_key = ordering_key.map(Into::into);
        let mut cmd = commands::send(self.producer_id, first_seq, n);
        if last_seq != first_seq {
            meta.highest_sequence_id = Some(last_seq);
            if let Some(s) = cmd.send.as_mut() {
                s.highest_sequence_id = Some(last_seq);
            }
        }
        in_txn(Some(&mut cmd), &mut meta, taken.txn);
        let payload = self.compress(&taken.payload, &mut meta)?;
        let payload = self.encrypt(&mut meta, payload)?;
        Ok(encode(&cmd, &meta, &payload))
    }

    /// The payload sealed under the producer's data key (the keys and IV go in `meta`), or as
    /// it is without encryption.
    fn encrypt<'a>(&mut self, meta: &mut MessageMetadata, payload: Cow<'a, [u8]>) -> Result<Cow<'a, [u8]>> {
        match self.crypto.as_mut() {
            Some(c) => Ok(Cow::Owned(c.seal(meta, &payload)?)),
            None => Ok(payload),
        }
    }

    fn compress<'a>(&self, data: &'a [u8], meta: &mut MessageMetadata) -> Result<Cow<'a, [u8]>> {
        if self.compression == CompressionType::None {
            return Ok(Cow::Borrowed(data));
        }
        meta.compression = Some(self.compression as i32);
        meta.uncompressed_size = Some(data.len() as u32);
        Ok(Cow::Owned(compression::compress(self.compression, data)?))
    }
}

/// Marks an entry (its metadata and, when given, its `Send`) as produced in `txn`.
fn in_txn(cmd: Option<&mut BaseCommand>, meta: &mut MessageMetadata, txn: Option<TxnId>) {
    let Some(txn) = txn else { return };
    meta.txnid_most_bits = Some(txn.most);
    meta.txnid_least_bits = Some(txn.least);
    if let Some(send) = cmd.and_then(|c| c.send.as_mut()) {
        send.txnid_most_bits = Some(txn.most);
        send.txnid_least_bits = Some(txn.least);
    }
}

fn metadata(producer_name: String, sequence_id: u64) -> MessageMetadata {
    MessageMetadata {
        producer_name,
        sequence_id,
        publish_time: now_ms(),
        ..Default::default()
    }
}

fn encode(cmd: &BaseCommand, meta: &MessageMetadata, payload: &[u8]) -> Bytes {
    let mut buf = BytesMut::new();
    frame::encode_payload_command(cmd, meta, payload, &mut buf);
    buf.freeze()
}

#[cfg(test)]
mod tests {
    use super::super::batch::OpenBatch;
    use super::*;
    use crate::client::completion::SendCallback;
    use crate::client::transaction::Transaction;
    use crate::protocol::frame::{self, Frame};

    fn decoded(bytes: &Bytes) -> Frame {
        let mut buf = BytesMut::from(&bytes[..]);
        frame::decode(&mut buf, 1 << 20).unwrap().unwrap()
    }

    fn msg(txn: Option<&Transaction>) -> OutgoingMessage {
        OutgoingMessage {
            txn: txn.cloned(),
            ..OutgoingMessage::new(&b"x"[..])
        }
    }

    fn done() -> crate::client::completion::Completion {
        let f: SendCallback = Box::new(|_| {});
        f.into()
    }

    #[tokio::test]
    async fn a_batch_never_mixes_transactions_and_carries_its_id() {
        let (a, b) = (Transaction::detached(1, 10), Transaction::detached(1, 11));
        let mut batch = OpenBatch::default();
        batch.push(msg(Some(&a)), 0, done());
        assert!(!batch.other_txn(&msg(Some(&a))));
        assert!(batch.other_txn(&msg(Some(&b))));
        assert!(batch.other_txn(&msg(None)));
        batch.push(msg(Some(&a)), 1, done());
        let taken = batch.take();
        let mut enc = Encoder::new(7, &ProducerOptions::default()).unwrap();
        let f = decoded(&enc.batch("p".into(), &taken, None, None).unwrap());
        let send = f.command.send.unwrap();
        let meta = f.payload.unwrap().metadata;
        assert_eq!((send.txnid_most_bits, send.txnid_least_bits), (Some(1), Some(10)));
        assert_eq!((meta.txnid_most_bits, meta.txnid_least_bits), (Some(1), Some(10)));
        // The next batch starts afresh.
        batch.push(msg(None), 2, done());
        assert!(batch.other_txn(&msg(Some(&b))));
        let plain = decoded(&enc.batch("p".into(), &batch.take(), None, None).unwrap());
        assert_eq!(plain.command.send.unwrap().txnid_most_bits, None);
    }

    #[tokio::test]
    async fn a_single_message_and_its_chunks_carry_the_transaction() {
        let t = Transaction::detached(2, 3);
        let opts = ProducerOptions {
            chunking: true,
            ..Default::default()
        };
        let mut enc = Encoder::new(7, &opts).unwrap();
        let big = OutgoingMessage {
            txn: Some(t),
            ..OutgoingMessage::new(vec![0u8; 5000])
        };
        let frames = enc.single("p".into(), &big, 0, 2048).unwrap();
        assert!(frames.len() > 1);
        for f in frames.iter().map(decoded) {
            assert_eq!(f.command.send.unwrap().txnid_least_bits, Some(3));
            assert_eq!(f.payload.unwrap().metadata.txnid_most_bits, Some(2));
        }
    }

    #[test]
    fn encrypted_chunks_fit_the_limit_and_each_decrypts_on_its_own() {
        use crate::client::crypto::{ConsumerCrypto, TestKeys};
        let reader: crate::client::KeyReader = std::sync::Arc::new(TestKeys);
        let opts = ProducerOptions {
            chunking: true,
            compression: CompressionType::Lz4,
            encryption_keys: vec!["app".into()],
            crypto_key_reader: Some(reader.clone()),
            ..Default::default()
        };
        let mut enc = Encoder::new(7, &opts).unwrap();
        let body: Vec<u8> = (0..20_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let max = 8 * 1024;
        let frames = enc
            .single("p".into(), &OutgoingMessage::new(body.clone()), 0, max)
            .unwrap();
        assert!(frames.len() > 1);
        let mut consumer = ConsumerCrypto::new(Some(reader));
        let mut whole = Vec::new();
        for bytes in &frames {
            // The broker's limit covers metadata and payload, not the frame's size fields.
            assert!(bytes.len() <= max + 64, "{} > {max}", bytes.len());
            let payload = decoded(bytes).payload.unwrap();
            assert_eq!(payload.metadata.encryption_keys.len(), 1);
            assert_ne!(payload.metadata.compression, None);
            whole.extend(consumer.open(&payload.metadata, &payload.data).unwrap());
        }
        let meta = decoded(&frames[0]).payload.unwrap().metadata;
        let plain = crate::protocol::compression::decompress(
            CompressionType::Lz4,
            whole.into(),
            meta.uncompressed_size.unwrap() as usize,
            1 << 20,
        )
        .unwrap();
        assert_eq!(&plain[..], &body[..]);
    }
}
