//! What the broker pushes to one partition's consumer: checks, decryption, chunk reassembly,
//! unpacking, the filters (acked already, before a reader's start, compacted out), and what becomes of an
//! entry that cannot be read.
//!
//! Nothing the peer declares sizes an allocation here: `protocol::entry` bounds counts by the
//! bytes that carry them, `protocol::chunks` bounds reassembly. A malformed entry is never
//! fatal: it is dead-lettered when the subscription has a dead-letter policy, else acked with
//! its validation error and counted as corrupt, and the entries after it are delivered.

use super::*;
use crate::client::crypto::CryptoFailureAction;
use crate::protocol::chunks::{ChunkIn, ChunkOutcome, EntryId};
use crate::protocol::entry::{self, UnpackError};
use crate::protocol::pb::{CommandMessage, MessageMetadata};

/// Largest chunked message reassembled (uncompressed as well as compressed).
pub(super) const MAX_CHUNKED_MESSAGE_SIZE: usize = 1 << 30;

impl Actor {
    pub(super) async fn on_message(&mut self, cmd: CommandMessage, payload: Payload) {
        // An ack the application made may cover this very message (a resend after a reconnect).
        self.take_pending_acks();
        let id_data = cmd.message_id;
        let permits = broker_permits(&payload.metadata);
        if cmd
            .consumer_epoch
            .is_some_and(|e| e < self.shared.redelivery_epoch.load(Ordering::Acquire))
        {
            // Dispatched before a redelivery of everything unacknowledged: it comes again.
            self.shared.return_permits(permits);
            return;
        }
        if payload.corruption.is_some() {
            return self.discard(&id_data, ValidationError::ChecksumMismatch, permits);
        }
        let mut payload = payload;
        // Each entry (each chunk of a chunked message) is encrypted on its own, after
        // compression: decrypt before reassembling, decompressing and splitting.
        let mut still_encrypted = false;
        if !payload.metadata.encryption_keys.is_empty() {
            match self.crypto.open(&payload.metadata, &payload.data) {
                Ok(plain) => payload.data = plain.into(),
                Err(why) => match self.opts.crypto_failure_action {
                    CryptoFailureAction::Fail => return self.undecryptable(&id_data, &why, permits),
                    CryptoFailureAction::Discard => {
                        log::warn!("{}: cannot decrypt a message ({why}); discarding it", self.shared.topic);
                        return self.discard(&id_data, ValidationError::DecryptionError, permits);
                    }
                    CryptoFailureAction::Consume => {
                        log::warn!(
                            "{}: cannot decrypt a message ({why}); delivering it encrypted",
                            self.shared.topic
                        );
                        still_encrypted = true;
                    }
                },
            }
        }
        let chunked = payload.metadata.num_chunks_from_msg.unwrap_or(0) > 1;
        let mut first_chunk = None;
        if chunked {
            match self.on_chunk(&id_data, &payload.metadata, std::mem::take(&mut payload.data)) {
                Some(whole) => payload.data = whole,
                None => return,
            }
            first_chunk = self
                .chunk_entries
                .get(&(id_data.ledger_id as i64, id_data.entry_id as i64))
                .and_then(|entries| entries.first())
                .map(|first| Box::new((first.ledger_id as i64, first.entry_id as i64)));
        }
        let meta = Arc::new(payload.metadata);
        if self.not_before_ms.is_some_and(|t| meta.publish_time < t) {
            self.shared.return_permits(permits);
            return;
        }
        // Chunked messages legitimately exceed the frame limit; others expand at most this much.
        let limit = if chunked {
            MAX_CHUNKED_MESSAGE_SIZE
        } else {
            self.max_message_size() * 2
        };
        let entries = if still_encrypted {
            // Neither decompressed nor split: the application gets the bytes as they came.
            vec![entry::Entry {
                single: None,
                payload: payload.data.clone(),
            }]
        } else {
            match entry::unpack(&meta, payload.data.clone(), limit) {
                Ok(e) => e,
                Err(why) => return self.malformed(&id_data, meta, payload.data, why, permits).await,
            }
        };
        let redelivery_count = cmd.redelivery_count.unwrap_or(0);
        let epoch = self.shared.epoch.load(Ordering::Acquire);
        let mut base = MessageId::from_data(&id_data);
        let base_key = (base.ledger_id, base.entry_id);
        base.partition = topic_partition(&self.shared.topic);
        base.topic = Some(self.shared.topic.clone());
        let batched = meta.num_messages_in_batch.is_some() && !still_encrypted;
        if batched && self.shared.zero_queue {
            return self.refuse_batch();
        }
        let batch_size = entries.len() as i32;
        let acked_by_broker = |i: usize| batch_index_acked(&cmd.ack_set, i);
        let mut out = Vec::with_capacity(entries.len());
        let mut covered = 0usize;
        let mut acked_before = 0usize;
        for (i, e) in entries.into_iter().enumerate() {
            let mut id = base.clone();
            if batched {
                id.batch_index = i as i32;
                id.batch_size = batch_size;
                let compacted_out = e.single.as_ref().is_some_and(|s| s.compacted_out == Some(true));
                if compacted_out || acked_by_broker(i) {
                    continue;
                }
            }
            if self.before_start(&id) {
                continue;
            }
            if self.book.covers(&id) {
                covered += 1;
                if self.book.acked_before(&id) {
                    // The broker confirmed this ack and lost it (it died before storing it).
                    self.book.ack_again(&id);
                    acked_before += 1;
                }
                continue;
            }
            if self.txn_acks.holds(&id) {
                covered += 1;
                continue;
            }
            out.push(Message {
                topic: self.shared.topic.clone(),
                id,
                payload: e.payload,
                metadata: meta.clone(),
                single: e.single,
                redelivery_count,
                origin: self.shared.index,
                first_chunk: first_chunk.clone(),
                epoch,
                still_encrypted,
            });
        }
        if acked_before > 0 {
            self.inbox.counters.acked_before(acked_before);
            if self.acks_due.is_none() {
                self.acks_due = Some(Instant::now() + self.opts.ack_group_time);
            }
        }
        let copies = self.drop_second_copies(base_key, epoch, &mut out);
        if batched && (redelivery_count > 0 || !cmd.ack_set.is_empty()) && log::log_enabled!(log::Level::Debug) {
            log::debug!(
                "{}: entry {}:{} (redelivery {redelivery_count}, ack set of {} words): {} of {batch_size} messages queued ({covered} dropped as acked here, {copies} as copies held here): {}",
                self.shared.topic,
                base_key.0,
                base_key.1,
                cmd.ack_set.len(),
                out.len(),
                index_ranges(out.iter().map(|m| m.id.batch_index)),
            );
        }
        if let Some(max) = self.opts.max_redeliver_count {
            if redelivery_count > max && !out.is_empty() {
                self.dead_letter(out).await;
                self.shared.return_permits(permits);
                return;
            }
        }
        let skipped = permits.saturating_sub(out.len() as u32);
        if skipped > 0 {
            self.shared.return_permits(skipped);
        }
        if !out.is_empty() && self.queued_high.is_none_or(|h| h < base_key) {
            self.queued_high = Some(base_key);
        }
        self.inbox.push_many(out);
    }

