//! The producer's open batch: messages waiting to go out as one entry.

use bytes::BytesMut;

use super::message::{single_metadata, OutgoingMessage};
use super::producer::SendCallback;
use crate::protocol::batch::encode_entry;

/// Messages collected for one batch, with their sequence ids and completion callbacks.
#[derive(Default)]
pub(crate) struct OpenBatch {
    pub messages: Vec<(OutgoingMessage, u64, SendCallback)>,
    pub bytes: usize,
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

    pub fn push(&mut self, msg: OutgoingMessage, sequence_id: u64, done: SendCallback) {
        self.bytes += msg.footprint();
        self.messages.push((msg, sequence_id, done));
    }

    /// Serializes the entries (uncompressed) and hands back their callbacks.
    pub fn take(&mut self) -> TakenBatch {
        let messages = std::mem::take(&mut self.messages);
        let bytes = std::mem::take(&mut self.bytes);
        let mut payload = BytesMut::with_capacity(messages.iter().map(|(m, _, _)| m.payload.len() + 32).sum());
        let first_seq = messages.first().map_or(0, |m| m.1);
        let last_seq = messages.last().map_or(0, |m| m.1);
        let mut callbacks = Vec::with_capacity(messages.len());
        for (msg, seq, done) in messages {
            encode_entry(&single_metadata(&msg, seq), &msg.payload, &mut payload);
            callbacks.push(done);
        }
        TakenBatch { payload, first_seq, last_seq, callbacks, bytes }
    }
}

/// A batch ready to frame.
pub(crate) struct TakenBatch {
    pub payload: BytesMut,
    pub first_seq: u64,
    pub last_seq: u64,
    pub callbacks: Vec<SendCallback>,
    pub bytes: usize,
}
