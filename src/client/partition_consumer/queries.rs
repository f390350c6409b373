//! What a consumer asks its broker on the application's behalf: moving the subscription
//! (`seek`), the last message id of the topic, and the broker's statistics of the consumer.

use super::*;
use crate::protocol::frame::Frame;

/// Where `seek` moves the subscription.
#[derive(Debug, Clone)]
pub enum SeekTarget {
    /// To a message id.
    Id(MessageId),
    /// To the first message published at or after this time (ms since the epoch).
    PublishTime(u64),
}

/// The broker's view of one consumer (`ConsumerStats`), plus the topic it covers.
#[derive(Debug, Clone, Default)]
pub struct ConsumerStats {
    /// The topic (partition).
    pub topic: String,
    /// Messages per second delivered.
    pub msg_rate_out: f64,
    /// Bytes per second delivered.
    pub msg_throughput_out: f64,
    /// Messages per second redelivered.
    pub msg_rate_redeliver: f64,
    /// Consumer name.
    pub consumer_name: String,
    /// Permits the broker holds for this consumer.
    pub available_permits: u64,
    /// Messages delivered and not yet acknowledged.
    pub unacked_messages: u64,
    /// Whether the broker stopped delivering because of too many unacked messages.
    pub blocked_consumer_on_unacked_msgs: bool,
    /// Messages in the subscription's backlog.
    pub msg_backlog: u64,
    /// Subscription type as the broker names it.
    pub subscription_type: String,
}

impl Actor {
    /// The subscription's old positions mean nothing any more (a seek moved it; the topic
    /// migrated to another cluster, whose message ids are unrelated): acks, redeliveries and
    /// receipts of them are dropped.
    pub(super) fn forget_positions(&mut self) {
        self.chunks.clear();
        self.book.clear();
        self.seek_ends_receipts();
        if let Some(owed) = self.owed.as_mut() {
            owed.clear();
        }
        self.unacked.clear();
        self.nacks.clear();
    }

    /// The topic migrated to another cluster (PIP-188): the old cluster let it go once this
    /// subscription had acked everything there, so nothing of it is owed; the new cluster's
    /// message ids may equal old ones, which must not count as acked there.
    pub(super) fn migrated(&mut self) {
        self.forget_positions();
        *self.shared.last_dequeued.lock().expect("last_dequeued lock") = None;
        // The old cluster ended the topic because it goes on in the new one.
        self.shared.reached_end.store(false, Ordering::Release);
        if !self.opts.durable {
            // A reader read everything the old cluster had: all the new one has comes after.
            self.opts.start_message_id = Some(MessageId::EARLIEST);
            self.opts.start_inclusive = true;
        }
    }

    pub(super) async fn seek(&mut self, target: SeekTarget) -> Result<()> {
        let conn = self.connection("not connected; cannot seek now")?;
        self.flush_acks();
        let (id, time) = match &target {
            SeekTarget::Id(id) => (Some(id.entry_data()), None),
            SeekTarget::PublishTime(t) => (None, Some(*t)),
        };
        // After a seek to the end, what was published before it is not "available": remember
        // where the end was (the broker drops this consumer at the seek, so ask first).
        let end = match &target {
            SeekTarget::Id(id) if *id == MessageId::LATEST => Some(self.last_message_id().await?),
            _ => None,
        };
        conn.request(|rid| commands::seek(self.consumer_id, rid, id.clone(), time))
            .await?;
        // The broker disconnects the consumer after a seek; drop what was queued before it.
        self.epoch_bump();
        self.forget_positions();
        *self.shared.last_dequeued.lock().expect("last_dequeued lock") = end.filter(|e| e.entry_id >= 0);
        // A non-durable cursor does not outlive the reconnect the broker forces after a seek,
        // so the reader must ask for the new position itself.
        match target {
            SeekTarget::Id(id) => {
                self.not_before_ms = None;
                if !self.opts.durable {
                    // Inclusive of the target message; "latest" stays after the last one.
                    self.opts.start_inclusive = id != MessageId::LATEST;
                    self.opts.start_message_id = Some(id);
                }
            }
            SeekTarget::PublishTime(t) => {
                if !self.opts.durable {
                    self.opts.start_message_id = Some(MessageId::EARLIEST);
                    self.not_before_ms = Some(t);
                }
            }
        }
        // The broker closed the consumer before it answered (its `CloseConsumer` is already
        // on the way to the actor): detach now, so that a call right after the seek waits for
        // the reattach (see `Command::Seek`) instead of reaching a consumer the broker dropped.
        self.disconnect(Duration::ZERO);
        self.detached_by_seek = true;
        Ok(())
    }

    /// The subscription's connection, or a `Connect` error saying `why` while detached.
    pub(super) fn connection(&self, why: &'static str) -> Result<Connection> {
        self.link
            .conn()
            .cloned()
            .ok_or_else(|| Error::new(ErrorKind::Connect, why))
    }

    /// Sends `command(consumer_id, request_id)`, a question about this consumer, and waits for
    /// the broker's answer.
    async fn ask(&mut self, command: fn(u64, u64) -> BaseCommand) -> Result<Frame> {
        let consumer_id = self.consumer_id;
        Ok(self
            .connection("not connected")?
            .request(|rid| command(consumer_id, rid))
            .await?)
    }

    pub(super) async fn last_message_id(&mut self) -> Result<MessageId> {
        let f = self.ask(commands::get_last_message_id).await?;
        let resp = f.command.get_last_message_id_response.unwrap_or_default();
        let mut id = MessageId::from_data(&resp.last_message_id);
        id.topic = Some(self.shared.topic.clone());
        Ok(id)
    }

    pub(super) async fn stats(&mut self) -> Result<ConsumerStats> {
        let f = self.ask(commands::consumer_stats).await?;
        let r = f.command.consumer_stats_response.unwrap_or_default();
        if let Some(code) = r.error_code {
            return Err(Error::from_code(code, r.error_message.as_deref().unwrap_or("")));
        }
        Ok(ConsumerStats {
            topic: self.shared.topic.to_string(),
            msg_rate_out: r.msg_rate_out.unwrap_or(0.0),
            msg_throughput_out: r.msg_throughput_out.unwrap_or(0.0),
            msg_rate_redeliver: r.msg_rate_redeliver.unwrap_or(0.0),
            consumer_name: r.consumer_name.unwrap_or_default(),
            available_permits: r.available_permits.unwrap_or(0),
            unacked_messages: r.unacked_messages.unwrap_or(0),
            blocked_consumer_on_unacked_msgs: r.blocked_consumer_on_unacked_msgs.unwrap_or(false),
            msg_backlog: r.msg_backlog.unwrap_or(0),
            subscription_type: r.r#type.unwrap_or_default(),
        })
    }
}