    /// A zero-queue consumer got a batch: it cannot hold the batch's other messages, so, as
    /// the Java client's ZeroQueueConsumerImpl, it closes and receivers get the error. The
    /// entry stays unacknowledged for the subscription's other consumers.
    fn refuse_batch(&mut self) {
        log::error!(
            "{}: a batched message reached a consumer with receiver_queue_size=0; closing it",
            self.shared.topic
        );
        self.inbox.end(Error::invalid(
            "a consumer with receiver_queue_size=0 cannot take batched messages (produce with batching=False, \
             or give the consumer a receiver queue); it is closed",
        ));
        self.closing = Some((oneshot::channel().0, false));
    }

    /// Exclusive and Failover: drops from `out` the messages of entry `key` that this consumer
    /// already holds, queued (of this connection) or taken by the application and not yet
    /// acknowledged. The broker sends an entry again when another consumer's transaction that
    /// held some of it aborts, with every message of it not yet acknowledged, also those it
    /// sent before: a second copy would be processed twice, and its acknowledgement in a
    /// second transaction is accepted when it lies past the words of the broker's batch
    /// record. Only an entry at or before the highest one queued on this connection can be
    /// such a copy: after a reconnect the broker sends everything unacknowledged again, and
    /// those copies are delivered as always. Returns how many were dropped.
    fn drop_second_copies(&mut self, key: EntryKey, epoch: u32, out: &mut Vec<Message>) -> usize {
        let Some(owed) = self.owed.as_ref() else { return 0 };
        if out.is_empty() || self.queued_high.is_none_or(|h| key > h) {
            return 0;
        }
        let origin = self.shared.index;
        let queued = self
            .inbox
            .queued_indexes(|m| m.origin == origin && m.epoch == epoch && (m.id.ledger_id, m.id.entry_id) == key);
        let before = out.len();
        out.retain(|m| !owed.holds(&m.id) && !queued.contains(&m.id.batch_index));
        before - out.len()
    }

