//! Reassembly of chunked messages: a message too large for one entry arrives as numbered
//! chunks, possibly interleaved with other messages and other chunked messages.

use super::*;

/// A chunked message whose chunks are still arriving.
pub(super) struct Chunked {
    next: i32,
    data: bytes::BytesMut,
    entries: Vec<MessageIdData>,
    started: Instant,
}

/// Largest chunked message reassembled (uncompressed).
pub(super) const MAX_CHUNKED_MESSAGE_SIZE: usize = 1 << 30;

/// Chunked messages reassembled at once; the oldest is dropped beyond this.
const MAX_PENDING_CHUNKED: usize = 100;

impl Actor {
    /// Adds one chunk; returns the whole (still compressed) payload once the last arrives.
    pub(super) fn on_chunk(
        &mut self,
        id: &MessageIdData,
        meta: &crate::protocol::pb::MessageMetadata,
        data: bytes::Bytes,
    ) -> Option<bytes::Bytes> {
        let uuid = meta.uuid.clone().unwrap_or_default();
        let chunk_id = meta.chunk_id.unwrap_or(0);
        let total_chunks = meta.num_chunks_from_msg.unwrap_or(0);
        let total_size = meta.total_chunk_msg_size.unwrap_or(0).max(0) as usize;
        let entry = MessageIdData {
            ledger_id: id.ledger_id,
            entry_id: id.entry_id,
            ..Default::default()
        };
        if chunk_id == 0 {
            if self.chunks.len() >= MAX_PENDING_CHUNKED {
                if let Some(oldest) = self
                    .chunks
                    .iter()
                    .min_by_key(|(_, c)| c.started)
                    .map(|(k, _)| k.clone())
                {
                    log::warn!(
                        "{}: too many incomplete chunked messages; dropping {oldest}",
                        self.shared.topic
                    );
                    self.chunks.remove(&oldest);
                }
            }
            let limit = self
                .conn
                .as_ref()
                .map_or(crate::protocol::frame::DEFAULT_MAX_MESSAGE_SIZE, |c| {
                    c.max_message_size()
                });
            self.chunks.insert(
                uuid.clone(),
                Chunked {
                    next: 0,
                    data: bytes::BytesMut::with_capacity(total_size.min(limit.saturating_mul(64))),
                    entries: Vec::new(),
                    started: Instant::now(),
                },
            );
        }
        let Some(ctx) = self.chunks.get_mut(&uuid) else {
            // A chunk without its beginning (e.g. after a seek): nothing to assemble.
            self.shared.return_permits(1);
            return None;
        };
        if chunk_id != ctx.next {
            log::warn!(
                "{}: chunk {chunk_id} of {uuid} out of order (expected {}); dropping it",
                self.shared.topic,
                ctx.next
            );
            self.chunks.remove(&uuid);
            self.shared.return_permits(1);
            return None;
        }
        ctx.next += 1;
        ctx.data.extend_from_slice(&data);
        ctx.entries.push(entry);
        if chunk_id + 1 < total_chunks {
            self.shared.return_permits(1);
            return None;
        }
        let ctx = self.chunks.remove(&uuid).expect("present");
        self.chunk_entries
            .insert((id.ledger_id as i64, id.entry_id as i64), ctx.entries);
        Some(ctx.data.freeze())
    }
}
