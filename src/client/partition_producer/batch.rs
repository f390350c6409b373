//! The producer's open batch: messages waiting to go out as one entry.

use bytes::BytesMut;

use crate::client::completion::Completion;
use crate::client::message::{single_metadata, OutgoingMessage};
use crate::client::transaction::TxnId;
use crate::protocol::batch::encode_entry;

/// Messages collected for one batch, with their sequence ids and completion callbacks.
#[derive(Default)]
pub(crate) struct OpenBatch {
    pub messages: Vec<(OutgoingMessage, u64, Completion)>,
    pub bytes: usize,
    /// The transaction of every message in the batch: a batch never mixes transactions.
    pub txn: Option<TxnId>,
}

impl OpenBatch {
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether `msg` would push the batch past its limits (an empty batch takes anything).
    pub fn would_overflow(&self, msg: &OutgoingMessage, max_messages: usize, max_bytes: usize) -> bool {
        !self.is_empty() && (self.len() >= max_messages || self.bytes + msg.footprint() > max_bytes)
    }

    /// Whether `msg` cannot join the batch: it belongs to another transaction (or none).
    pub fn other_txn(&self, msg: &OutgoingMessage) -> bool {
        !self.is_empty() && self.txn != msg.txn.as_ref().map(|t| t.id())
    }

    pub fn push(&mut self, msg: OutgoingMessage, sequence_id: u64, done: Completion) {
        if self.is_empty() {
            self.txn = msg.txn.as_ref().map(|t| t.id());
        }
        self.bytes += msg.footprint();
        self.messages.push((msg, sequence_id, done));
    }

    /// Serializes the entries (uncompressed) and hands back their callbacks.
    pub fn take(&mut self) -> TakenBatch {
        let messages = std::mem::take(&mut self.messages);
        let bytes = std::mem::take(&mut self.bytes);
        let txn = self.txn.take();
        let mut payload = BytesMut::with_capacity(messages.iter().map(|(m, _, _)| m.payload.len() + 32).sum());
        let first_seq = messages.first().map_or(0, |m| m.1);
        let last_seq = messages.last().map_or(0, |m| m.1);
        let mut callbacks = Vec::with_capacity(messages.len());
        for (msg, seq, done) in messages {
            encode_entry(&single_metadata(&msg, seq), &msg.payload, &mut payload);
            callbacks.push(done);
        }
        TakenBatch {
            payload,
            first_seq,
            last_seq,
            callbacks,
            bytes,
            txn,
        }
    }
}

impl OpenBatch {
    /// Splits the open messages into one batch per key (ordering key, else partition key),
    /// in order of each key's first message, numbering them from `next_seq` so sequence ids
    /// still rise from one batch to the next. Returns each batch with its key.
    pub fn take_by_key(&mut self, next_seq: &mut u64) -> Vec<(TakenBatch, Option<String>, Option<Vec<u8>>)> {
        let messages = std::mem::take(&mut self.messages);
        self.bytes = 0;
        let mut groups: Vec<(Option<Vec<u8>>, Option<String>, OpenBatch)> = Vec::new();
        for (msg, _, done) in messages {
            let ordering = msg.ordering_key.clone();
            let key = msg.key.clone();
            let slot = groups.iter().position(|(o, k, _)| match (&ordering, o) {
                (Some(a), Some(b)) => a == b,
                (None, None) => *k == key,
                _ => false,
            });
            let i = match slot {
                Some(i) => i,
                None => {
                    groups.push((ordering, key, OpenBatch::default()));
                    groups.len() - 1
                }
            };
            groups[i].2.push(msg, 0, done);
        }
        groups
            .into_iter()
            .map(|(ordering, key, mut group)| {
                for entry in &mut group.messages {
                    entry.1 = entry.0.sequence_id.unwrap_or(*next_seq);
                    *next_seq = (*next_seq).max(entry.1 + 1);
                }
                (group.take(), key, ordering)
            })
            .collect()
    }
}

/// A batch ready to frame.
pub(crate) struct TakenBatch {
    pub payload: BytesMut,
    pub first_seq: u64,
    pub last_seq: u64,
    pub callbacks: Vec<Completion>,
    pub bytes: usize,
    pub txn: Option<TxnId>,
}