    fn max_message_size(&self) -> usize {
        self.link
            .conn()
            .map_or(crate::protocol::frame::DEFAULT_MAX_MESSAGE_SIZE, |c| {
                c.max_message_size()
            })
    }

    /// An entry that cannot be read: dead-lettered as it came (still compressed) when the
    /// subscription has a dead-letter policy, else acked with the reason and counted.
    async fn malformed(
        &mut self,
        id: &MessageIdData,
        meta: Arc<MessageMetadata>,
        raw: bytes::Bytes,
        why: UnpackError,
        permits: u32,
    ) {
        if self.opts.dead_letter_topic.is_none() && self.opts.max_redeliver_count.is_none() {
            return self.discard(id, why.validation_error(), permits);
        }
        log::error!(
            "{}: message {}:{} cannot be read ({why}); dead-lettering it",
            self.shared.topic,
            id.ledger_id,
            id.entry_id
        );
        self.inbox.count_corrupt();
        let mut msg_id = MessageId::from_data(id);
        msg_id.batch_index = -1;
        msg_id.partition = topic_partition(&self.shared.topic);
        msg_id.topic = Some(self.shared.topic.clone());
        let msg = Message {
            topic: self.shared.topic.clone(),
            id: msg_id,
            payload: raw,
            metadata: meta,
            single: None,
            redelivery_count: 0,
            origin: self.shared.index,
            first_chunk: None,
            epoch: self.shared.epoch.load(Ordering::Acquire),
            still_encrypted: false,
        };
        self.dead_letter(vec![msg]).await;
        self.shared.return_permits(permits);
    }

    /// A message that cannot be decrypted under `CryptoFailureAction::Fail`: not delivered
    /// and not acked, so it comes back on redelivery (after the ack timeout when there is one,
    /// as with the C++ client, else to the next consumer), when the key may be there.
    fn undecryptable(&mut self, id: &MessageIdData, why: &str, permits: u32) {
        log::error!(
            "{}: cannot decrypt message {}:{} ({why}); not delivered, left unacknowledged",
            self.shared.topic,
            id.ledger_id,
            id.entry_id
        );
        if !self.opts.ack_timeout.is_zero() {
            let mut msg_id = MessageId::from_data(id);
            msg_id.batch_index = -1;
            msg_id.partition = topic_partition(&self.shared.topic);
            msg_id.topic = Some(self.shared.topic.clone());
            let deadline = Instant::now() + self.opts.ack_timeout;
            self.unacked
                .entry((msg_id.ledger_id, msg_id.entry_id))
                .or_insert((deadline, msg_id));
        }
        self.shared.return_permits(permits);
    }

