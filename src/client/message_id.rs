//! Message ids: where a message sits in a topic, as users compare, store and seek to them.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use prost::Message as _;

use super::error::{Error, Result};
use crate::protocol::pb::MessageIdData;

/// Where a message sits in a topic: ledger, entry, and its index in a batch.
///
/// Ordering and equality use `(ledger, entry, partition, batch_index)` compared as signed
/// numbers, so [`MessageId::EARLIEST`] sorts before every real id and [`MessageId::LATEST`]
/// after; the topic travels along (for acks on multi-topic consumers) but is not compared.
#[derive(Debug, Clone)]
pub struct MessageId {
    /// Ledger id (signed, so the earliest sentinel is -1).
    pub ledger_id: i64,
    /// Entry id within the ledger.
    pub entry_id: i64,
    /// Partition index, -1 for a non-partitioned topic.
    pub partition: i32,
    /// Index in the batch, -1 when not batched.
    pub batch_index: i32,
    /// Number of messages in the batch, 0 when unknown or not batched.
    pub batch_size: i32,
    /// The topic (partition) the id belongs to, when known.
    pub topic: Option<Arc<str>>,
}

impl MessageId {
    /// Before the first message of any topic.
    pub const EARLIEST: MessageId = MessageId::new(-1, -1, -1, -1);
    /// After the last message of any topic.
    pub const LATEST: MessageId = MessageId::new(i64::MAX, i64::MAX, -1, -1);

    /// An id without batch size or topic.
    pub const fn new(ledger_id: i64, entry_id: i64, partition: i32, batch_index: i32) -> Self {
        MessageId {
            ledger_id,
            entry_id,
            partition,
            batch_index,
            batch_size: 0,
            topic: None,
        }
    }

    /// From the wire form.
    pub fn from_data(d: &MessageIdData) -> Self {
        MessageId {
            ledger_id: d.ledger_id as i64,
            entry_id: d.entry_id as i64,
            partition: d.partition.unwrap_or(-1),
            batch_index: d.batch_index.unwrap_or(-1),
            batch_size: d.batch_size.unwrap_or(0),
            topic: None,
        }
    }

    /// The wire form.
    pub fn to_data(&self) -> MessageIdData {
        MessageIdData {
            ledger_id: self.ledger_id as u64,
            entry_id: self.entry_id as u64,
            partition: (self.partition >= 0).then_some(self.partition),
            batch_index: (self.batch_index >= 0).then_some(self.batch_index),
            batch_size: (self.batch_size > 0).then_some(self.batch_size),
            ..Default::default()
        }
    }

    /// The wire form of the whole entry (no batch index), as acks and redeliveries use.
    pub fn entry_data(&self) -> MessageIdData {
        MessageIdData {
            ledger_id: self.ledger_id as u64,
            entry_id: self.entry_id as u64,
            partition: (self.partition >= 0).then_some(self.partition),
            ..Default::default()
        }
    }

    /// Serialized as a `MessageIdData` protobuf, the same bytes as the Java and C++ clients.
    pub fn serialize(&self) -> Vec<u8> {
        self.to_data().encode_to_vec()
    }

    /// Parses bytes made by [`MessageId::serialize`] or by another Pulsar client.
    pub fn deserialize(bytes: &[u8]) -> Result<MessageId> {
        let d =
            MessageIdData::decode(bytes).map_err(|e| Error::invalid(format!("not a serialized message id: {e}")))?;
        Ok(Self::from_data(&d))
    }

    /// Same ledger and entry (the whole batch).
    pub fn same_entry(&self, other: &MessageId) -> bool {
        self.ledger_id == other.ledger_id && self.entry_id == other.entry_id && self.partition == other.partition
    }

    fn key(&self) -> (i64, i64, i32, i32) {
        (self.ledger_id, self.entry_id, self.partition, self.batch_index)
    }
}

impl PartialEq for MessageId {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for MessageId {}
impl Hash for MessageId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state)
    }
}
impl PartialOrd for MessageId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for MessageId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl std::fmt::Display for MessageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}:{}",
            self.ledger_id, self.entry_id, self.partition, self.batch_index
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_order_with_sentinels_at_the_ends() {
        let a = MessageId::new(1, 2, -1, -1);
        let b = MessageId::new(1, 2, -1, 0);
        let c = MessageId::new(1, 3, -1, -1);
        assert!(MessageId::EARLIEST < a && a < b && b < c && c < MessageId::LATEST);
    }

    #[test]
    fn ids_serialize_as_message_id_data() {
        let mut id = MessageId::new(10, 20, 3, 4);
        id.batch_size = 8;
        let back = MessageId::deserialize(&id.serialize()).unwrap();
        assert_eq!(back, id);
        assert_eq!(back.batch_size, 8);
        assert_eq!(
            MessageId::deserialize(&MessageId::EARLIEST.serialize()).unwrap(),
            MessageId::EARLIEST
        );
        assert!(MessageId::deserialize(b"\xff\xff").is_err());
    }
}
