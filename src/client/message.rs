//! Messages to send, and messages received.

use std::sync::Arc;

use bytes::Bytes;

// Defined in `message_id`, below the options that name a start id, and still found here
// beside the messages that carry it.
pub use super::message_id::MessageId;
use crate::protocol::pb::{MessageMetadata, SingleMessageMetadata};

/// A message to publish. Only `payload` is required.
#[derive(Debug, Clone, Default)]
pub struct OutgoingMessage {
    /// The bytes to publish.
    pub payload: Bytes,
    /// Partition key: routes the message and keys it for Key_Shared and compaction.
    pub key: Option<String>,
    /// `key` is the base64 of bytes (as a KeyValue schema's SEPARATED key travels).
    pub key_b64: bool,
    /// Ordering key for Key_Shared, overriding `key` there.
    pub ordering_key: Option<Vec<u8>>,
    /// User properties.
    pub properties: Vec<(String, String)>,
    /// Application event time, milliseconds since the epoch.
    pub event_time: Option<u64>,
    /// Deliver no earlier than this time, milliseconds since the epoch (never batched).
    pub deliver_at: Option<i64>,
    /// An explicit sequence id; otherwise the producer assigns the next one.
    pub sequence_id: Option<u64>,
    /// Replicate only to these clusters.
    pub replication_clusters: Vec<String>,
    /// The transaction the message is produced in: visible to consumers once it commits.
    pub txn: Option<super::transaction::Transaction>,
    /// A null value (a tombstone): no payload at all, as distinct from an empty one. On a
    /// compacted topic it deletes its key.
    pub null_value: bool,
}

impl OutgoingMessage {
    /// A message with just a payload.
    pub fn new(payload: impl Into<Bytes>) -> Self {
        OutgoingMessage {
            payload: payload.into(),
            ..Default::default()
        }
    }

    /// A copy of a received message to publish elsewhere (a dead letter or retry letter
    /// topic): its payload, keys and null flag, with `properties` instead of its own.
    pub fn copy_of(msg: &Message, properties: Vec<(String, String)>) -> Self {
        OutgoingMessage {
            payload: msg.payload.clone(),
            key: msg.key().map(str::to_string),
            key_b64: msg.key_is_b64(),
            ordering_key: msg.ordering_key().map(<[u8]>::to_vec),
            properties,
            null_value: msg.null_value(),
            ..Default::default()
        }
    }

    /// Rough byte footprint, for the batch size limit and the memory limit.
    pub fn footprint(&self) -> usize {
        self.payload.len()
            + self.key.as_ref().map_or(0, |k| k.len())
            + self
                .properties
                .iter()
                .map(|(k, v)| k.len() + v.len() + 4)
                .sum::<usize>()
    }
}

/// A received message. Entries of one batch share `metadata` and the payload buffer.
#[derive(Debug, Clone)]
pub struct Message {
    /// The topic (or partition) it came from.
    pub topic: Arc<str>,
    /// Its id.
    pub id: MessageId,
    /// The payload (a slice of the received frame; no copy).
    pub payload: Bytes,
    /// Entry metadata.
    pub metadata: Arc<MessageMetadata>,
    /// Per-message metadata inside a batch.
    pub single: Option<SingleMessageMetadata>,
    /// Times the broker has delivered this message before.
    pub redelivery_count: u32,
    /// Index of the sub-consumer that received it (multi-topic and partitioned consumers).
    pub origin: usize,
    /// A message reassembled from chunks: the (ledger, entry) of its first chunk (its id is
    /// its last chunk's). Readers that check for missing entries need both ends. Boxed:
    /// chunked messages are rare, and every queued message pays for the field's size.
    pub first_chunk: Option<Box<(i64, i64)>>,
    /// Connection generation of the sub-consumer when it arrived; permits of an older
    /// connection are not returned.
    pub(crate) epoch: u32,
    /// The payload is as it came, still encrypted (and compressed): it could not be decrypted
    /// and the consumer's `CryptoFailureAction` is `Consume`.
    pub still_encrypted: bool,
}

impl Message {
    /// A message as first delivered, outside a batch and any chunking, on the first connection
    /// of its sub-consumer: the fixtures of tests and fuzz targets start from it.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn delivered(topic: Arc<str>, id: MessageId, payload: Bytes, metadata: MessageMetadata) -> Message {
        Message {
            topic,
            id,
            payload,
            metadata: Arc::new(metadata),
            single: None,
            redelivery_count: 0,
            origin: 0,
            first_chunk: None,
            epoch: 0,
            still_encrypted: false,
        }
    }

    /// Partition key.
    pub fn key(&self) -> Option<&str> {
        match &self.single {
            Some(s) => s.partition_key.as_deref(),
            None => self.metadata.partition_key.as_deref(),
        }
    }

    /// Whether the key is the base64 of bytes (`partition_key_b64_encoded`).
    pub fn key_is_b64(&self) -> bool {
        match &self.single {
            Some(s) => s.partition_key_b64_encoded == Some(true),
            None => self.metadata.partition_key_b64_encoded == Some(true),
        }
    }

    /// Ordering key.
    pub fn ordering_key(&self) -> Option<&[u8]> {
        match &self.single {
            Some(s) => s.ordering_key.as_deref(),
            None => self.metadata.ordering_key.as_deref(),
        }
    }

    /// Properties.
    pub fn properties(&self) -> impl Iterator<Item = (&str, &str)> {
        let props = match &self.single {
            Some(s) => &s.properties,
            None => &self.metadata.properties,
        };
        props.iter().map(|kv| (kv.key.as_str(), kv.value.as_str()))
    }

    /// Event time in milliseconds, if the producer set one.
    pub fn event_time(&self) -> Option<u64> {
        let t = match &self.single {
            Some(s) => s.event_time.unwrap_or(0),
            None => self.metadata.event_time.unwrap_or(0),
        };
        (t > 0).then_some(t)
    }

    /// Publish time in milliseconds.
    pub fn publish_time(&self) -> u64 {
        self.metadata.publish_time
    }

    /// Name of the producer that published it.
    pub fn producer_name(&self) -> &str {
        &self.metadata.producer_name
    }

    /// Whether the message has a null value (a tombstone), not just an empty payload.
    pub fn null_value(&self) -> bool {
        match &self.single {
            Some(s) => s.null_value == Some(true),
            None => self.metadata.null_value == Some(true),
        }
    }

    /// Sequence id assigned by the producer.
    pub fn sequence_id(&self) -> u64 {
        match &self.single {
            Some(s) => s
                .sequence_id
                .unwrap_or(self.metadata.sequence_id + self.id.batch_index.max(0) as u64),
            None => self.metadata.sequence_id,
        }
    }
}

/// Builds the payload of a batch; used by the producer.
pub(crate) fn single_metadata(msg: &OutgoingMessage, sequence_id: u64) -> SingleMessageMetadata {
    SingleMessageMetadata {
        properties: crate::protocol::commands::key_values(&msg.properties),
        partition_key: msg.key.clone(),
        partition_key_b64_encoded: msg.key_b64.then_some(true),
        payload_size: msg.payload.len() as i32,
        event_time: msg.event_time,
        ordering_key: msg.ordering_key.clone().map(Into::into),
        sequence_id: Some(sequence_id),
        null_value: msg.null_value.then_some(true),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_value_is_flagged_in_the_batch_entry() {
        let mut msg = OutgoingMessage::new(Bytes::new());
        assert_eq!(single_metadata(&msg, 1).null_value, None);
        msg.null_value = true;
        assert_eq!(single_metadata(&msg, 1).null_value, Some(true));
    }
}