    pub(super) fn discard(&mut self, id: &MessageIdData, why: ValidationError, permits: u32) {
        log::error!(
            "{}: discarding unreadable message {}:{} ({why:?}); acked so it is not redelivered",
            self.shared.topic,
            id.ledger_id,
            id.entry_id
        );
        self.inbox.count_corrupt();
        if let Some(conn) = self.link.conn() {
            let _ = conn.send_command(&commands::ack(
                self.consumer_id,
                AckType::Individual,
                vec![MessageIdData {
                    ledger_id: id.ledger_id,
                    entry_id: id.entry_id,
                    ..Default::default()
                }],
                Some(why),
                None,
            ));
        }
        self.shared.return_permits(permits);
    }

    /// Adds one chunk; returns the whole (still compressed) payload once the last arrives.
    /// Every chunk but the last returns its permit at once: the assembler's bounds, not the
    /// broker's flow control, limit what incomplete messages hold.
    fn on_chunk(&mut self, id: &MessageIdData, meta: &MessageMetadata, data: bytes::Bytes) -> Option<bytes::Bytes> {
        let entry: EntryId = (id.ledger_id, id.entry_id);
        let chunk = ChunkIn {
            uuid: meta.uuid.as_deref().unwrap_or(""),
            chunk_id: meta.chunk_id.unwrap_or(0),
            num_chunks: meta.num_chunks_from_msg.unwrap_or(0),
            total_size: meta.total_chunk_msg_size.unwrap_or(0),
            entry,
            data,
        };
        let (outcome, evicted) = self.chunks.push(chunk, std::time::Instant::now());
        for (entries, reason) in evicted {
            self.give_up_chunks(entries, reason);
        }
        match outcome {
            ChunkOutcome::Pending => {
                self.shared.return_permits(1);
                None
            }
            ChunkOutcome::Complete { data, entries } => {
                let entries = entries
                    .into_iter()
                    .map(|(l, e)| MessageIdData {
                        ledger_id: l,
                        entry_id: e,
                        ..Default::default()
                    })
                    .collect();
                self.chunk_entries
                    .insert((id.ledger_id as i64, id.entry_id as i64), entries);
                Some(data)
            }
            ChunkOutcome::Duplicate => {
                log::info!(
                    "{}: duplicate chunk {}:{} (a producer resend); acked and skipped",
                    self.shared.topic,
                    id.ledger_id,
                    id.entry_id
                );
                self.ack_entries(vec![entry]);
                self.shared.return_permits(1);
                None
            }
            ChunkOutcome::Orphan => {
                // Its start was acked, completed, or precedes where this subscription began.
                // Like the Java client, leave it for redelivery until the message could no
                // longer complete anyway, then ack it so it leaves no hole.
                let expired = meta
                    .publish_time
                    .saturating_add(self.opts.chunk_expiry.as_millis() as u64)
                    < now_ms();
                if expired {
                    self.ack_entries(vec![entry]);
                }
                self.shared.return_permits(1);
                None
            }
            ChunkOutcome::Abandoned { entries, reason } => {
                self.give_up_chunks(entries, reason);
                self.shared.return_permits(1);
                None
            }
        }
    }

    /// Incomplete chunked messages past the expiry are given up.
    pub(super) fn expire_chunks(&mut self) {
        for (entries, reason) in self.chunks.expire(std::time::Instant::now()) {
            self.give_up_chunks(entries, reason);
        }
    }

    /// A chunked message that can never complete: its chunks are acked, so they leave no
    /// unacked hole behind. (There is no whole payload to dead-letter.)
    fn give_up_chunks(&mut self, entries: Vec<EntryId>, reason: &'static str) {
        if reason == crate::protocol::chunks::EVICTED && !self.opts.auto_ack_oldest_chunked_message {
            // Left unacknowledged, as the Java client does without autoAck: the broker
            // sends it again (ack timeout, redelivery, reconnection).
            log::warn!(
                "{}: {reason}; its {} chunks are left unacknowledged",
                self.shared.topic,
                entries.len()
            );
            return;
        }
        if reason == crate::protocol::chunks::RESTARTED {
            // A producer that reconnected mid-message sends it again from its first chunk;
            // the copy completes, the stale chunks only need acking.
            log::info!("{}: {reason}; acking {} stale chunks", self.shared.topic, entries.len());
        } else {
            log::error!(
                "{}: giving up a chunked message of {} chunks ({reason}); its chunks are acked",
                self.shared.topic,
                entries.len()
            );
            self.inbox.count_corrupt();
        }
        self.ack_entries(entries);
    }

    fn ack_entries(&mut self, entries: Vec<EntryId>) {
        for (ledger_id, entry_id) in entries {
            self.book.record_entry(MessageIdData {
                ledger_id,
                entry_id,
                ..Default::default()
            });
        }
        if self.acks_due.is_none() {
            self.acks_due = Some(Instant::now() + self.opts.ack_group_time);
        }
    }

    /// Readers skip what precedes their start position inside the first entry.
    pub(super) fn before_start(&self, id: &MessageId) -> bool {
        match (&self.opts.start_message_id, self.opts.durable) {
            (Some(start), false) if *start != MessageId::EARLIEST && *start != MessageId::LATEST => {
                let cmp = (id.ledger_id, id.entry_id, id.batch_index).cmp(&(
                    start.ledger_id,
                    start.entry_id,
                    start.batch_index,
                ));
                if self.opts.start_inclusive {
                    cmp.is_lt()
                } else {
                    cmp.is_le()
                }
            }
            _ => false,
        }
    }
}

/// The permits the broker took for an entry: it counts `num_messages_in_batch` as declared
/// (`totalMessages += batchSize` in its dispatcher), so returning exactly that keeps its
/// count right even for an entry that declares far more messages than it holds. Never used to
/// size anything.
fn broker_permits(meta: &MessageMetadata) -> u32 {
    meta.num_messages_in_batch.unwrap_or(1).max(1) as u32
}

/// `3-7,9` for the batch indexes 3, 4, 5, 6, 7, 9 (ascending): a debug log's view of a batch.
pub(super) fn index_ranges(indexes: impl Iterator<Item = i32>) -> String {
    let mut out = String::new();
    let mut run: Option<(i32, i32)> = None;
    let flush = |r: (i32, i32), out: &mut String| {
        if !out.is_empty() {
            out.push(',');
        }
        if r.0 == r.1 {
            out.push_str(&r.0.to_string());
        } else {
            out.push_str(&format!("{}-{}", r.0, r.1));
        }
    };
    for i in indexes {
        run = match run {
            Some((a, b)) if i == b + 1 => Some((a, i)),
            Some(r) => {
                flush(r, &mut out);
                Some((i, i))
            }
            None => Some((i, i)),
        };
    }
    if let Some(r) = run {
        flush(r, &mut out);
    }
    out
}

/// Whether the ack set a broker sent with a batch entry marks index `i` acknowledged (bit
/// clear). No ack set: nothing is. The broker sends the words of a Java `BitSet`, which drops
/// trailing zero words, so an index past the last word is acknowledged, not unknown: the
/// Java client reads it the same way. (Read as unacknowledged, the tail of a batch whose last
/// indexes a committed transaction had acknowledged was delivered again, and the broker's own
/// conflict check, which compares only the words it has, let a second transaction ack it.)
pub(super) fn batch_index_acked(ack_set: &[i64], i: usize) -> bool {
    !ack_set.is_empty()
        && ack_set
            .get(i / 64)
            .is_none_or(|w| (*w as u64) & (1u64 << (i % 64)) == 0)
}

#[cfg(test)]
mod ack_set_tests {
    use super::batch_index_acked;

    #[test]
    fn indexes_past_the_last_word_of_a_trimmed_ack_set_are_acknowledged() {
        // A batch of 200 whose indexes 190-199 are acknowledged and 185-189 are not: the
        // broker's BitSet ends at word 2, so word 3 (indexes 192-255) is not sent.
        let mut words = vec![0i64; 3];
        for i in 185..190 {
            words[i / 64] |= 1 << (i % 64);
        }
        let unacked: Vec<usize> = (0..200).filter(|i| !batch_index_acked(&words, *i)).collect();
        assert_eq!(unacked, (185..190).collect::<Vec<_>>());
    }

    #[test]
    fn no_ack_set_acknowledges_nothing() {
        assert!((0..200).all(|i| !batch_index_acked(&[], i)));
    }
}
